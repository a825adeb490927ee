"""Tax buckets on hand-built job histories whose every second is known."""

from __future__ import annotations

import pytest
from builders import JobBuilder, crash_and_resume
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synestra_cli.accounting.buckets import BUCKETS
from synestra_cli.accounting.report import job_doc, tax_report
from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.store.connect import memory_store


def test_a_crash_and_resume_is_partitioned_second_by_second(conn):
    crash_and_resume(conn)
    (job,) = tax_report(conn).jobs
    assert job.buckets.wall_s == 2520
    assert job.buckets.buckets_s == pytest.approx(
        {
            "productive": 1000.0,
            "checkpoint_save": 120.0,
            "checkpoint_restore": 60.0,
            "startup": 100.0 + 90.0,
            "lost_work": 300.0,
            "hang": 600.0,
            "requeue": 240.0,
            "degraded_throughput": 0.0,
            "other": 10.0,
        }
    )
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
    t = b.steps(1, 101, 130, t, 15.0)  # 30 slow steps: 150 s above the ideal
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


@pytest.mark.heavy
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    segments=st.lists(
        st.tuples(st.integers(5, 60), st.floats(1.0, 20.0), st.booleans(), st.integers(0, 900)), min_size=1, max_size=4
    ),
    startup=st.floats(0, 300),
    tail=st.floats(0, 900),
    requeue=st.floats(0, 600),
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
