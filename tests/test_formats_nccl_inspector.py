"""NCCL Inspector records: the README's real records (indented), the plugin's one-record-a-line files, bad lines."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

COLL = REAL_SAMPLES / "collectives"
ALLREDUCE = COLL / "nccl-inspector_readme-2.28.1_coll-perf_allreduce.json"
VERBOSE = COLL / "nccl-inspector_readme-2.28.1_coll-perf-verbose_reducescatter.json"
ENTITY = 'rank2{comm="0x7f8c496ae9f661",coll="AllReduce"}'


@pytest.fixture(autouse=True)
def only_inspector(monkeypatch):
    only_formats(monkeypatch, ["nccl_inspector"])


def test_a_record_is_its_ranks_bandwidth_on_its_host_at_the_dump_time(conn):
    report = ingest_file(conn, ALLREDUCE, IngestOptions())
    assert (report.status, report.format, report.rejected) == ("loaded", "nccl_inspector", 0)
    rows = dict(conn.execute("SELECT metric, value FROM metrics WHERE entity = ?", [ENTITY]).fetchall())
    assert rows["nccl_coll_busbw_gbs"] == 485.119099 and rows["nccl_coll_exec_time_us"] == 61974
    assert conn.execute("SELECT DISTINCT host, ts FROM metrics").fetchall() == [
        ("cw-dfw-h100-002-243-012", datetime(2025, 5, 23, 19, 59, 37, 748202))
    ]


def test_a_verbose_record_is_placed_at_its_collectives_end(conn):
    ingest_file(conn, VERBOSE, IngestOptions())
    # coll_stop_ts 1752867229235064 us, not the dump's 1752867229276385
    assert conn.execute("SELECT DISTINCT ts FROM metrics").fetchall() == [(datetime(2025, 7, 18, 19, 33, 49, 235064),)]


def _compact(path) -> str:
    return json.dumps(json.loads(path.read_text()))


def test_the_plugins_files_one_record_a_line_average_a_dump_and_reject_a_bad_line(conn, tmp_path):
    """The plugin's own layout (inspector_json.cc: one object a line), made from the README's real record:
    two collectives of one dump and a line cut in half."""
    record = _compact(ALLREDUCE)
    second = json.loads(record)
    second["coll_perf"]["coll_sn"] = 1408
    second["coll_perf"]["coll_busbw_gbs"] = 465.119099
    log = tmp_path / "nccl-inspector-1639453.log"
    log.write_text(record + "\n" + json.dumps(second) + "\n" + record[:60] + "\n")
    report = ingest_file(conn, log, IngestOptions())
    assert report.rejected == 1 and report.reject_samples[0][0] == 3
    rows = dict(conn.execute("SELECT metric, value FROM metrics WHERE entity = ?", [ENTITY]).fetchall())
    assert rows["nccl_coll_count"] == 2 and rows["nccl_coll_busbw_gbs"] == pytest.approx(475.119099)
