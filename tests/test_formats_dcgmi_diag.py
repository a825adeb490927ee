"""dcgmi diag: the table of four DCGM generations as pasted (cut, fragments, preambles) and the vendor's JSON."""

from __future__ import annotations

import json

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

NV = REAL_SAMPLES / "nvidia"
V304 = NV / "gh-dcgm-55_dcgmi-diag-r3_3.0.4_deployment_cut.txt"
V335 = NV / "gh-ibm-autopilot-68_dcgmi-diag-r3_3.3.5_kubectl-preamble_cut.txt"
V423 = NV / "gh-dcgm-253_dcgmi-diag_4.2.3_per-gpu-rows_cut.txt"
FAIL = NV / "gh-go-dcgm-52_dcgmi-diag-r2_3.3.1_gpu-memory-fail_fragment.txt"
JSON = NV / "dcgm-testing_TestDiagManagerStrings_per-gpu-json_3.x.json"


@pytest.fixture(autouse=True)
def only_diag(monkeypatch):
    only_formats(monkeypatch, ["dcgmi_diag"])


def _results(conn):
    return conn.execute(
        "SELECT component, severity, fields->>'category', fields->>'test', fields->>'status' FROM events "
        "ORDER BY line, component NULLS FIRST"
    ).fetchall()


def test_a_3_0_table_cut_after_deployment_keeps_every_row_it_has(conn):
    report = ingest_file(conn, V304, IngestOptions(host="n1"))
    assert (report.status, report.format, report.rejected) == ("loaded", "dcgmi_diag", 0)
    rows = _results(conn)
    assert len(rows) == 9 and rows[0] == (None, "info", "Deployment", "Denylist", "Pass")
    assert {r[4] for r in rows} == {"Pass"}


def test_the_kubectl_preamble_is_no_reject_and_the_metadata_names_the_dcgm_version(conn):
    report = ingest_file(conn, V335, IngestOptions(host="n1"))
    assert report.rejected == 0
    versions = conn.execute("SELECT DISTINCT fields->>'dcgm_version', fields->>'driver' FROM events").fetchall()
    assert versions == [("3.3.5", "550.54.15")]
    assert [r[3] for r in _results(conn)] == ["Denylist", "NVML Library", "CUDA Main Library"]


def test_4_x_per_gpu_rows_are_each_gpus_own_result(conn):
    ingest_file(conn, V423, IngestOptions(host="n1"))
    assert _results(conn) == [
        (None, "info", "Deployment", "software", "Pass"),
        ("gpu0", "info", "Deployment", "software", "Pass"),
        ("gpu1", "info", "Deployment", "software", "Pass"),
        ("gpu2", "info", "Deployment", "software", "Pass"),
        ("gpu3", "info", "Deployment", "software", "Pass"),
    ]


def test_a_gpu_that_failed_the_memory_test_with_its_warning_joined_across_wrapped_rows(conn):
    ingest_file(conn, FAIL, IngestOptions(host="n1"))
    failed = conn.execute("SELECT component, severity, fields FROM events WHERE severity = 'err'").fetchall()
    assert [(c, s) for c, s, _ in failed] == [("gpu0", "err")]
    warning = json.loads(failed[0][2])["warning"]
    assert warning.startswith("GPU 0 Error using CUDA API cuCtxCreate Check DCGM")
    assert "Reset GPU. Restart DCGM." in warning and "Unable to create CUDA context" in warning
    # the warning names GPU 0: it is not GPU 1's, which passed
    passed = conn.execute("SELECT component, fields->>'warning' FROM events WHERE fields->>'status' = 'Pass'")
    assert passed.fetchall() == [("gpu1", None)]


def test_the_json_form_gives_each_gpu_of_a_result_its_event(conn):
    report = ingest_file(conn, JSON, IngestOptions(host="n1"))
    assert (report.status, report.rejected) == ("loaded", 0)
    failed = conn.execute(
        "SELECT component, fields->>'test', fields->>'warning' FROM events WHERE fields->>'status' = 'Fail' "
        "ORDER BY component"
    ).fetchall()
    assert [(c, t) for c, t, _ in failed] == [("gpu0", "sm_stress"), ("gpu2", "sm_stress"), ("gpu3", "sm_stress")]
    assert failed[1][2] == "Max stress level of 1096.5 did not exceed desired stress level of 3000.0 for GPU 2"
    # `"gpu_ids": "0,1,2,3"` is one result of four GPUs
    assert conn.execute("SELECT count(*) FROM events WHERE fields->>'test' = 'Denylist'").fetchone() == (4,)


def test_invalid_json_fails_with_its_line(conn, tmp_path):
    bad = tmp_path / "diag.json"
    bad.write_text(JSON.read_text()[:400])
    report = ingest_file(conn, bad, IngestOptions(host="n1"))
    assert report.status == "failed" and "invalid dcgmi diag JSON" in (report.error or "")


def test_a_stray_line_inside_the_table_is_a_reject_with_its_line(conn, tmp_path):
    lines = V304.read_text().splitlines()
    lines.insert(8, "garbage in the middle")
    bad = tmp_path / "diag.txt"
    bad.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, bad, IngestOptions(host="n1"))
    assert report.rejected == 1 and report.reject_samples[0][0] == 9
    assert len(_results(conn)) == 9
