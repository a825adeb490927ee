"""`--engine ray` (the `distributed` extra): sample_data/ ingested by two local Ray workers into a lake,
and tax-report --all explained by them, answer byte for byte as the local ingest into a store file.
Skipped when Ray is not installed (CI installs `.[test,peer,dev]`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.store.lake_fs import open_fs
from synestra_cli.store.lake_manifest import read_entries

ray = pytest.importorskip("ray")

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def _start_ray(tries: int = 3) -> None:
    """A local Ray of 2 CPUs. Ray gives its raylet a fixed 30 s to start; on a loaded 2-core machine it
    may need another try."""
    for attempt in range(tries):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            return
        except Exception:
            ray.shutdown()
            if attempt == tries - 1:
                raise


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("engine")
    lake, store = f"{base}/lake/", str(base / "store.duckdb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNESTRA_INGEST_WORKERS", "2")
        mp.setenv("SYNESTRA_WORKERS", "2")
        mp.setenv("RAY_AUTH_MODE", "disabled")
        mp.delenv("RAY_ADDRESS", raising=False)
        _start_ray()
        try:
            report = json.loads(_cli("ingest", str(SAMPLE), "--db", lake, "--engine", "ray", "--json"))
            _cli("ingest", str(SAMPLE), "--db", store)
            tax = _cli("tax-report", "--all", "--format", "json", "--db", lake, "--engine", "ray")
            again = json.loads(_cli("ingest", str(SAMPLE), "--db", lake, "--engine", "ray", "--json"))
        finally:
            ray.shutdown()
    return lake, store, report, tax, again


def test_two_workers_load_every_file_and_commit_in_file_order(stores):
    lake, _, report, _, _ = stores
    loaded = [f for f in report["files"] if f["status"] == "loaded"]
    assert len(loaded) == len(report["files"]) > 20
    ids = [e.source_id for e in read_entries(open_fs(lake))]
    assert ids == [f["source_id"] for f in loaded] == sorted(ids)


def test_re_ingest_on_the_engine_adds_nothing(stores):
    *_, again = stores
    assert {f["status"] for f in again["files"]} == {"skipped"}


@pytest.mark.parametrize("job", ["1003", "1008"])
def test_explain_after_a_distributed_ingest_is_the_local_ones(stores, job):
    lake, store, *_ = stores
    assert _cli("explain", "--job", job, "--format", "json", "--db", lake) == _cli(
        "explain", "--job", job, "--format", "json", "--db", store
    )


def test_tax_report_explained_by_the_engine_is_the_local_ones(stores):
    lake, store, _, tax, _ = stores
    assert len(json.loads(tax)["jobs"]) >= 8
    assert tax == _cli("tax-report", "--all", "--format", "json", "--db", store)
    assert list(Path(lake, "_explanations").glob("key-*/*.parquet")), "the workers' explanations are kept"
