"""Hermetic tests: UTC, C locale, and a store in tmp_path for every test."""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest

from synestra_cli import formats
from synestra_cli.store.connect import memory_store

# Real public samples, copied byte for byte with their PROVENANCE.md files: the tests carry their own data.
DATA = Path(__file__).resolve().parent / "data"
REAL_SAMPLES = DATA / "real_samples"
REAL_DATA = DATA / "real_data"
SAMPLE_EXPORTS = Path(__file__).resolve().parents[1] / "sample_data" / "exports"

# The names of the training-job log formats (the ones whose facts every job log is read with).
JOB_LOG_FORMATS = tuple(fmt.name for fmt in formats.job_log_formats())


def only_formats(monkeypatch: pytest.MonkeyPatch, names: Iterable[str]) -> None:
    """Detection among these formats alone: other parsers' bugs must not fail a test."""
    chosen = {name: fmt for name, fmt in formats.registry().items() if name in set(names)}
    monkeypatch.setattr(formats, "all_formats", lambda: chosen)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/* from the current renderings instead of comparing (tests/golden/README.md).",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once per run, in the controller, before any worker starts
        import simcache

        simcache.prune()


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    # the width the runner's terminal (or xdist's worker) happens to have must not lay out the tables
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("SYNESTRA_DB", str(tmp_path / "store.duckdb"))
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def conn():
    c = memory_store()
    yield c
    c.close()


# The last schema before the series layout (migration 024, store/series.py): a store an older Synestra
# wrote, still read by the old paths (its summaries' row ranges, its candidates' files).
LEGACY_SCHEMA = "023_job_marks"


@pytest.fixture
def legacy_conn():
    c = memory_store(LEGACY_SCHEMA)
    yield c
    c.close()


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "store.duckdb"


@pytest.fixture(scope="session")
def sample_store_template(tmp_path_factory) -> Path:
    """sample_data/exports ingested once per run into a store file, with the default options: several
    modules each paid that ingest (~8 CPU s). No test opens it: each takes a copy (copy_sample_store)."""
    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import ingest_paths
    from synestra_cli.store import open_store

    db = tmp_path_factory.mktemp("sample-template") / "sample.duckdb"
    with open_store(db) as c:
        reports = ingest_paths(c, [SAMPLE_EXPORTS], IngestOptions())
    assert reports and all(r.status == "loaded" for r in reports), [(r.path, r.error) for r in reports]
    assert not db.with_name(db.name + ".wal").exists()  # closed whole: the file alone is the store
    return db


def copy_sample_store(template: Path, folder: Path, name: str = "sample.duckdb") -> Path:
    """A store of its own holding sample_data's ingest, for a test module that writes to it."""
    dest = folder / name
    shutil.copyfile(template, dest)
    return dest
