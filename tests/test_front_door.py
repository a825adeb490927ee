"""One front door (issue 33): every command's JSON is its api function's answer, rendered. Each case runs
the command on a copy of sample_data's store and calls the api function the command calls, on another
copy, and compares the two documents; the import contract (pyproject.toml) keeps the CLI from reaching
the library any other way."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import copy_sample_store

from synestra_cli import api
from synestra_cli.api import catalog, health, jobs, upkeep, views
from synestra_cli.cli.main import cli
from synestra_cli.cli.render import dumps

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_EXPORTS = ROOT / "sample_data" / "exports"

# (command line after `synestra`, the api call on a store) -> the same JSON document
CASES: dict[str, tuple[list[str], Callable[[Path], Any]]] = {
    "explain": (["explain", "--job", "1003"], lambda db: api.explain("1003", db=db).to_json()),
    "explain-all": (["explain", "--all"], lambda db: api.explain_jobs(db, all_jobs=True).to_json()),
    "explain-checkpoint": (
        ["explain", "--job", "1003", "--checkpoint", "1950"],
        lambda db: api.explain("1003", db=db, checkpoint=1950).to_json(),
    ),
    "explain-tax": (["explain", "--job", "1001", "--tax"], lambda db: api.explain("1001", db=db, tax=True).to_json()),
    "tax-report": (["tax-report", "--by", "host"], lambda db: api.tax_report(db=db, by="host").to_json()),
    "tax-report-job": (["tax-report", "--job", "1003"], lambda db: api.tax_report("1003", db=db).to_json()),
    "fleet": (["fleet"], lambda db: health.fleet(db).to_json()),
    "fleet-exclude": (["fleet", "--exclude"], lambda db: health.exclusions(db).to_json()),
    "risks": (["risks"], lambda db: health.risks(db).to_json()),
    "jobs": (["jobs"], lambda db: jobs.jobs_in_store(db).to_json()),
    "jobs-attempts": (["jobs", "--job", "1003"], lambda db: jobs.attempts(["1003"], db)[1].to_json()),
    "sources": (["sources"], lambda db: upkeep.sources(db).to_json()),
    "check": (["check"], lambda db: upkeep.check(db).to_json()),
    "compact": (["compact"], lambda db: upkeep.compact(db).to_json()),
    "forget": (["forget", "1"], lambda db: upkeep.forget(["1"], db).to_json()),
    "annotations": (["annotations", "--all"], lambda db: views.grafana_annotations(db, all_jobs=True).to_json()),
}


def _normalised(doc: Any, db: Path) -> Any:
    """The document as JSON text reads back, with the store's own path (each side has its own copy) as
    `STORE`."""
    return json.loads(dumps(doc).replace(json.dumps(str(db))[1:-1], "STORE"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_commands_json_is_its_api_calls_answer(name, sample_store_template, tmp_path):
    argv, call = CASES[name]
    by_cli = copy_sample_store(sample_store_template, tmp_path, "cli.duckdb")
    by_api = copy_sample_store(sample_store_template, tmp_path, "api.duckdb")
    out = CliRunner().invoke(cli, [*argv, "--format", "json", "--db", str(by_cli)])
    assert out.exit_code == 0, out.output
    assert _normalised(json.loads(out.stdout), by_cli) == _normalised(call(by_api), by_api)


def test_ingest_s_json_is_the_api_s_answer(tmp_path):
    jobs_dir = SAMPLE_EXPORTS / "jobs"
    out = CliRunner().invoke(cli, ["ingest", str(jobs_dir), "--format", "json", "--db", str(tmp_path / "cli.duckdb")])
    assert out.exit_code == 0, out.output
    by_cli = json.loads(out.stdout)
    by_api = json.loads(dumps(api.ingest([jobs_dir], tmp_path / "api.duckdb").to_json()))
    assert [f["path"] for f in by_cli["files"]] == [f["path"] for f in by_api["files"]]
    assert by_cli == by_api and by_cli["files"] and all(f["status"] == "loaded" for f in by_cli["files"])


def test_formats_json_is_the_catalogs():
    out = CliRunner().invoke(cli, ["formats", "--format", "json"])
    assert out.exit_code == 0
    doc = json.loads(out.stdout)
    assert doc["schema"] == catalog.FORMATS_SCHEMA
    assert {f["name"]: f["description"] for f in doc["formats"]} == catalog.formats()


def test_the_cli_imports_the_library_through_api_only():
    """The contract names every top-level module of the library but api and cli: a new module must be
    added to it, or the CLI could reach it unseen."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    door = next(c for c in contracts if c.get("source_modules") == ["synestra_cli.cli"])
    package = ROOT / "synestra_cli"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    assert {m.removeprefix("synestra_cli.") for m in door["forbidden_modules"]} == modules - {"api", "cli"}


def test_api_names_resolve_and_are_not_shadowed_by_a_module():
    """`api.explain` is the function even after `synestra_cli.api.explanations` is imported: no module
    of the package is named like a function it offers."""
    import synestra_cli.api.explanations  # noqa: F401

    for name in api.__all__:
        assert not isinstance(getattr(api, name), type(api)), name
    assert callable(api.explain) and callable(api.ingest) and callable(api.tax_report)
