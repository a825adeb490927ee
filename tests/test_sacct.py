"""Slurm sacct ingest: real samples, delimiters, column order, requeues, time zones, rejects."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats import detect
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.scheduler import sacct
from synestra_cli.ingest import ingest_file

TAB_OOM = REAL_SAMPLES / "training" / "tdhock-slurm_sacct-P-tab_oom.txt"
PIPE_ARRAY = REAL_SAMPLES / "training" / "tdhock-slurm_sacct-P_array-steps_pending-range.txt"

# sacct -P -D --format=JobID,JobName,User,State,ExitCode,Start,End,Elapsed,NodeList,AllocTRES
# Job 4242 was requeued after a node failure: -D prints both attempts, each with its steps.
FULL = """\
JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES
4242|pretrain-7b|alice|NODE_FAIL|0:0|2026-11-28T10:00:00|2026-11-28T12:00:00|02:00:00|gpu-[001-004]|billing=64,cpu=64,gres/gpu=32,mem=1000G,node=4
4242.batch|batch||CANCELLED|0:15|2026-11-28T10:00:00|2026-11-28T12:00:03|02:00:03|gpu-001|cpu=16,gres/gpu=8,mem=250G,node=1
4242.extern|extern||COMPLETED|0:0|2026-11-28T10:00:00|2026-11-28T12:00:00|02:00:00|gpu-[001-004]|billing=64,cpu=64,gres/gpu=32,mem=1000G,node=4
4242.0|python||CANCELLED|0:15|2026-11-28T10:00:05|2026-11-28T12:00:03|01:59:58|gpu-[001-004]|cpu=64,gres/gpu=32,mem=1000G,node=4
4242|pretrain-7b|alice|COMPLETED|0:0|2026-11-28T12:10:00|2026-11-29T14:10:30|1-02:00:30|gpu-[001-003,009]|billing=64,cpu=64,gres/gpu=32,mem=1000G,node=4
4242.batch|batch||COMPLETED|0:0|2026-11-28T12:10:00|2026-11-29T14:10:30|1-02:00:30|gpu-001|cpu=16,gres/gpu=8,mem=250G,node=1
4243|eval|bob|CANCELLED by 1000|0:0|2026-11-29T08:00:00|2026-11-29T08:30:00|00:30:00|rack[1-2]-n[01-02]|billing=4,cpu=4,gres/gpu:h100=2,gres/gpu:a100=2,mem=64G,node=4
4244|queued|bob|PENDING|0:0|Unknown|Unknown|00:00:00|None assigned|
5000+0|het|carol|RUNNING|0:0|2026-11-29T09:00:00|Unknown|01:00:00|cpu-01|cpu=8,mem=32G,node=1
5000+1|het|carol|RUNNING|0:0|2026-11-29T09:00:00|Unknown|01:00:00|gpu-[010-011]|cpu=16,gres/gpu=16,node=2
"""  # noqa: E501


@pytest.fixture(autouse=True)
def only_sacct(monkeypatch):
    """Detection among this format alone: other parsers' bugs must not fail these tests."""
    only_formats(monkeypatch, ["sacct"])


ATTEMPTS_SQL = "SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes FROM attempts ORDER BY ALL"


def _ingest(conn, path: Path, tz: str = "UTC"):
    report = ingest_file(conn, path, IngestOptions(timezone=tz))
    assert report.status == "loaded", report.error
    assert report.format == "sacct"
    return report


def _write(tmp_path: Path, text: str, name: str = "sacct.txt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _rows(conn, sql: str, params=None) -> list[tuple]:
    return conn.execute(sql, params).fetchall() if params is not None else conn.execute(sql).fetchall()


def test_real_tab_sample_oom_step_is_kept_but_is_not_an_attempt(conn):
    report = _ingest(conn, TAB_OOM)
    assert report.rejected == 0
    assert _rows(conn, "SELECT job_id, state FROM jobs") == [("7585175", "FAILED")]
    assert _rows(conn, "SELECT job_id, attempt, state, exit_code FROM attempts") == [("7585175", 1, "FAILED", "1:0")]
    steps = _rows(conn, "SELECT step, state, exit_code, elapsed_s, attempt FROM sacct_rows ORDER BY line")
    assert steps == [
        (None, "FAILED", "1:0", 38.0, 1),
        ("batch", "FAILED", "1:0", 38.0, 1),
        ("extern", "COMPLETED", "0:0", 38.0, 1),
        ("0", "OUT_OF_MEMORY", "0:125", 38.0, 1),
    ]


def test_real_pipe_sample_array_tasks_and_pending_range(conn):
    _ingest(conn, PIPE_ARRAY)
    jobs = _rows(conn, "SELECT job_id, state FROM jobs ORDER BY job_id")
    assert jobs == [
        ("26735347_1", "RUNNING"),
        ("26735347_2", "RUNNING"),
        ("26735347_75", "RUNNING"),
        ("26735347_[76-999]", "PENDING"),
    ]
    # The pending range never ran: a job row, no attempt.
    assert _rows(conn, "SELECT job_id, attempt FROM attempts ORDER BY job_id") == [
        ("26735347_1", 1),
        ("26735347_2", 1),
        ("26735347_75", 1),
    ]
    elapsed = _rows(conn, "SELECT job_id, elapsed_s FROM sacct_rows WHERE step IS NULL ORDER BY line")
    assert elapsed == [("26735347_1", 405.0), ("26735347_2", 405.0), ("26735347_75", 41.0), ("26735347_[76-999]", 0.0)]
    assert _rows(conn, "SELECT count(*) FROM sacct_rows WHERE step IN ('batch', 'extern')") == [(6,)]


def test_requeued_job_duplicate_rows_become_two_attempts_with_their_steps(conn, tmp_path):
    _ingest(conn, _write(tmp_path, FULL))
    rows = _rows(
        conn, "SELECT attempt, start_ts, end_ts, state, nodes FROM attempts WHERE job_id = '4242' ORDER BY attempt"
    )
    assert rows == [
        (
            1,
            datetime(2026, 11, 28, 10),
            datetime(2026, 11, 28, 12),
            "NODE_FAIL",
            ["gpu-001", "gpu-002", "gpu-003", "gpu-004"],
        ),
        (
            2,
            datetime(2026, 11, 28, 12, 10),
            datetime(2026, 11, 29, 14, 10, 30),
            "COMPLETED",
            ["gpu-001", "gpu-002", "gpu-003", "gpu-009"],
        ),
    ]
    steps = _rows(conn, "SELECT step, attempt FROM sacct_rows WHERE job_id = '4242' AND step IS NOT NULL ORDER BY line")
    assert steps == [("batch", 1), ("extern", 1), ("0", 1), ("batch", 2)]
    assert _rows(conn, "SELECT state, gpus FROM jobs WHERE job_id = '4242'") == [("COMPLETED", 32)]
    assert _rows(conn, "SELECT elapsed_s FROM sacct_rows WHERE job_id = '4242' AND attempt = 2 AND step IS NULL") == [
        (93630.0,)
    ]
    assert _rows(conn, "SELECT host FROM job_nodes WHERE job_id = '4242' AND attempt = 2 ORDER BY host") == [
        ("gpu-001",),
        ("gpu-002",),
        ("gpu-003",),
        ("gpu-009",),
    ]


def test_two_word_state_typed_gres_het_job_and_pending(conn, tmp_path):
    _ingest(conn, _write(tmp_path, FULL))
    assert _rows(conn, "SELECT state, state_detail, nodes FROM sacct_rows WHERE job_id = '4243'") == [
        ("CANCELLED", "by 1000", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"])
    ]
    assert _rows(conn, "SELECT gpus FROM jobs WHERE job_id = '4243'") == [(4,)]  # a100=2 + h100=2
    # Het components 5000+0 / 5000+1 are one job: GPUs summed, nodes united, still running (no end).
    assert _rows(conn, "SELECT gpus, state FROM jobs WHERE job_id = '5000'") == [(16, "RUNNING")]
    assert _rows(conn, "SELECT attempt, end_ts, nodes FROM attempts WHERE job_id = '5000'") == [
        (1, None, ["cpu-01", "gpu-010", "gpu-011"])
    ]
    # Pending: Unknown times are NULL, "None assigned" is no node, and there is no attempt.
    assert _rows(conn, "SELECT start_ts, end_ts, nodes FROM sacct_rows WHERE job_id = '4244'") == [(None, None, [])]
    assert _rows(conn, "SELECT count(*) FROM attempts WHERE job_id = '4244'") == [(0,)]


@pytest.mark.parametrize(("tz", "hours"), [("Europe/Paris", 1), ("America/New_York", -5)])
def test_local_times_are_converted_to_utc_with_the_timezone_option(conn, tmp_path, tz, hours):
    _ingest(conn, _write(tmp_path, FULL), tz=tz)
    (start,) = _rows(conn, "SELECT start_ts FROM attempts WHERE job_id = '4243'")[0]
    assert start == datetime(2026, 11, 29, 8 - hours)


def test_summer_time_offset_applies_to_summer_dates(conn, tmp_path):
    text = "JobID|State|Start|End\n77|COMPLETED|2026-07-01T12:00:00|2026-07-01T13:00:00\n"
    _ingest(conn, _write(tmp_path, text), tz="Europe/Paris")
    assert _rows(conn, "SELECT start_ts, end_ts FROM attempts") == [
        (datetime(2026, 7, 1, 10), datetime(2026, 7, 1, 11))
    ]


def _reformat(text: str, delim: str, trailing: bool) -> str:
    end = delim if trailing else ""
    return "".join(line.replace("|", delim) + end + "\n" for line in text.splitlines())


@pytest.mark.parametrize(("delim", "trailing"), [("\t", False), ("|", True), ("\t", True)])
def test_tab_and_trailing_pipe_give_the_same_attempts_as_parsable2(conn, tmp_path, delim, trailing):
    from synestra_cli.store.connect import memory_store

    _ingest(conn, _write(tmp_path, FULL))
    expected = _rows(conn, ATTEMPTS_SQL)
    other = memory_store()
    try:
        report = _ingest(other, _write(tmp_path, _reformat(FULL, delim, trailing), "other.txt"))
        assert report.rejected == 0
        assert _rows(other, ATTEMPTS_SQL) == expected
    finally:
        other.close()


def test_columns_in_an_unusual_order_are_read_by_their_header(conn, tmp_path):
    lines = [line.split("|") for line in FULL.splitlines()]
    order = [9, 4, 7, 0, 3, 6, 5, 1, 8, 2]  # AllocTRES first, JobID in the middle
    shuffled = "".join("|".join(row[i] for i in order) + "\n" for row in lines)
    assert shuffled.startswith("AllocTRES|ExitCode|Elapsed|JobID|State|End|Start|")
    _ingest(conn, _write(tmp_path, shuffled))
    assert _rows(conn, "SELECT attempt, state, exit_code FROM attempts WHERE job_id = '4242' ORDER BY 1") == [
        (1, "NODE_FAIL", "0:0"),
        (2, "COMPLETED", "0:0"),
    ]
    assert _rows(conn, "SELECT name, user_name, gpus FROM jobs WHERE job_id = '4242'") == [("pretrain-7b", "alice", 32)]


def test_malformed_rows_are_counted_with_their_line_and_the_rest_loads(conn, tmp_path):
    text = (
        FULL
        + "4250|x|bob|FAILED|1:0\n"
        + "abc|x|bob|FAILED|1:0|||00:00:01||\n"
        + "4251|x|bob|FAILED|1:0|2026-13-45T99:00:00||00:00:01||\n"
        + "4252|x|bob|FAILED|1:0|||forever||\n"
    )
    report = _ingest(conn, _write(tmp_path, text))
    assert report.rejected == 4
    assert [(line, reason.split(" ")[0]) for line, reason, _ in report.reject_samples] == [
        (12, "expected"),
        (13, "unreadable"),
        (14, "unreadable"),
        (15, "unreadable"),
    ]
    assert "Start" in report.reject_samples[2][1] and "Elapsed" in report.reject_samples[3][1]
    assert _rows(conn, "SELECT count(*) FROM jobs") == [(4,)]
    assert _rows(conn, "SELECT rejected FROM sources") == [(4,)]


def test_an_unreadable_nodelist_rejects_only_its_row(conn, tmp_path):
    text = "JobID|State|NodeList\n1|COMPLETED|gpu-[001-003\n2|COMPLETED|gpu-[001-002]\n"
    report = _ingest(conn, _write(tmp_path, text))
    assert report.rejected == 1 and report.reject_samples[0][0] == 2
    assert _rows(conn, "SELECT job_id, nodes FROM attempts") == [("2", ["gpu-001", "gpu-002"])]


def test_sniff_recognises_sacct_headers_only():
    assert detect(TAB_OOM.read_text()) is sacct.FORMAT
    assert detect(PIPE_ARRAY.read_text()) is sacct.FORMAT
    assert sacct.sniff("JobID,State\n1,COMPLETED\n") == 0.0  # comma CSV is not sacct output
    assert sacct.sniff("[2026-11-29 10:00:00] iteration 10/ 100 | consumed samples: 10\n") == 0.0
    # sacct -n (no header): recognised, so that it is refused with a hint rather than called "unknown format"
    assert 0 < sacct.sniff("7585175|1:0|FAILED\n") < 0.9


def test_headerless_output_forced_as_sacct_fails_with_a_hint_and_writes_nothing(conn, tmp_path):
    path = _write(tmp_path, "7585175|1:0|FAILED||00:00:38\n")
    report = ingest_file(conn, path, IngestOptions(format="sacct"))
    assert report.status == "failed" and "without -n" in report.error
    assert _rows(conn, "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM sources)") == [(0,)]


FIXED = REAL_SAMPLES / "training" / "sacct_gh-soperator-pr321_sacct-fixed-width_trailing-blanks.txt"
FIXED_RIGHT = REAL_SAMPLES / "training" / "sacct_gh-alan-cluster-6_sacct-fixed-width_right-aligned-header.txt"
HEADERLESS = REAL_SAMPLES / "training" / "sacct_gh-soperator-pr321_sacct-n_headerless.txt"


def test_default_fixed_width_layout_is_read_by_its_dash_runs(conn):
    report = _ingest(conn, FIXED)  # sniffed: no --format
    assert report.rejected == 0
    assert _rows(conn, "SELECT job_id, step, state FROM sacct_rows ORDER BY line") == [
        ("19", "0", "COMPLETED"),
        ("20", None, "FAILED"),
        ("20", "0", "FAILED"),
        ("21", None, "FAILED"),
        ("21", "0", "FAILED"),
        ("22", None, "COMPLETED"),
        ("22", "0", "COMPLETED"),
    ]
    assert _rows(conn, "SELECT job_id, state FROM jobs ORDER BY job_id") == [
        ("20", "FAILED"),
        ("21", "FAILED"),
        ("22", "COMPLETED"),
    ]


def test_fixed_width_with_right_aligned_header_names(conn):
    report = _ingest(conn, FIXED_RIGHT)
    assert report.rejected == 0
    assert _rows(conn, "SELECT job_id FROM jobs ORDER BY job_id") == [("1000146",), ("1000148",), ("1000149",)]


def test_headerless_real_output_is_refused_with_how_to_rerun(conn):
    assert detect(HEADERLESS.read_text()) is sacct.FORMAT
    report = ingest_file(conn, HEADERLESS, IngestOptions())
    assert report.status == "failed"
    assert "sacct -n" in report.error and "-P" in report.error and "without -n" in report.error


# The default layout's widths (sacct prints what does not fit cut, ending with `+`): a cut NodeList or Start
# cannot be read, a cut State keeps its word (`CANCELLED by 1000` -> `CANCELLED+`).
CUT = """\
JobID           JobName      State ExitCode               Start             NodeList 
------------ ---------- ---------- -------- ------------------- -------------------- 
4242         pretrain-+ CANCELLED+      0:0 2026-11-28T10:00:00       gpu-[001-004] 
4243         pretrain-+  COMPLETED      0:0 2026-11-28T12:10:00 gpu-[001-003,009,01+ 
"""


def test_fixed_width_cut_values(conn, tmp_path):
    report = _ingest(conn, _write(tmp_path, CUT))
    assert report.rejected == 1
    assert report.reject_samples[0][0] == 4 and "nodelist" in report.reject_samples[0][1]
    assert _rows(conn, "SELECT job_id, state, start_ts, nodes FROM attempts") == [
        ("4242", "CANCELLED", datetime(2026, 11, 28, 10, 0), ["gpu-001", "gpu-002", "gpu-003", "gpu-004"])
    ]
