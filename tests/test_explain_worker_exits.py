"""explain reads torchrun's worker exit codes (worker_failed incidents, formats/training/torch_failures.py): a
SIGKILL with an oom-kill line near it is the OOM killer's, without one only a likely OOM or external kill; a
SIGABRT next to an NCCL watchdog timeout is the watchdog's; exit code 1 is a Python exception; a SIGTERM is a
preemption or a cancel only when sacct agrees (else torchrun stopping the others). Truth tests: each case
has one right answer."""

from __future__ import annotations

import json

import pytest
from conftest import REAL_SAMPLES
from explain_fixtures import HOSTS, LOG, Scenario, at

from synestra_cli.explain.inputs import job_inputs
from synestra_cli.explain.job import explain_job, telemetry_windows, unexplained_failures
from synestra_cli.explain.reason import Evidence, plan_attempt_failure
from synestra_cli.explain.triggers import classify
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths

TRAINING = REAL_SAMPLES / "training"
pytestmark = pytest.mark.truth


def _worker(sc: Scenario, t: float, code: int, signal: str | None, host: str, rank: int, root: bool = False) -> None:
    """A worker_failed incident as torch_failures writes it (the fields explain reads)."""
    fields = {"exitcode": code, "signal": signal, "host": host, "root_cause": root, "local_rank": rank % 8}
    sc.conn.execute(
        "INSERT INTO job_incidents VALUES "
        "(?, 1, ?, ?, 'exact', 'worker_failed', ?, NULL, NULL, NULL, NULL, ?, ?, ?, ?)",
        [
            sc.job,
            at(t),
            at(t),
            rank,
            f"worker rank {rank} failed with exit code {code}",
            json.dumps(fields),
            sc.source(LOG, "megatron"),
            500 + rank,
        ],
    )


def _failed_job(conn, state: str = "FAILED", exit_code: str = "1:0") -> Scenario:
    """Attempt 1 trains for ~150 s, then its workers fail at t=200; sacct ends it at 230."""
    sc = Scenario(conn).cluster()
    sc.steps(1, 0, 10, 150)
    sc.attempt(1, -60, 230, state, exit_code)
    return sc


def _failure(conn):
    [f] = explain_job(conn, "100").failures
    return f


def test_sigkill_with_slurmstepd_oom_kill_line_is_the_oom_killer(conn):
    sc = _failed_job(conn, "OUT_OF_MEMORY", "0:125")
    _worker(sc, 200, -9, "SIGKILL", HOSTS[2], 17, root=True)
    _worker(sc, 201, -15, "SIGTERM", HOSTS[0], 0)  # torchrun stopping the others: not the story
    sc.incident(1, 228, "oom", message="slurmstepd: error: Detected 1 oom-kill event(s) in StepId=100.0 cgroup.")
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("host.oom", HOSTS[2])
    assert f.cause.confidence >= 0.8
    worker = next(lk for lk in f.chain if "exit code -9" in lk.signal)
    assert "OOM killer" in worker.signal and worker.evidence["signal"] == "SIGKILL"


def test_sigkill_with_the_kernels_oom_kill_line_on_its_host_is_the_oom_killer(conn):
    sc = _failed_job(conn)
    _worker(sc, 200, 137, "SIGKILL", HOSTS[1], 9)  # 128 + 9, as a shell reports it
    sc.event(199, HOSTS[1], "oom_kill", None, None, "Out of memory: Killed process 4242 (python) total-vm:1TB")
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("host.oom", HOSTS[1])
    assert f.cause.confidence >= 0.8


def test_sigkill_when_sacct_says_out_of_memory_is_the_oom_killer(conn):
    sc = _failed_job(conn, "OUT_OF_MEMORY", "0:125")
    _worker(sc, 200, -9, "SIGKILL", HOSTS[3], 25)
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("host.oom", HOSTS[3]) and f.cause.confidence >= 0.8
    assert any("killed by the OOM killer (sacct: OUT_OF_MEMORY)" in lk.signal for lk in f.chain)


def test_sigkill_without_an_oom_kill_line_is_a_likely_oom_or_external_kill(conn):
    sc = _failed_job(conn)
    _worker(sc, 200, -9, "SIGKILL", HOSTS[3], 25)
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("host.oom", HOSTS[3])
    assert f.cause.confidence <= 0.4
    assert any("likely an OOM kill or an external kill" in lk.signal for lk in f.chain)


def test_sigabrt_after_an_nccl_watchdog_timeout_is_the_watchdogs(conn):
    sc = _failed_job(conn)
    sc.incident(1, 150, "nccl_timeout", ran_for_s=45, host=HOSTS[0])
    _worker(sc, 200, -6, "SIGABRT", HOSTS[0], 0, root=True)
    f = _failure(conn)
    assert f.cause.category != "software.crash"  # the abort is the watchdog's doing, not the job's own error
    worker = next(lk for lk in f.chain if "exit code -6" in lk.signal)
    assert "NCCL watchdog" in worker.signal
    assert any(lk.layer == "collective" for lk in f.chain)


def test_sigabrt_alone_is_a_crash(conn):
    sc = _failed_job(conn)
    _worker(sc, 200, -6, "SIGABRT", HOSTS[1], 8)
    assert _failure(conn).cause.category == "software.crash"


def test_exit_code_1_is_a_python_exception(conn):
    sc = _failed_job(conn)
    _worker(sc, 200, 1, None, HOSTS[1], 8, root=True)
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("software.crash", HOSTS[1])


def test_sigterm_with_sacct_cancelled_is_the_scheduler(conn):
    # Cancelled (signal 15) after its save at iteration 100, requeued from it: only the workers' SIGTERM lines
    # say why (no Slurm notice in the log). The restore is the scheduler's doing, no host of the job is blamed.
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 150)
    sc.checkpoint(1, "save", 100, t - 60)
    sc.attempt(1, -60, t + 30, "CANCELLED by 1042", "0:15")
    _worker(sc, t + 20, -15, "SIGTERM", HOSTS[0], 0)
    sc.checkpoint(2, "restore", 100, t + 120)
    t2 = sc.steps(2, t + 150, 110, 200)
    sc.attempt(2, t + 100, t2 + 30, "COMPLETED")
    job = explain_job(conn, "100")
    assert job.failures == []  # a cancel is no failure: the SIGTERMed workers do not make it one
    restore = next(c for c in job.checkpoints if c.kind == "restore")
    assert (restore.cause.category, restore.cause.host) == ("scheduler.preemption", None)
    assert any("stopped by the scheduler (sacct: CANCELLED by 1042)" in lk.signal for lk in restore.chain)


def test_sigterm_when_sacct_says_failed_is_torchrun_stopping_the_others(conn):
    sc = _failed_job(conn)
    _worker(sc, 200, -15, "SIGTERM", HOSTS[0], 0)
    _worker(sc, 199, -9, "SIGKILL", HOSTS[2], 16)
    f = _failure(conn)
    assert (f.cause.category, f.cause.host) == ("host.oom", HOSTS[2])


def test_a_real_torchrun_sigkill_is_a_likely_oom_kill_at_low_confidence(conn):
    # ColossalAI #3514: `failed (exitcode: -9) local_rank: 3 (pid: 812917)` after SIGTERMs to its peers, no
    # oom-kill line, no sacct, no time: a likely OOM kill, said with low confidence.
    ingest_paths(conn, [TRAINING / "gh-colossalai-3514_torchrun-pylogging_exitcode-9.log"], IngestOptions())
    [job] = [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM job_incidents").fetchall()]
    [f] = explain_job(conn, job).failures
    assert f.cause.category == "host.oom" and f.cause.confidence <= 0.4
    assert any("exit code -9 (SIGKILL): likely an OOM kill" in lk.signal for lk in f.chain)


def test_a_failure_nothing_dates_has_no_effect_to_attribute(conn):
    # The same real log: no stamp on any line, no sacct. Nothing dates the failure, so there is no effect to
    # read telemetry around or to score causes against (once an effect in year 1, which a window before it
    # overflowed); the verdict of its workers' exit codes stands, with no time.
    ingest_paths(conn, [TRAINING / "gh-colossalai-3514_torchrun-pylogging_exitcode-9.log"], IngestOptions())
    [job] = [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM job_incidents").fetchall()]
    inputs = job_inputs(conn, job)
    scope, inc = inputs.scope, inputs.incidents
    classified = classify(conn, job, scope.attempts, inc, inputs.checkpoints, inputs.last_iterations)
    [att] = unexplained_failures(scope, classified, inc)
    p = plan_attempt_failure(att, Evidence(scope, [], inputs.windows, inc))
    assert p.effect is None and p.fallback.category == "host.oom" and p.fallback.first_signal is None
    assert telemetry_windows(conn, inputs) == []


def test_a_real_childfailederror_exit_code_1_is_a_python_exception(conn):
    # LLaMA-Factory #7032: ChildFailedError, root cause exitcode 1 (its traceback is in the worker's log).
    ingest_paths(conn, [TRAINING / "gh-llamafactory-7032_childfailederror_exitcode1.log"], IngestOptions())
    [job] = [r[0] for r in conn.execute("SELECT DISTINCT job_id FROM job_incidents").fetchall()]
    [f] = explain_job(conn, job).failures
    assert f.cause.category == "software.crash"
    assert any("an uncaught Python exception" in lk.signal for lk in f.chain)
