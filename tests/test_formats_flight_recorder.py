"""Flight Recorder dumps and the analysers' reports: real traces, the ranks they show behind, and unsafe input."""

from __future__ import annotations

import json
import pickle

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.training.flight_recorder import _NoGlobals, rank_of
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.signals.collectives import laggards_for

COLL = REAL_SAMPLES / "collectives"
GPU_ERROR = COLL / "nvrx-fr-dumps_gpu_error_1st"  # GPU_ERROR injected on ranks 12 and 14 (12 first)
LOCK_GIL = COLL / "nvrx-fr-dumps_lock_gil_2nd"  # LOCK_GIL injected on ranks 10 and 15: their dumps are empty
TUTORIAL = COLL / "pytorch-tutorials_flight-recorder_torchfrtrace-missing-rank.txt"
NVRX_TABLE = COLL / "nvrx-fr-attribution_collective-analyzer_lock-gil-2nd.txt"


@pytest.fixture(autouse=True)
def only_fr(monkeypatch):
    only_formats(monkeypatch, ["flight_recorder", "fr_trace"])


def _dumps(conn, folder, job="77"):
    reports = ingest_paths(conn, sorted(folder.iterdir()), IngestOptions(job_id=job))
    assert {r.status for r in reports} == {"loaded"} and {r.format for r in reports} == {"flight_recorder"}
    return reports


def test_each_dump_is_its_rank_and_its_last_collective_per_process_group(conn):
    _dumps(conn, GPU_ERROR)
    dumps = conn.execute("SELECT count(*), count(DISTINCT rank) FROM job_incidents WHERE kind = 'fr_dump'")
    assert dumps.fetchone() == (16, 16)
    row = conn.execute(
        "SELECT collective, seq, fields->>'state', fields->>'members', ts FROM job_incidents "
        "WHERE kind = 'fr_last_collective' AND rank = 12 AND fields->>'pg' = '74'"
    ).fetchone()
    assert row[:4] == ("nccl:all_to_all", 20536, "scheduled", "[12,13,14,15]")
    assert str(row[4]) == "2025-09-23 06:55:05.924024"  # time_created_ns, UTC


@pytest.mark.parametrize(("folder", "behind"), [(GPU_ERROR, [12]), (LOCK_GIL, [10, 15])])
def test_the_ranks_behind_are_those_nvrx_attribution_names(conn, folder, behind):
    """nvidia-resiliency-ext's own reference outputs: gpu_error_1st {12}, lock_gil_2nd {10, 15}."""
    _dumps(conn, folder)
    found = laggards_for(conn, ["77"])["77"]
    assert sorted(lag.rank for lag in found) == behind
    assert {lag.collective for lag in found} == {"nccl:all_to_all"}


def test_an_empty_dump_is_a_rank_heard_from_that_recorded_nothing(conn):
    reports = _dumps(conn, LOCK_GIL)
    empty = [r for r in reports if r.path.endswith("_dump_10")][0]
    assert empty.rows == 1 and any("recorded no collective" in n for n in empty.notes)


def test_the_json_form_reads_as_the_pickle_does(conn, tmp_path):
    """The same dict saved as JSON (`_dump_nccl_trace_json`): made here from the real rank-12 pickle."""
    with open(GPU_ERROR / "_dump_12", "rb") as f:
        doc = _NoGlobals(f).load()
    (tmp_path / "nccl_trace_rank_12.json").write_text(json.dumps(doc))
    report = ingest_file(conn, tmp_path / "nccl_trace_rank_12.json", IngestOptions(job_id="78"))
    assert (report.status, report.format) == ("loaded", "flight_recorder")
    assert conn.execute(
        "SELECT seq FROM job_incidents WHERE kind = 'fr_last_collective' AND rank = 12 AND fields->>'pg' = '74'"
    ).fetchone() == (20536,)


def test_a_pickle_naming_code_to_run_is_refused_and_nothing_runs(conn, tmp_path):
    class Payload:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    evil = tmp_path / "nccl_trace_rank_0"
    evil.write_bytes(pickle.dumps({"version": "2.5", "entries": [Payload()]}, protocol=2))
    report = ingest_file(conn, evil, IngestOptions(job_id="79"))
    assert report.status == "failed" and "refused to load" in (report.error or "")
    assert not (tmp_path / "pwned").exists()
    assert conn.execute("SELECT count(*) FROM job_incidents").fetchone() == (0,)


def test_a_truncated_dump_fails_alone_with_a_clear_error(conn, tmp_path):
    cut = tmp_path / "_dump_3"
    cut.write_bytes((GPU_ERROR / "_dump_3").read_bytes()[:900])
    report = ingest_file(conn, cut, IngestOptions(job_id="80"))
    assert report.status == "failed" and "not a readable Flight Recorder dump" in (report.error or "")


def test_the_rank_is_the_trailing_number_of_the_file_name(tmp_path):
    assert [rank_of(tmp_path / n) for n in ("_dump_12", "nccl_trace_rank_3", "trace_1.pkl", "dump")] == [
        12,
        3,
        1,
        None,
    ]


def test_without_job_the_dump_folder_names_the_job_and_the_report_says_so(conn):
    report = ingest_file(conn, GPU_ERROR / "_dump_0", IngestOptions())
    assert any("pass --job" in n for n in report.notes)
    assert conn.execute("SELECT DISTINCT job_id FROM job_incidents").fetchall() == [("nvrx-fr-dumps_gpu_error_1st",)]


def test_the_torchfrtrace_report_names_the_missing_rank_and_its_collective(conn):
    report = ingest_file(conn, TUTORIAL, IngestOptions(job_id="81"))
    assert (report.format, report.rejected) == ("fr_trace", 0)
    assert conn.execute(
        "SELECT rank, collective, seq, fields->>'pg_desc', fields->>'state', line FROM job_incidents"
    ).fetchall() == [(1, "nccl:all_reduce", 5, "default_pg", "scheduled", 2)]


def test_the_nvrx_collective_analyzer_table_names_one_rank_per_group(conn):
    ingest_file(conn, NVRX_TABLE, IngestOptions(job_id="82"))
    assert conn.execute("SELECT rank, fields->>'pg', collective FROM job_incidents ORDER BY rank").fetchall() == [
        (10, "73", "nccl:all_to_all"),
        (15, "74", "nccl:all_to_all"),
    ]


def test_a_stray_line_around_a_report_is_a_reject_with_its_line(conn, tmp_path):
    bad = tmp_path / "fr.txt"
    bad.write_text("some unrelated output\n" + TUTORIAL.read_text())
    report = ingest_file(conn, bad, IngestOptions(job_id="83", format="fr_trace"))
    assert report.rejected == 1 and report.reject_samples[0][0] == 1
    assert conn.execute("SELECT rank FROM job_incidents").fetchall() == [(1,)]
