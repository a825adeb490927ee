"""A job that crashed before its first save has no checkpoint to explain: its attempt failures are
explained like restarts (issue 16, item 4), and their cost is charged to that cause."""

from __future__ import annotations

import json

from click.testing import CliRunner
from explain_fixtures import OTHER, Scenario, bus_id

from synestra_cli.accounting.kept.explanations import from_json
from synestra_cli.cli.main import cli
from synestra_cli.explain.job import explain_job


def _crashed_before_first_save(conn, requeued: bool = True) -> Scenario:
    """Attempt 1 trains to iteration 150 (first save due at 200), hangs at ~t=150 and fails at 750;
    attempt 2 (if requeued) starts from scratch, with no restore, and finishes."""
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 150)
    sc.incident(1, t + 5, "nccl_timeout", ran_for_s=600)
    sc.attempt(1, -60, t + 605, "FAILED", "1:0")
    if requeued:
        t2 = sc.steps(2, t + 700, 10, 200)
        sc.checkpoint(2, "save", 200, t2)
        sc.attempt(2, t + 680, t2 + 60, "COMPLETED")
    return sc


def test_crash_before_the_first_save_is_explained(conn):
    sc = _crashed_before_first_save(conn, requeued=False)
    sc.event(150, "gpu-003", "xid", bus_id(3), 79, "NVRM: Xid (PCI:0000:48:00): 79, GPU has fallen off the bus.")
    sc.event(100, OTHER, "xid", bus_id(1), 79)  # outside the job: never blamed
    job = explain_job(conn, "100")
    assert job.checkpoints == []
    [f] = job.failures
    assert (f.attempt, f.state, f.exit_code) == (1, "FAILED", "1:0")
    assert (f.cause.category, f.cause.host, f.cause.component) == ("gpu.fell_off_bus", "gpu-003", "gpu3")
    gpu = next(lk for lk in f.chain if lk.layer == "gpu")
    assert gpu.evidence["source"] == "/logs/syslog" and gpu.evidence["line"] == 42
    assert any(lk.layer == "collective" for lk in f.chain)


def test_a_failure_a_restore_explains_is_not_repeated(conn):
    from test_explain_scenarios import _crashed_job

    _crashed_job(conn)
    assert explain_job(conn, "100").failures == []


def test_requeued_from_scratch_without_evidence_says_unknown(conn):
    _crashed_before_first_save(conn)
    job = explain_job(conn, "100")
    [f] = job.failures
    assert f.attempt == 1 and f.cause.category == "unknown" and f.cause.confidence < 0.3
    # the requeued attempt's save is routine
    assert [c.trigger for c in job.checkpoints] == ["final"]


def test_preempted_attempt_is_not_a_failure(conn):
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 150)
    sc.incident(1, t, "sigterm")
    sc.attempt(1, -60, t + 30, "PREEMPTED", "0:15")
    assert explain_job(conn, "100").failures == []


def test_failures_round_trip_the_json_and_the_cli(conn, tmp_path):
    sc = _crashed_before_first_save(conn, requeued=False)
    sc.event(150, "gpu-001", "xid", bus_id(5), 48, "Xid 48: DBE")
    job = explain_job(conn, "100")
    doc = json.loads(json.dumps(job.to_json(), default=str))
    assert doc["failures"][0]["cause"]["category"] == "gpu.memory"
    again = from_json(json.loads(json.dumps(job.to_json(), default=lambda v: v.isoformat())))
    assert again.failures[0].cause == job.failures[0].cause


def test_failure_cost_is_charged_to_its_cause(conn):
    from synestra_cli.accounting.attribution import charges_for
    from synestra_cli.accounting.report import tax_report

    sc = _crashed_before_first_save(conn, requeued=True)
    sc.event(150, "gpu-001", "xid", bus_id(5), 48, "Xid 48: DBE")
    job = explain_job(conn, "100")
    jt = tax_report(conn, "100").jobs[0]
    lost = [c for c in charges_for(jt, job.checkpoints, job.failures) if c.bucket in ("lost_work", "hang")]
    assert lost and {(c.category, c.host, c.component) for c in lost} == {("gpu.memory", "gpu-001", "gpu5")}
    # without the failure explanation the same seconds were unknown
    assert {c.category for c in charges_for(jt, job.checkpoints) if c.bucket == "hang"} == {"unknown"}


def test_cli_table_shows_the_failure(tmp_path):
    from synestra_cli.store import open_store

    db = tmp_path / "s.duckdb"
    with open_store(db) as conn:
        sc = _crashed_before_first_save(conn, requeued=False)
        sc.event(150, "gpu-003", "xid", bus_id(3), 79, "GPU has fallen off the bus.")
    res = CliRunner().invoke(cli, ["explain", "--job", "100", "--db", str(db)])
    assert res.exit_code == 0, res.output
    assert "attempt 1 failed" in res.output and "gpu.fell_off_bus" in res.output
