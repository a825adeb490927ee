"""Job reconciliation (sacct attempts <-> log attempt segments) and the `synestra jobs` command."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.cli.main import cli
from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.query.jobs import attempt_mapping, job_ids, job_summary, reconciled_attempts
from synestra_cli.store import open_store

# Job 4242: attempt 1 10:00-12:00 (node failure), requeued, attempt 2 12:10 - next day 14:10:30 (UTC).
SACCT = """\
JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES
4242|pretrain-7b|alice|NODE_FAIL|0:0|2026-11-28T10:00:00|2026-11-28T12:00:00|02:00:00|gpu-[001-004]|cpu=64,gres/gpu=32,node=4
4242.batch|batch||CANCELLED|0:15|2026-11-28T10:00:00|2026-11-28T12:00:03|02:00:03|gpu-001|cpu=16,gres/gpu=8,node=1
4242|pretrain-7b|alice|COMPLETED|0:0|2026-11-28T12:10:00|2026-11-29T14:10:30|1-02:00:30|gpu-[001-003,009]|cpu=64,gres/gpu=32,node=4
"""  # noqa: E501
A2_START, A2_END = datetime(2026, 11, 28, 12, 10), datetime(2026, 11, 29, 14, 10, 30)


@pytest.fixture(autouse=True)
def only_sacct(monkeypatch):
    """Detection among sacct alone: other parsers' bugs must not fail these tests."""
    only_formats(monkeypatch, ["sacct"])


def _ingest_sacct(conn, tmp_path: Path, text: str = SACCT, name: str = "sacct.txt") -> None:
    path = tmp_path / name
    path.write_text(text)
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "loaded", report.error


def _log_source(conn, name: str = "slurm-4242.out") -> int:
    """A sources row standing for a training log (what the job-log parser writes)."""
    (sid,) = conn.execute("SELECT nextval('source_id_seq')").fetchall()[0]
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected) "
        "VALUES (?, ?, ?, 'megatron', 1, 0, 0)",
        [sid, name, f"sha-{sid}"],
    )
    return sid


def _log_attempts(conn, sid: int, spans: list[tuple[datetime | None, datetime | None]], job: str = "4242"):
    conn.executemany(
        "INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id) VALUES (?, ?, ?, ?, ?)",
        [(job, i, s, e, sid) for i, (s, e) in enumerate(spans, start=1)],
    )


def _mapping(conn) -> list[tuple]:
    return [(m["log_attempt"], m["attempt"], m["matched_by"]) for m in attempt_mapping(conn, "4242")]


def test_log_segments_match_sacct_attempts_by_time_overlap(conn, tmp_path):
    _ingest_sacct(conn, tmp_path)
    sid = _log_source(conn)
    # The second sacct attempt saw an in-place elastic restart: two log segments inside it.
    _log_attempts(
        conn,
        sid,
        [
            (datetime(2026, 11, 28, 10, 2), datetime(2026, 11, 28, 11, 58)),
            (datetime(2026, 11, 28, 12, 12), datetime(2026, 11, 28, 20)),
            (datetime(2026, 11, 28, 20, 5), datetime(2026, 11, 29, 14, 9)),
        ],
    )
    assert _mapping(conn) == [(1, 1, "overlap"), (2, 2, "overlap"), (3, 2, "overlap")]
    attempts = reconciled_attempts(conn, "4242")
    assert [(a["attempt"], a["state"], a["origin"], a["start_ts"]) for a in attempts] == [
        (1, "NODE_FAIL", "sacct", datetime(2026, 11, 28, 10)),
        (2, "COMPLETED", "sacct", A2_START),
    ]
    assert attempts[1]["log_start_ts"] == datetime(2026, 11, 28, 12, 12)
    assert attempts[1]["log_end_ts"] == datetime(2026, 11, 29, 14, 9)
    assert attempts[0]["hosts"] == ["gpu-001", "gpu-002", "gpu-003", "gpu-004"] and attempts[0]["gpus"] == 32


def test_a_segment_outside_every_attempt_goes_to_the_nearest_start(conn, tmp_path):
    _ingest_sacct(conn, tmp_path)
    _log_attempts(
        conn,
        _log_source(conn),
        [
            (datetime(2026, 11, 28, 13, 30), datetime(2026, 11, 28, 13, 40)),
            (datetime(2026, 11, 28, 8), datetime(2026, 11, 28, 9)),
        ],
    )
    assert _mapping(conn) == [(1, 2, "overlap"), (2, 1, "nearest")]


def test_untimed_log_maps_by_order_and_steps_get_estimated_times(conn, tmp_path):
    _ingest_sacct(conn, tmp_path)
    sid = _log_source(conn)
    _log_attempts(conn, sid, [(None, None)])  # truncate-mode log: only the last attempt, no timestamps
    conn.executemany(
        "INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, source_id, line) "
        "VALUES ('4242', 1, ?, NULL, 'none', ?, ?)",
        [(it, sid, it) for it in range(10, 101, 10)],
    )
    conn.execute(
        "INSERT INTO checkpoints (job_id, attempt, kind, iteration, ts_precision, source_id, line) "
        "VALUES ('4242', 1, 'save', 50, 'none', ?, 55)",
        [sid],
    )
    assert _mapping(conn) == [(1, 2, "order")]
    steps = conn.execute(
        "SELECT attempt, iteration, ts, ts_precision FROM steps_reconciled ORDER BY iteration"
    ).fetchall()
    span = A2_END - A2_START
    # Uniform progress from one logging interval before iteration 10 (attempt start) to 100 (attempt end).
    assert [s[2] for s in steps] == [A2_START + span * (it / 100) for it in range(10, 101, 10)]
    assert {(s[0], s[3]) for s in steps} == {(2, "estimated")}
    ckpt = conn.execute("SELECT attempt, start_ts, ts_precision FROM checkpoints_reconciled").fetchall()
    assert ckpt == [(2, A2_START + span / 2, "estimated")]


def test_more_untimed_segments_than_attempts_align_on_the_last(conn, tmp_path):
    _ingest_sacct(conn, tmp_path)
    _log_attempts(conn, _log_source(conn), [(None, None)] * 3)
    assert _mapping(conn) == [(1, 1, "order"), (2, 1, "order"), (3, 2, "order")]


def test_without_sacct_the_log_attempts_stand(conn):
    sid = _log_source(conn)
    t0 = datetime(2026, 11, 28, 10)
    _log_attempts(conn, sid, [(t0, t0 + timedelta(hours=1)), (t0 + timedelta(hours=2), t0 + timedelta(hours=3))])
    attempts = reconciled_attempts(conn, "4242")
    assert [(a["attempt"], a["origin"], a["state"], a["duration_s"]) for a in attempts] == [
        (1, "log", None, 3600.0),
        (2, "log", None, 3600.0),
    ]
    assert _mapping(conn) == [(1, 1, "log"), (2, 2, "log")]


def test_the_latest_sacct_export_of_a_job_wins(conn, tmp_path):
    running = "JobID|State|Start|End\n4242|RUNNING|2026-11-28T10:00:00|Unknown\n"
    done = "JobID|State|Start|End\n4242|COMPLETED|2026-11-28T10:00:00|2026-11-28T18:00:00\n"
    _ingest_sacct(conn, tmp_path, running, "a.txt")
    _ingest_sacct(conn, tmp_path, done, "b.txt")
    attempts = reconciled_attempts(conn, "4242")
    assert [(a["state"], a["end_ts"]) for a in attempts] == [("COMPLETED", datetime(2026, 11, 28, 18))]


def _fill_log(conn, sid: int) -> None:
    """Steps (one iteration logged twice by two segments), an async save, a restore, an incident."""
    _log_attempts(
        conn,
        sid,
        [
            (datetime(2026, 11, 28, 10, 2), datetime(2026, 11, 28, 11, 58)),
            (datetime(2026, 11, 28, 12, 12), datetime(2026, 11, 29, 14, 9)),
        ],
    )
    steps = [
        (1, 10, datetime(2026, 11, 28, 10, 30)),
        (1, 20, datetime(2026, 11, 28, 11)),
        (2, 20, datetime(2026, 11, 28, 12, 30)),
        (2, 30, datetime(2026, 11, 28, 13)),
    ]
    conn.executemany(
        "INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, source_id) "
        "VALUES ('4242', ?, ?, ?, 'exact', ?)",
        [(*s, sid) for s in steps],
    )
    ckpts = [(1, "save", 20, "scheduled"), (1, "save", 20, "finalized"), (2, "restore", 20, None)]
    conn.executemany(
        "INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, ts_precision, phase, "
        "source_id) VALUES ('4242', ?, ?, ?, TIMESTAMP '2026-11-28 11:00:00', 'exact', ?, ?)",
        [(*c, sid) for c in ckpts],
    )
    conn.execute(
        "INSERT INTO job_incidents (job_id, attempt, ts, ts_precision, kind, source_id) "
        "VALUES ('4242', 1, TIMESTAMP '2026-11-28 11:50:00', 'exact', 'nccl_timeout', ?)",
        [sid],
    )


def test_job_summary_counts_distinct_events_per_reconciled_attempt(conn, tmp_path):
    _ingest_sacct(conn, tmp_path)
    _fill_log(conn, _log_source(conn))
    (row,) = job_summary(conn)
    assert row == {
        "job": "4242",
        "name": "pretrain-7b",
        "user": "alice",
        "state": "COMPLETED",
        "attempts": 2,
        "gpus": 32,
        "n_hosts": 5,
        "hosts": ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-009"],
        "first_ts": datetime(2026, 11, 28, 10),
        "last_ts": A2_END,
        "steps": 4,
        "saves": 1,
        "restores": 1,
        "incidents": 1,
    }
    incidents = conn.execute("SELECT attempt, log_attempt, kind FROM job_incidents_reconciled").fetchall()
    assert incidents == [(1, 1, "nccl_timeout")]


def test_unknown_job_and_empty_store_are_domain_errors(conn, tmp_path):
    with pytest.raises(EmptyStoreError):
        job_summary(conn)
    _ingest_sacct(conn, tmp_path)
    assert job_ids(conn) == ["4242"]
    with pytest.raises(NotFoundError, match="4242"):
        reconciled_attempts(conn, "999")


def _file_store(db_path: Path, tmp_path: Path) -> None:
    with open_store(db_path) as conn:
        _ingest_sacct(conn, tmp_path)
        _fill_log(conn, _log_source(conn))


def test_cli_jobs_json_lists_the_reconciled_job(db_path, tmp_path):
    _file_store(db_path, tmp_path)
    result = CliRunner().invoke(cli, ["jobs", "--db", str(db_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "synestra.jobs/2"
    (job,) = doc["jobs"]
    assert not {"job_id", "nodes", "n_nodes"} & job.keys()  # one name per concept, as explain says
    assert (job["job"], job["attempts"], job["gpus"], job["steps"], job["saves"], job["restores"]) == (
        "4242",
        2,
        32,
        4,
        1,
        1,
    )
    assert job["first_ts"] == "2026-11-28T10:00:00.000Z" and job["hosts"][-1] == "gpu-009"


def test_cli_job_attempts_csv_and_unknown_job_exit_code(db_path, tmp_path):
    _file_store(db_path, tmp_path)
    ok = CliRunner().invoke(cli, ["jobs", "--db", str(db_path), "--job", "4242", "--format", "csv"])
    assert ok.exit_code == 0
    lines = ok.stdout.splitlines()
    assert lines[0].startswith("job,attempt,start_ts,end_ts,duration_s,state,exit_code")
    assert lines[1].startswith("4242,1,2026-11-28T10:00:00.000Z,2026-11-28T12:00:00.000Z,7200.0,NODE_FAIL,0:0")
    missing = CliRunner().invoke(cli, ["jobs", "--db", str(db_path), "--job", "999"])
    assert missing.exit_code == 5 and missing.stdout == "" and "999" in missing.stderr


def test_real_untimed_megatron_log_gets_step_times_from_sacct(conn, tmp_path, monkeypatch):
    """End to end with the Megatron parser: a real log without timestamps, a sacct row for its job."""
    only_formats(monkeypatch, ["sacct", "megatron"])
    log = REAL_SAMPLES / "training" / "gh-epfllm-megatron-llm-11_iteration-lines_no-timestamp.log"
    report = ingest_file(conn, log, IngestOptions(job_id="4242"))
    assert report.status == "loaded" and report.format == "megatron", report.error
    _ingest_sacct(conn, tmp_path, "JobID|State|Start|End\n4242|COMPLETED|2026-11-28T10:00:00|2026-11-28T10:09:20\n")
    steps = conn.execute("SELECT attempt, iteration, ts, ts_precision FROM steps_reconciled ORDER BY iteration")
    # Iterations 201..204 spread over the 560 s attempt: one per 140 s (the log prints ~139-140 s/iteration).
    t0 = datetime(2026, 11, 28, 10)
    expected = [(1, it, t0 + timedelta(seconds=140 * (it - 200)), "estimated") for it in range(201, 205)]
    assert steps.fetchall() == expected
    assert _mapping(conn) == [(1, 1, "order")]
