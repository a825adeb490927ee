"""The simulator's Megatron logs (appended attempts, launcher stamps, crashes) read back to its truth."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest
from conftest import JOB_LOG_FORMATS, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.simulate.joblog import write_megatron_log
from synestra_cli.simulate.jobs import simulate_job
from synestra_cli.simulate.model import Disturbance, JobSpec

T0 = datetime(2026, 11, 2)


@pytest.fixture(autouse=True)
def only_job_logs(monkeypatch):
    only_formats(monkeypatch, JOB_LOG_FORMATS)


def utc(us: int) -> datetime:
    return datetime(1970, 1, 1) + timedelta(microseconds=us)


@pytest.fixture(scope="module")
def timeline():
    spec = JobSpec(
        job_id="7001",
        name="gpt-sim",
        user="sre",
        hosts=("gpu-001", "gpu-002"),
        gpus_per_node=8,
        submit=T0,
        start=T0 + timedelta(minutes=5),
        train_iters=900,
        time_limit_s=12 * 3600,
        step_s=6.0,
        save_every=200,
        save_s=30.0,
        restore_s=40.0,
        startup_s=60.0,
        requeue_s=600.0,
        disturbances=(
            Disturbance(kind="crash", start=T0 + timedelta(minutes=50), hang_s=600.0, incident="nccl_timeout", rank=5),
            Disturbance(kind="preempt", start=T0 + timedelta(hours=1, minutes=30)),
        ),
    )
    return simulate_job(spec, np.random.default_rng(7))


@pytest.fixture
def loaded(conn, tmp_path, timeline):
    path = write_megatron_log(tmp_path, timeline)
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "loaded" and report.format == "megatron", report.error
    assert report.rejected == 0
    return conn


def test_attempts_are_found_where_the_simulator_started_them(loaded, timeline):
    assert len(timeline.attempts) >= 3  # crashed, preempted, completed
    got = loaded.execute("SELECT attempt, start_ts FROM attempts ORDER BY attempt").fetchall()
    assert got == [(a.number, utc(a.start)) for a in timeline.attempts]


def test_checkpoints_match_the_truth_with_their_attempt_iteration_and_times(loaded, timeline):
    got = loaded.execute(
        "SELECT attempt, kind, iteration, start_ts, end_ts FROM checkpoints ORDER BY attempt, start_ts"
    ).fetchall()
    want = sorted((c.attempt, c.kind, c.iteration, utc(c.start), utc(c.end)) for c in timeline.checkpoints)
    assert got == want


def test_logged_iterations_are_a_subset_of_the_truth_per_attempt(loaded, timeline):
    got = loaded.execute("SELECT attempt, iteration FROM steps").fetchall()
    truth = set(zip(timeline.steps.attempt.tolist(), timeline.steps.iteration.tolist(), strict=True))
    assert got and set(got) <= truth
    # iterations redone after the restore are kept, once per attempt
    dup = loaded.execute(
        "SELECT count(*) FROM (SELECT iteration FROM steps GROUP BY iteration HAVING count(DISTINCT attempt) > 1)"
    ).fetchone()[0]
    assert dup > 0


def test_the_watchdog_incident_starts_where_the_hang_began(loaded, timeline):
    crashed = next(a for a in timeline.attempts if a.failure and a.failure.incident == "nccl_timeout")
    got = loaded.execute("SELECT DISTINCT attempt, ts FROM job_incidents WHERE kind = 'nccl_timeout'").fetchall()
    assert {g[0] for g in got} == {crashed.number}
    # each rank's ts = its log time minus "ran for": within a second of the fault
    assert all(abs((g[1] - utc(crashed.failure.at)).total_seconds()) < 1 for g in got)
