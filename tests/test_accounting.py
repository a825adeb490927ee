"""Tax buckets on hand-built job histories whose every second is known."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synestra_cli.accounting.buckets import BUCKETS
from synestra_cli.accounting.report import job_doc, tax_report
from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.store.connect import memory_store

T0 = datetime(2026, 11, 1, 0, 0, 0)


class JobBuilder:
    """Writes one job's sacct attempts and Megatron-like log rows the way the parsers do."""

    def __init__(self, conn, job_id: str = "42", gpus: int = 16):
        self.conn, self.job = conn, job_id
        conn.execute("INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected) "
                     "VALUES (1, 'sacct.txt', 'a', 'sacct', 0, 0, 0), (2, '42.log', 'b', 'megatron', 0, 0, 0)")
        conn.execute("INSERT INTO jobs (job_id, gpus, source_id) VALUES (?, ?, 1)", [job_id, gpus])

    def attempt(self, n: int, start: float, end: float, state: str, log_start: float, log_end: float):
        self.conn.execute("INSERT INTO attempts (job_id, attempt, start_ts, end_ts, state, source_id) "
                          "VALUES (?, ?, ?, ?, ?, 1)", [self.job, n, T0 + timedelta(seconds=start),
                                                        T0 + timedelta(seconds=end), state])
        self.conn.execute("INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id) VALUES (?, ?, ?, ?, 2)",
                          [self.job, n, T0 + timedelta(seconds=log_start), T0 + timedelta(seconds=log_end)])

    def steps(self, attempt: int, first_iter: int, last_iter: int, t_first: float, step_s: float):
        """One line per iteration; returns the time the last one ended."""
        rows = [(self.job, attempt, i, T0 + timedelta(seconds=t_first + step_s * (i - first_iter + 1)), step_s)
                for i in range(first_iter, last_iter + 1)]
        self.conn.executemany("INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, step_time_s, "
                              "source_id) VALUES (?, ?, ?, ?, 'exact', ?, 2)", rows)
        return t_first + step_s * (last_iter - first_iter + 1)

    def checkpoint(self, attempt: int, kind: str, iteration: int, start: float, end: float | None):
        self.conn.execute(
            "INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, end_ts, ts_precision, source_id) "
            "VALUES (?, ?, ?, ?, ?, ?, 'exact', 2)",
            [self.job, attempt, kind, iteration, T0 + timedelta(seconds=start),
             None if end is None else T0 + timedelta(seconds=end)])


def crash_and_resume(conn):
    """Attempt 1 saves at 20, crashes after 50 and hangs 600 s; attempt 2 restores 20 and finishes 100."""
    b = JobBuilder(conn)
    b.attempt(1, 0, 1260, "FAILED", 100, 660)
    b.attempt(2, 1500, 2520, "COMPLETED", 1550, 2510)
    b.steps(1, 1, 20, 100, 10.0)                       # 100 s start-up, then 20 steps: t = 300
    b.checkpoint(1, "save", 20, 300, 360)               # 60 s save
    b.steps(1, 21, 50, 360, 10.0)                       # last progress at 660, then hang to 1260
    b.checkpoint(2, "restore", 20, 1550, 1610)          # requeue 240 s, 50 s start-up + 60 s restore + 40 s
    b.steps(2, 21, 100, 1650, 10.0)                     # ... to 2450
    b.checkpoint(2, "save", 100, 2450, 2510)            # final save, exit at 2520


def test_a_crash_and_resume_is_partitioned_second_by_second(conn):
    crash_and_resume(conn)
    (job,) = tax_report(conn).jobs
    assert job.buckets.wall_s == 2520
    assert job.buckets.buckets_s == pytest.approx({
        "productive": 1000.0, "checkpoint_save": 120.0, "checkpoint_restore": 60.0,
        "startup": 100.0 + 90.0, "lost_work": 300.0, "hang": 600.0, "requeue": 240.0,
        "degraded_throughput": 0.0, "other": 10.0,
    })
    # tax: saves, restore, lost, hang, requeue and the restart's start-up (not the first attempt's)
    assert job.buckets.checkpoint_tax_s == pytest.approx(120 + 60 + 300 + 600 + 240 + 90)
    assert job.failures == 1


def test_the_json_document_carries_headlines_and_gpu_hours(conn):
    crash_and_resume(conn)
    doc = job_doc(tax_report(conn, price=2.0).jobs[0], price=2.0)
    assert doc["gpus"] == 16 and doc["gpu_hours"] == pytest.approx(2520 * 16 / 3600)
    assert doc["goodput"] == pytest.approx(1000 / 2520)
    assert doc["usd"]["checkpoint_tax"] == pytest.approx((120 + 60 + 300 + 600 + 240 + 90) * 16 / 3600 * 2.0)
    assert set(doc["buckets_s"]) == set(BUCKETS)
    assert "too few" in doc["interval"]["note"]


def test_degraded_steps_inside_a_window_are_hidden_tax(conn):
    b = JobBuilder(conn)
    b.attempt(1, 0, 3000, "COMPLETED", 100, 2990)
    t = b.steps(1, 1, 100, 100, 10.0)
    t = b.steps(1, 101, 130, t, 15.0)                  # 30 slow steps: 150 s above the ideal
    t = b.steps(1, 131, 200, t, 10.0)
    (job,) = tax_report(conn).jobs
    assert job.buckets.buckets_s["degraded_throughput"] == pytest.approx(150.0, abs=1.0)
    assert job.buckets.buckets_s["productive"] == pytest.approx(2000.0)
    assert sum(job.buckets.buckets_s.values()) == pytest.approx(3000.0)


def test_an_unknown_job_and_an_empty_store_are_told_apart(conn):
    with pytest.raises(EmptyStoreError):
        tax_report(conn)
    crash_and_resume(conn)
    with pytest.raises(NotFoundError, match="synestra jobs"):
        tax_report(conn, job_id="nope")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segments=st.lists(st.tuples(st.integers(5, 60), st.floats(1.0, 20.0), st.booleans(), st.integers(0, 900)),
                      min_size=1, max_size=4),
    startup=st.floats(0, 300), tail=st.floats(0, 900), requeue=st.floats(0, 600),
)
def test_buckets_always_sum_exactly_to_wall_time(segments, startup, tail, requeue):
    """Random attempt histories: whatever the logs say, the partition is exact and non-negative."""
    conn = memory_store()
    b = JobBuilder(conn)
    t, it = 0.0, 0
    for n, (steps, step_s, save, jitter) in enumerate(segments, start=1):
        start = t
        end_steps = b.steps(n, it + 1, it + steps, start + startup, step_s)
        if save:
            b.checkpoint(n, "save", it + steps, end_steps, end_steps + jitter / 10)
        it += steps // 2 if n < len(segments) else steps
        end = end_steps + tail + jitter
        b.attempt(n, start, end, "FAILED" if n < len(segments) else "COMPLETED", start + startup, end_steps)
        t = end + requeue
    (job,) = tax_report(conn).jobs
    values = job.buckets.buckets_s
    assert all(v >= -1e-6 for v in values.values()), values
    assert sum(values.values()) == pytest.approx(job.buckets.wall_s, abs=1e-6)
    conn.close()
