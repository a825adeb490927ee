"""Save cadence learned from the job, and the trigger of each checkpoint kind."""

from __future__ import annotations

from explain_fixtures import SAVE_S, Scenario, healthy_job

from synestra_cli.explain.job import explain_job
from synestra_cli.explain.rules import SLOW_SAVE_FACTOR
from synestra_cli.explain.triggers import healthy_save_s, learn_cadence


def test_cadence_is_the_interval_dividing_most_saves():
    assert learn_cadence([500, 1000, 1370, 1500, 2000]) == 500
    assert learn_cadence([1000, 2000, 2350, 3000]) == 1000
    assert learn_cadence([1000, 2000, 2350]) == 1000
    assert learn_cadence([1000, 2000, 3000, 3400]) == 1000  # ties (1000 vs 3400 - 3000): the rounder
    assert learn_cadence([4, 9]) is None and learn_cadence([1, 800]) is None  # too little evidence
    assert learn_cadence([]) is None


def test_healthy_save_is_the_lower_quartile_so_a_mostly_slow_filesystem_still_shows():
    # Three of five saves at 6x (a filesystem slow for most of a short job): the median is the slow
    # duration and would flag nothing; the lower quartile is the healthy one and flags all three.
    saves = [30.0, 180.0, 30.0, 180.0, 180.0]
    baseline = healthy_save_s(saves)
    assert baseline == 30.0
    assert [d > SLOW_SAVE_FACTOR * baseline for d in saves] == [False, True, False, True, True]
    assert healthy_save_s([10.0, 20.0]) == 12.5  # interpolated between the two
    assert healthy_save_s([42.0]) == 42.0 and healthy_save_s([]) is None


def test_a_filesystem_slow_for_three_quarters_of_a_job_is_found_by_its_fastest_pair_of_saves():
    # Seven of nine saves at 6x: the lower quartile is a slow save and flagged nothing. The two fast ones,
    # alike, are the healthy save; one fast save alone (a partial line?) is not enough to call the rest slow.
    saves = [180.0, 30.0, 180.0, 175.0, 31.0, 180.0, 185.0, 180.0, 178.0]
    assert healthy_save_s(saves) == 30.0
    assert sum(d > SLOW_SAVE_FACTOR * healthy_save_s(saves) for d in saves) == 7
    assert healthy_save_s([30.0, 180.0, 180.0, 175.0, 185.0]) == 175.0  # one fast save alone: the quartile
    # a healthy job's spread is left to the quartile: its fastest pair does not make its slower saves slow
    noisy = [10.0, 14.0, 19.0, 22.0, 25.0]
    assert healthy_save_s(noisy) == 14.0 and not any(d > SLOW_SAVE_FACTOR * 14.0 for d in noisy)


def test_final_save_needs_a_finished_job_and_no_later_progress(conn):
    healthy_job(conn, attempts_end_state="FAILED")
    triggers = [c.trigger for c in explain_job(conn, "100").checkpoints]
    assert triggers[-1] == "periodic"  # the attempt failed after it: not the end of training


def test_off_cadence_save_is_reactive_and_slow_save_is_flagged(conn):
    sc = Scenario(conn).cluster()
    t = 0.0
    for it, dur in ((200, SAVE_S), (400, SAVE_S), (450, SAVE_S), (600, 5 * SAVE_S), (800, SAVE_S)):
        t = sc.steps(1, t, it - 40 if it == 450 else it - 190 if it != 600 else 460, it)
        sc.checkpoint(1, "save", it, t, dur)
        t += dur
    sc.attempt(1, -60, t + 30, "RUNNING")
    got = {c.iteration: (c.trigger, c.slow) for c in explain_job(conn, "100").checkpoints}
    assert got == {
        200: ("periodic", False),
        400: ("periodic", False),
        450: ("reactive", False),
        600: ("periodic", True),
        800: ("final", False),
    }


def test_restore_after_a_failed_attempt_is_a_restart(conn):
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    sc.attempt(1, -60, t + 100, "NODE_FAIL", "0:0")
    sc.checkpoint(2, "restore", 200, t + 400, 30)
    sc.attempt(2, t + 380, t + 900, "COMPLETED")
    restore = [c for c in explain_job(conn, "100").checkpoints if c.kind == "restore"][0]
    assert restore.trigger == "restart" and restore.cause is not None
