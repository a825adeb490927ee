"""NVRx lines in training logs: straggler reports and warnings, rank-monitor hangs, ft_launcher restarts.

The samples are real (tests/data/real_samples/training/PROVENANCE.md): NeMo's resiliency demo notebook
output (8 ranks on one node, printed behind NeMo-Run's `ining-demo/0 [default0]:` prefix), the NeMo and
Megatron Bridge documentation's report and warnings (512 ranks).
"""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.signals.collectives import laggards_for

TRAINING = REAL_SAMPLES / "training"
DEMO = TRAINING / "nemo-resiliency-demo_nvrx-straggler-detection_nemo-run-prefix.log"
RESTART = TRAINING / "nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log"
REPORT_512 = TRAINING / "nemo-docs-resiliency_nvrx-straggler-report_512-ranks.log"
BRIDGE = TRAINING / "megatron-bridge-docs_nvrx-ft-hang-and-straggler-warnings.log"
NODE = "4809917ea058"


@pytest.fixture(autouse=True)
def job_logs(monkeypatch):
    only_formats(monkeypatch, ["nvrx_log", "nemo", "megatron", "torch_log"])


def _unprefixed(src, tmp_path):
    """The log as the paste normaliser will hand it over: NeMo-Run's `name/N ` and torchrun's `[defaultN]:`
    prefixes removed."""
    out = tmp_path / src.name
    out.write_text(re.sub(r"(?m)^ining-demo/0 (?:\[default\d+\]:)?", "", src.read_text()))
    return out


def _incidents(conn, kind):
    rows = conn.execute(
        "SELECT rank, ts, ts_precision, line, fields FROM job_incidents WHERE kind = ? ORDER BY line, rank", [kind]
    ).fetchall()
    return [(r, ts, prec, line, json.loads(f)) for r, ts, prec, line, f in rows]


def test_each_report_is_one_incident_naming_its_worst_rank_host_and_every_score(conn):
    report = ingest_file(conn, DEMO, IngestOptions(job_id="demo"))
    # a NeMo 2 log behind NeMo-Run's and torchrun's prefixes: read as NeMo once they are off, its NVRx lines too
    assert (report.status, report.format, report.rejected) == ("loaded", "nemo", 0)
    (rel, ind) = _incidents(conn, "straggler_report")
    assert (rel[0], rel[3], ind[0], ind[3]) == (5, 173, 0, 184)  # the header lines
    assert {k: rel[4][k] for k in ("report", "host", "score", "ranks", "listed")} == {
        "report": "relative",
        "host": NODE,
        "score": 0.97,
        "ranks": 8,
        "listed": 8,
    }
    assert [(s["rank"], s["score"]) for s in rel[4]["scores"]][:3] == [(5, 0.97), (4, 0.97), (1, 0.98)]
    assert ind[4]["report"] == "individual" and {s["score"] for s in ind[4]["scores"]} == {1.0}


def test_the_warning_names_each_straggler_with_its_node_and_the_stop_follows(conn):
    ingest_file(conn, DEMO, IngestOptions(job_id="demo"))
    named = _incidents(conn, "straggler")
    assert sorted(r for r, *_ in named) == [0, 1, 2, 4, 5, 6]
    assert {(f["host"], f["report"], line) for *_, line, f in named} == {(NODE, "relative", 194)}
    assert [line for *_, line, _ in _incidents(conn, "straggler_stop")] == [195]


def test_behind_nemo_runs_and_torchruns_prefixes_the_lines_are_timed_as_without_them(conn, tmp_path):
    ingest_file(conn, DEMO, IngestOptions(job_id="demo"))
    ingest_file(conn, _unprefixed(DEMO, tmp_path), IngestOptions(job_id="clean"))
    timed = conn.execute(
        "SELECT job_id, kind, min(ts), min(ts_precision), list(rank ORDER BY rank) FROM job_incidents "
        "WHERE kind LIKE 'straggler%' GROUP BY ALL ORDER BY kind, job_id"
    ).fetchall()
    at = datetime(2025, 3, 7, 22, 43, 58)
    # the report's header line takes its logger line's time (the line before); the warning has its own
    assert [row[1:] for row in timed if row[0] == "demo"] == [row[1:] for row in timed if row[0] == "clean"]
    assert [row[1:4] for row in timed if row[0] == "demo"] == [
        ("straggler", at, "exact"),
        ("straggler_report", at, "inferred"),
        ("straggler_stop", at, "exact"),
    ]


def test_a_large_job_report_lists_worst_and_best_and_says_how_many_ranks_were_scored(conn):
    report = ingest_file(conn, REPORT_512, IngestOptions(job_id="big"))
    assert (report.status, report.rejected) == ("loaded", 0)
    (rel, ind) = _incidents(conn, "straggler_report")
    assert (rel[0], rel[4]["host"], rel[4]["score"], rel[4]["ranks"], rel[4]["listed"]) == (
        76,
        "h100-001-253-012",
        0.94,
        512,
        10,
    )
    sections = [(s["rank"], s["section"]) for s in rel[4]["scores"]]
    assert sections[0] == (76, "worst") and sections[5] == (432, "best")
    # five ranks tie at 0.98: the worst is the first listed
    assert (ind[0], ind[4]["score"], ind[4]["report"]) == (76, 0.98, "individual")


def test_bare_rank_lists_and_the_rank_monitors_hang_verdicts(conn):
    report = ingest_file(conn, BRIDGE, IngestOptions(job_id="bridge"))
    assert (report.format, report.rejected) == ("nvrx_log", 0)
    named = [(r, f["report"]) for r, *_, f in _incidents(conn, "straggler")]
    assert sorted(named) == [
        (13, "relative"),
        (45, "relative"),
        (76, "relative"),
        (79, "individual"),
        (162, "individual"),
        (357, "individual"),
    ]
    hung = [(r, line, f["check"], f["waited_s"]) for r, _, _, line, f in _incidents(conn, "ft_hang_detected")]
    assert hung == [(34, 1, "heartbeat", 171.92), (58, 2, "heartbeat", 171.92)]


def test_the_current_rank_monitor_format_gives_host_cycle_and_section(conn, tmp_path):
    # The 2026 logger's shape (rank_monitor_server.py: `[{name}{pid}@{host}:{rank}] [Cycle N] ...`), written
    # from its format strings: no public capture of it was found.
    log = tmp_path / "ft.log"
    log.write_text(
        "[2026-01-05 10:00:00,000] [WARNING] [RankMonServer4242@gpu-07:12] [Cycle 2] Section 'step' has been "
        "open for 305.10 seconds. Timeout is 300.00 seconds.\n"
        "[2026-01-05 10:00:01,000] [WARNING] [RankMonServer4243@gpu-07:13] [Cycle 2] Was out of section for "
        "610.00 seconds. Timeout is 600.00 seconds.\n"
    )
    ingest_file(conn, log, IngestOptions(job_id="ft"))
    got = [
        (r, ts, f["host"], f["cycle"], f["check"], f["section"], f["waited_s"], f["timeout_s"])
        for r, ts, _, _, f in _incidents(conn, "ft_hang_detected")
    ]
    assert got == [
        (12, datetime(2026, 1, 5, 10, 0), "gpu-07", 2, "section", "step", 305.1, 300.0),
        (13, datetime(2026, 1, 5, 10, 0, 1), "gpu-07", 2, "out_of_section", None, 610.0, 600.0),
    ]


def test_ft_launcher_in_job_restart_is_an_elastic_restart_with_its_launcher_and_host(conn, tmp_path):
    report = ingest_file(conn, RESTART, IngestOptions(job_id="ft"))
    assert (report.status, report.format, report.rejected) == ("loaded", "nemo", 0)
    ((line, f),) = conn.execute("SELECT line, fields FROM job_incidents WHERE kind = 'elastic_restart'").fetchall()
    assert line == 629
    assert {k: json.loads(f)[k] for k in ("launcher", "host", "state", "attempts_left")} == {
        "launcher": "ft_launcher",
        "host": NODE,
        "state": "FAILED",
        "attempts_left": 3,
    }
    # dated behind the prefixes, as without them; the restart splits the log's two attempts
    for job, path in (("ft", RESTART), ("ft2", _unprefixed(RESTART, tmp_path))):
        if job == "ft2":
            ingest_file(conn, path, IngestOptions(job_id=job))
        ts = conn.execute(
            "SELECT ts FROM job_incidents WHERE job_id = ? AND kind = 'elastic_restart'", [job]
        ).fetchone()
        assert ts == (datetime(2025, 3, 7, 22, 39, 36, 177000),)
        assert conn.execute("SELECT count(*) FROM attempts WHERE job_id = ?", [job]).fetchone() == (2,)


def test_cut_report_lines_and_a_warning_without_ranks_are_rejects_with_their_lines(conn, tmp_path):
    lines = DEMO.read_text().splitlines()[170:194]
    lines[3] = lines[3][: lines[3].index("Node=") + 9]  # `Rank=4 Node=4809` : cut mid-host
    lines[-1] = lines[-1][: lines[-1].index("Affected ranks: ") + 17]  # `Affected ranks: {S`
    log = tmp_path / "cut.log"
    log.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, log, IngestOptions(job_id="cut"))
    assert report.rejected == 2
    assert [line for line, *_ in report.reject_samples] == [4, 24]
    (rel, _) = _incidents(conn, "straggler_report")
    assert rel[4]["listed"] == 7  # the cut line is not a score


def test_straggler_detection_names_the_ranks_behind_and_their_host(conn, tmp_path):
    ingest_file(conn, _unprefixed(DEMO, tmp_path), IngestOptions(job_id="demo"))
    lags = laggards_for(conn, ["demo"])["demo"]
    assert sorted(lag.rank for lag in lags) == [0, 1, 2, 4, 5, 6]
    assert {(lag.host, lag.host_basis, lag.found_by, lag.attempt) for lag in lags} == {
        (NODE, "logged", "nvrx_straggler_detection", 1)
    }
