"""Hermetic tests: UTC, C locale, and a store in tmp_path for every test."""

from __future__ import annotations

from pathlib import Path

import pytest

from synestra_cli.store.connect import memory_store

# Real public samples, copied byte for byte with their PROVENANCE.md files: the tests carry their own data.
DATA = Path(__file__).resolve().parent / "data"
REAL_SAMPLES = DATA / "real_samples"
REAL_DATA = DATA / "real_data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="Rewrite tests/golden/* from the current renderings instead of comparing (tests/golden/README.md).",
    )


@pytest.fixture(autouse=True)
def hermetic_env(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    monkeypatch.setenv("SYNESTRA_DB", str(tmp_path / "store.duckdb"))
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)


@pytest.fixture
def conn():
    c = memory_store()
    yield c
    c.close()


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "store.duckdb"
