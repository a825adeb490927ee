"""The public API (synestra_cli.api): the same answers as the CLI, as typed objects and DataFrames."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import crash_and_resume
from click.testing import CliRunner
from explain_fixtures import reactive_job_with_a_lossy_port

import synestra_cli
from synestra_cli import api
from synestra_cli.cli.main import cli
from synestra_cli.cli.render import dumps
from synestra_cli.errors import NotFoundError
from synestra_cli.store import open_store

SAMPLE_JOBS = Path(__file__).resolve().parents[1] / "sample_data" / "exports" / "jobs"


def _cli_json(*args: str) -> dict:
    out = CliRunner().invoke(cli, list(args))
    assert out.exit_code == 0, out.stderr
    return json.loads(out.stdout)


def test_explain_gives_the_cli_document_and_a_row_per_checkpoint(db_path):
    with open_store(db_path) as c:
        reactive_job_with_a_lossy_port(c)
    result = api.explain("100", db=db_path)
    assert json.loads(dumps(result.to_json())) == _cli_json(
        "explain", "--job", "100", "--format", "json", "--db", str(db_path)
    )
    frame = result.to_pandas()
    assert list(frame.columns) == api.CHECKPOINT_COLUMNS
    assert len(frame) == len(result.explanation.checkpoints) == 3
    caused = frame[~frame["routine"]]
    assert caused["component"].tolist() == ["leaf-01:Ethernet2"] and caused["trigger"].tolist() == ["reactive"]
    assert frame["tax_s"].isna().all()  # tax only when asked for
    taxed = api.explain("100", db=db_path, tax=True).to_pandas()
    assert (taxed["tax_s"] >= 0).all() and taxed["tax_s"].sum() > 0


def test_tax_report_gives_the_cli_document_and_a_row_per_job(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    result = api.tax_report(db=db_path)
    cli_doc = _cli_json("tax-report", "--all", "--format", "json", "--db", str(db_path))
    assert json.loads(dumps(result.to_json())) == cli_doc
    frame = result.to_pandas()
    assert frame["job"].tolist() == ["42"]
    row = frame.iloc[0]
    buckets = cli_doc["jobs"][0]["buckets_s"]
    assert sum(row[f"{b}_s"] for b in buckets) == pytest.approx(row["wall_s"])
    assert row["checkpoint_tax"] == pytest.approx(cli_doc["jobs"][0]["checkpoint_tax"])
    causes = result.causes_to_pandas()
    assert causes["gpu_hours"].tolist() == [c["gpu_hours"] for c in cli_doc["causes"]]


def test_tax_report_keeps_its_explanations_as_the_command_does(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    api.tax_report(db=db_path)
    with open_store(db_path, read_only=True) as c:
        assert c.execute("SELECT job_id FROM explanations").fetchall() == [("42",)]


def test_ingest_reports_each_file_and_explain_keeps_the_jobs(db_path):
    result = api.ingest([SAMPLE_JOBS / "1003.log"], db=db_path, explain=True)
    assert [r.status for r in result.reports] == ["loaded"] and result.failed == []
    assert result.explained == 1
    frame = result.to_pandas()
    assert list(frame.columns) == api.FILE_COLUMNS
    assert frame.loc[0, "format"] == "megatron" and frame.loc[0, "rows"] > 0
    again = api.ingest([SAMPLE_JOBS / "1003.log"], db=db_path)
    assert [r.status for r in again.reports] == ["skipped"] and again.explained is None
    assert again.to_json()["schema"] == "synestra.ingest/1"


def test_errors_are_the_librarys_with_their_exit_codes(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    with pytest.raises(NotFoundError):
        api.explain("999", db=db_path)


def test_the_package_declares_its_types():
    assert (Path(synestra_cli.__file__).parent / "py.typed").is_file()
    assert set(api.__all__) >= {"ingest", "explain", "tax_report", "IngestResult", "ExplainResult", "TaxReportResult"}
