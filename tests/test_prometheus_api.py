"""Prometheus HTTP API answers (query_range matrix, query vector) saved as JSON."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.telemetry import prom_json, prom_json_stream
from synestra_cli.ingest import ingest_file
from synestra_cli.store import open_store

SYNESTRA = str(Path(sys.executable).parent / "synestra")  # the console script, as a user runs it
QUERY_RANGE = REAL_SAMPLES / "dcgm" / "prometheus_docs_api_query_range_example.json"


def answer(tmp_path, result_type: str, result: list, status: str = "success"):
    path = tmp_path / "answer.json"
    path.write_text(json.dumps({"status": status, "data": {"resultType": result_type, "result": result}}))
    return path


def test_the_documented_query_range_answer_loads_every_pair_with_float_second_times(conn):
    report = ingest_file(conn, QUERY_RANGE, IngestOptions())
    assert (report.status, report.format, report.rows, report.rejected) == ("loaded", "prom_api_json", 6, 0)
    rows = conn.execute(
        "SELECT host, entity, value, ts FROM metrics WHERE metric = 'up' ORDER BY entity, ts"
    ).fetchall()
    # instance localhost:9090 -> host localhost; the job label keeps the two series apart
    assert rows[0] == ("localhost", '{job="node"}', 0.0, datetime(2015, 7, 1, 20, 10, 30, 781000))
    assert [v for _, e, v, _ in rows if e == '{job="node"}'] == [0.0, 0.0, 1.0]


def test_a_vector_answer_maps_dcgm_names_and_string_values(conn, tmp_path):
    labels = {"gpu": "3", "Hostname": "gpu-007", "UUID": "GPU-x", "pci_bus_id": "00000000:9B:00.0"}
    path = answer(
        tmp_path,
        "vector",
        [
            {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", **labels}, "value": [1795000000.5, "71"]},
            {"metric": {"__name__": "DCGM_FI_DEV_POWER_USAGE", **labels}, "value": [1795000000.5, "NaN"]},
            {
                "metric": {"__name__": "DCGM_FI_DEV_MEMORY_TEMP", **labels},
                "value": [1795000000.5, "9223372036854775794"],
            },
            {"metric": {"__name__": "up"}, "value": [1795000000.5, "abc"]},
        ],
    )
    report = ingest_file(conn, path, IngestOptions())
    assert (report.rows, report.rejected) == (3, 1)
    assert report.reject_samples[0][1] == "value is not a number"
    got = dict(conn.execute("SELECT metric, value FROM metrics WHERE host = 'gpu-007' AND entity = 'gpu3'").fetchall())
    assert got["gpu_temp_celsius"] == 71.0
    assert got["gpu_power_watts"] != got["gpu_power_watts"]  # NaN is kept as NaN
    assert got["gpu_memory_temp_celsius"] is None  # DCGM blank sentinel
    assert conn.execute("SELECT pci_bus_id FROM gpus").fetchall() == [("00000000:9B:00.0",)]


def test_an_error_answer_is_refused_with_the_api_message(conn, tmp_path):
    path = tmp_path / "err.json"
    path.write_text('{"status":"error","errorType":"bad_data","error":"parse error at char 4"}')
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "failed"
    assert "parse error at char 4" in report.error


def test_a_scalar_answer_is_refused_because_it_has_no_series(conn, tmp_path):
    path = tmp_path / "scalar.json"
    path.write_text('{"status":"success","data":{"resultType":"scalar","result":[1795000000,"2"]}}')
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "failed"
    assert "scalar" in report.error


# ---------------------------------------------------------------- a big answer, read as a stream (issue 37 item 7)
# The answer is read a batch of whole results at a time (formats/telemetry/prom_json_stream.py); small batches here so
# that a few results make many batches, and every way a dump is written still reads the same.


def _series(n_hosts: int, points: int) -> list[dict]:
    out = []
    for h in range(n_hosts):
        for gpu in range(2):
            labels = {"__name__": "DCGM_FI_DEV_GPU_TEMP", "Hostname": f"gpu-{h:03d}", "gpu": str(gpu)}
            labels["UUID"] = f"GPU-{h:04d}-{gpu}"
            labels["ifAlias"] = 'odd "},{" and "}]" in a label'  # boundaries inside strings
            out.append(
                {"metric": labels, "values": [[1795000000 + 60 * i, str(40 + h + i % 3)] for i in range(points)]}
            )
    return out


@pytest.mark.parametrize("style", ["compact", "jq_sorted_pretty", "gzip"])
def test_an_answer_read_in_many_small_batches_loads_every_series_once(conn, tmp_path, monkeypatch, style):
    monkeypatch.setattr(prom_json, "BATCH_BYTES", 700)
    monkeypatch.setattr(prom_json_stream, "CHUNK", 512)  # chunks cut results, strings and numbers in two
    doc = {"status": "success", "data": {"resultType": "matrix", "result": _series(12, 7)}}
    text = json.dumps(doc, sort_keys=True, indent=2) if style == "jq_sorted_pretty" else json.dumps(doc)
    path = tmp_path / ("answer.json.gz" if style == "gzip" else "answer.json")
    path.write_bytes(gzip.compress(text.encode()) if style == "gzip" else text.encode())
    report = ingest_file(conn, path, IngestOptions())
    assert (report.status, report.rows, report.rejected) == ("loaded", 12 * 2 * 7, 0), report.error
    got = conn.execute("SELECT host, entity, count(*), min(value) FROM metrics GROUP BY ALL ORDER BY ALL").fetchall()
    assert len(got) == 24 and all(n == 7 for _, _, n, _ in got)
    assert got[5] == ("gpu-002", "gpu1", 7, 42.0)
    # one GPU row per GPU, whatever batch its series came in
    assert conn.execute("SELECT count(*), count(DISTINCT (host, entity)) FROM gpus").fetchone() == (24, 24)


def test_an_error_status_written_after_the_results_leaves_nothing_behind(conn, tmp_path, monkeypatch):
    # `jq -S` puts "data" before "status": the results are read before the answer says it failed
    monkeypatch.setattr(prom_json, "BATCH_BYTES", 500)
    doc = {"data": {"result": _series(3, 4), "resultType": "matrix"}, "error": "query timed out", "status": "error"}
    path = tmp_path / "late-error.json"
    path.write_text(json.dumps(doc))
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "failed" and "query timed out" in report.error
    assert conn.execute("SELECT count(*) FROM metrics").fetchone() == (0,)


@pytest.mark.parametrize("cut", [0.3, 0.97])
def test_a_truncated_answer_fails_with_a_clear_message(conn, tmp_path, cut):
    text = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": _series(4, 5)}})
    path = tmp_path / "cut.json"
    path.write_text(text[: int(len(text) * cut)])
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "failed" and "not a successful Prometheus API answer" in report.error
    assert conn.execute("SELECT count(*) FROM metrics").fetchone() == (0,)


def test_the_stream_cuts_only_between_results_and_finds_the_array_s_end():
    body = [{"metric": {"a": "x},{y", "b": "}]"}, "values": [[1, "2"]]} for _ in range(5)]
    text = json.dumps({"data": {"result": body, "resultType": "matrix", "stats": {"x": [[1, 2]]}}, "status": "success"})
    stream = prom_json_stream.AnswerStream(io.BytesIO(text.encode()))
    batches = list(stream.batches(10, lambda t: _is_json(t)))
    assert [r for b in batches for r in json.loads(b)] == body and len(batches) == 5
    assert stream.members == {"status": "success", "resultType": "matrix"} and stream.result_seen


def _is_json(text: bytes) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _big_answer(path, hosts: int, points: int) -> int:
    """A query_range answer for `hosts` hosts x 8 GPUs x 2 DCGM fields, written one series at a time."""
    stamps = [f"{1795000000 + 60 * i}.{i % 1000:03d}" for i in range(points)]
    with path.open("w") as out:
        out.write('{"status":"success","data":{"resultType":"matrix","result":[')
        sep = ""
        for h in range(hosts):
            for gpu in range(8):
                for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE"):
                    labels = json.dumps(
                        {"__name__": name, "Hostname": f"gpu-{h:04d}", "gpu": str(gpu), "UUID": f"GPU-{h}-{gpu}"}
                    )
                    values = ",".join(f'[{t},"{40 + (h + gpu + i) % 30}.5"]' for i, t in enumerate(stamps))
                    out.write(f'{sep}{{"metric":{labels},"values":[{values}]}}')
                    sep = ","
        out.write("]}}")
    return hosts * 8 * 2 * points


# Linux carries a process's peak RSS across fork and exec: a child of this (by now large) test worker
# would report the worker's own size. A small interpreter starts the ingest and reports its child's peak.
CHILD_PEAK = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(code)
"""


def _ingest_child(path, db, budget: str) -> tuple[int, float, str]:
    """`synestra ingest` as a user runs it, within `budget`: (exit code, peak RSS in MiB, stderr)."""
    env = {**os.environ, "SYNESTRA_MEMORY_LIMIT": budget}
    with tempfile.TemporaryFile() as err:
        args = [sys.executable, "-c", CHILD_PEAK, SYNESTRA, "ingest", str(path), "--db", str(db)]
        proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        err.seek(0)
        return proc.returncode, int(proc.stdout.split()[-1]) / 1024, err.read().decode(errors="replace")


@pytest.mark.heavy
def test_a_big_answer_ingests_every_sample_in_memory_that_does_not_grow_with_it(tmp_path):
    # 22 MB and 44 MB answers (0.9 and 1.8 million samples) under a 500 MB budget (a 300 MB pool): read whole,
    # a 35 MB answer ran out of memory under three times that budget. What grows with the file is the store's
    # rows, which DuckDB spills past its pool; the text is read a batch at a time.
    budget_mib = 500e6 / 2**20
    rss = {}
    for hosts in (80, 160):
        path = tmp_path / f"answer-{hosts}.json"
        pairs = _big_answer(path, hosts, 720)
        db = tmp_path / f"store-{hosts}.duckdb"
        code, rss[hosts], err = _ingest_child(path, db, "500MB")
        assert code == 0, err
        path.unlink()
        with open_store(db, read_only=True) as conn:
            assert conn.execute("SELECT count(*), count(DISTINCT (host, entity, metric)) FROM metrics").fetchone() == (
                pairs,
                hosts * 8 * 2,
            )
            assert conn.execute("SELECT count(*) FROM gpus").fetchone() == (hosts * 8,)
    # twice the file, not twice the memory; both within the budget (a few % over: malloc's own)
    assert rss[160] < 1.25 * rss[80] and max(rss.values()) < 1.05 * budget_mib, rss
