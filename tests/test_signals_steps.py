"""Step-time signals: robust baseline, ideal step time, degradation windows with onset and end."""

from __future__ import annotations

from explain_fixtures import LOG_INTERVAL, STEP_S, Scenario, at

from synestra_cli.accounting.buckets import ideal_step_times
from synestra_cli.signals.steps import baselines, degradation_windows


def ideal_step_time(conn, job_id):
    windows = [(job_id, w.onset, w.end) for w in degradation_windows(conn, job_id)]
    return ideal_step_times(conn, [job_id], windows).get(job_id)


def test_baseline_ignores_a_slow_stretch_and_ideal_step_time_excludes_it(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 1000, slow=(300, 500, 2.0))
    base = baselines(conn, "100")[0]
    assert base.attempt is None and base.median_s == STEP_S and base.mad_s == 0.0
    assert ideal_step_time(conn, "100") == STEP_S


def test_degradation_window_has_onset_before_first_slow_line_and_end(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 1000, slow=(300, 500, 2.0))
    [w] = degradation_windows(conn, "100")
    assert w.onset == at(300) and w.first_slow == at(300 + LOG_INTERVAL * 2 * STEP_S)
    assert at(490) <= w.end <= at(520)
    assert w.factor == 2.0 and w.first_iteration == 310


def test_a_single_slow_line_is_not_a_window(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 1000, slow=(300, 305, 3.0))  # one logged interval only
    assert degradation_windows(conn, "100") == []


def test_windows_are_found_per_attempt(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 500, slow=(200, 300, 1.5))
    sc.steps(2, 2000, 510, 1000, slow=(2100, 2200, 1.5))
    assert [w.attempt for w in degradation_windows(conn, "100")] == [1, 2]


def test_job_without_steps_has_no_baseline(conn):
    assert baselines(conn, "100") == [] and ideal_step_time(conn, "100") is None
    assert degradation_windows(conn, "100") == []


def test_a_slowdown_covering_more_than_half_the_job_is_still_a_window(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 1000, slow=(400, 1e9, 1.3))  # 60 of the 100 lines are slow
    [w] = degradation_windows(conn, "100")
    assert w.baseline_s == STEP_S and w.factor == 1.3


def test_a_job_slow_for_most_of_its_life_keeps_its_healthy_stretch_as_baseline(conn):
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 1000, slow=(0, 700, 1.4))  # 70 of the 100 lines slow, from the start
    [w] = degradation_windows(conn, "100")
    assert w.baseline_s == STEP_S and w.factor == 1.4
