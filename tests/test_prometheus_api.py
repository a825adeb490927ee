"""Prometheus HTTP API answers (query_range matrix, query vector) saved as JSON."""

from __future__ import annotations

import json
from datetime import datetime

from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

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
