"""Issue 38, the lake as safe as the store file: the same `sql` sandbox (every escape the store-file tests
try, on a lake too, and the lake's own files as targets), each part checked against its manifest entry
(on read: its size; `synestra check`: its sha256), the same exit codes. Defects 1 and 8; each test
failed on the code before it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode
from synestra_cli.store.lake_fs import open_fs as lake_fs
from synestra_cli.store.lake_manifest import read_entries, read_manifest

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]  # heavy: a lake and a store built, copied per test

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "exports"
SYNESTRA = str(Path(sys.executable).parent / "synestra")
TRACEBACK = "Traceback (most recent call last)"
FILES = [SAMPLE / "sacct.txt", SAMPLE / "topology.csv", SAMPLE / "jobs" / "1003.log"]
FILES += [SAMPLE / "syslog" / "gpu-002.syslog.gz", SAMPLE / "snmp" / "leaf-01.prom.gz"]


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line_error(res, code: int) -> bool:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    return res.exit_code == code and len(lines) == 1 and lines[0].startswith("error: ") and TRACEBACK not in res.output


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """A few real files in a lake and in a store file; tests take copies (copied)."""
    base = tmp_path_factory.mktemp("built")
    lake, store = base / "lake", base / "store.duckdb"
    for db in (f"{lake}/", str(store)):
        res = invoke("ingest", *map(str, FILES), "--year", "2026", "--db", db)
        assert res.exit_code == 0, res.output
    return lake, store


@pytest.fixture(params=["file", "lake"])
def db(request, built, tmp_path) -> str:
    lake, store = built
    if request.param == "lake":
        shutil.copytree(lake, tmp_path / "lake")
        return f"{tmp_path / 'lake'}/"
    shutil.copy(store, tmp_path / "store.duckdb")
    return str(tmp_path / "store.duckdb")


def _counts(db: str) -> dict[str, int]:
    res = invoke(
        "sql",
        "SELECT (SELECT count(*) FROM events) e, (SELECT count(*) FROM metrics) m, "
        "(SELECT count(*) FROM steps) s, (SELECT count(*) FROM sources) n",
        "--db",
        db,
        "--format",
        "json",
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)[0]


def _lake_files(db: str) -> dict[str, bytes]:
    root = Path(db)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _a_part(db: str, table: str) -> Path:
    return Path(db) / next(p.path for e in read_entries(lake_fs(db)) for p in e.parts if p.table == table)


# ---------------------------------------------------------------- defect 1: the sandbox, on a lake too

# What the store-file sandbox tests try (tests/test_hostile_cli.py), with {out} a path outside the store.
ESCAPES = [
    "COPY (SELECT * FROM sources) TO '{out}'",
    "EXPORT DATABASE '{out}'",
    "PRAGMA profiling_output = '{out}'; PRAGMA enable_profiling = 'json'; SELECT count(*) FROM steps",
    "SET profiling_output = '{out}'",
    "SELECT * FROM read_csv('{out}')",
    "INSTALL httpfs",
    "LOAD httpfs",
    "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
    "SELECT * FROM read_csv('https://example.com/x.csv')",
    "SET enable_external_access = true; COPY (SELECT 1) TO '{out}'",
    "SET lock_configuration = false; COPY (SELECT 1) TO '{out}'",
    "RESET enable_external_access; COPY (SELECT 1) TO '{out}'",
    "SET memory_limit = '100GB'",
    "ATTACH '{out}' AS o",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM glob('/*')",
    "DELETE FROM steps",
    "INSERT INTO sources SELECT * FROM sources",
    "UPDATE events SET message = 'x'",
    "DROP VIEW events",
    "CREATE TABLE x AS SELECT * FROM events",
    "CREATE OR REPLACE VIEW events AS SELECT * FROM events LIMIT 0",
    "ALTER TABLE steps RENAME TO s2",
    "PREPARE p AS COPY (SELECT 1) TO '{out}'; EXECUTE p",
]
# On a lake, the lake's own files as targets: a data part, the manifest, its settings, a new file inside.
LAKE_TARGETS = [
    "COPY (SELECT * FROM events LIMIT 0) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)",
    "COPY (SELECT * FROM events WHERE false) TO '{part}' (FORMAT parquet)",
    "COPY (SELECT 1 AS x) TO '{manifest}' (FORMAT csv)",
    "COPY (SELECT 1 AS x) TO '{settings}' (FORMAT json)",
    "COPY (SELECT * FROM events) TO '{lake}events/new.parquet' (FORMAT parquet)",
    "EXPORT DATABASE '{lake}exported'",
    "SELECT * FROM read_text('{settings}')",
    "SELECT * FROM read_json('{manifest}')",
    "SELECT * FROM read_parquet('{lake}*/**/*.parquet')",
]


@pytest.mark.parametrize("query", ESCAPES)
def test_1_the_sql_sandbox_holds_on_a_store_file_and_on_a_lake(db, tmp_path, query, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # where DuckDB would keep extensions and secrets
    out = tmp_path / "out"
    before = _counts(db)
    res = invoke("sql", query.format(out=out), "--db", db)
    assert res.exit_code == ExitCode.QUERY, (query, res.output)
    assert one_line_error(res, ExitCode.QUERY), res.stderr
    assert not out.exists() and not (tmp_path / ".duckdb").exists()
    assert _counts(db) == before


@pytest.mark.parametrize("query", LAKE_TARGETS)
def test_1_sql_on_a_lake_cannot_touch_the_lakes_own_files(built, tmp_path, query):
    shutil.copytree(built[0], tmp_path / "lake")
    lake = f"{tmp_path / 'lake'}/"
    files, before = _lake_files(lake), _counts(lake)
    manifest = next(Path(lake).glob("_manifest/*.json"))
    q = query.format(part=_a_part(lake, "events"), manifest=manifest, settings=Path(lake) / "_lake.json", lake=lake)
    res = invoke("sql", q, "--db", lake)
    assert one_line_error(res, ExitCode.QUERY), res.output
    assert _lake_files(lake) == files  # not a byte of the lake changed, nothing added
    assert _counts(lake) == before
    assert invoke("check", "--db", lake).exit_code == 0


def test_1_sql_on_a_lake_still_reads_with_views_macros_and_pragmas(db):
    for query in (
        "SELECT job_id, count(*) AS n FROM steps_reconciled GROUP BY job_id",
        "SELECT to_utc(TIMESTAMP '2026-06-01 12:00:00', 'Europe/Paris') AS t",
        "EXPLAIN SELECT count(*) FROM events",
        "PRAGMA table_info('events')",
        "CALL duckdb_tables()",
        "SELECT 1; SELECT 2 AS two",
        "DESCRIBE SELECT * FROM metrics",
        "SUMMARIZE SELECT host FROM events",
    ):
        res = invoke("sql", query, "--db", db, "--format", "csv")
        assert res.exit_code == 0, (query, res.output)
    assert invoke("sql", "SELECT 1; SELECT 2 AS two", "--db", db, "--format", "csv").stdout == "two\n2\n"


# ---------------------------------------------------------------- defect 8: parts checked against the manifest


def _lake(built, tmp_path) -> str:
    shutil.copytree(built[0], tmp_path / "lake")
    return f"{tmp_path / 'lake'}/"


READERS = [["sql", "SELECT count(*) FROM events"], ["jobs"], ["explain", "--job", "1003"], ["sources"]]


def test_8_a_part_replaced_by_other_valid_parquet_is_refused_by_name_not_read_with_rows_missing(built, tmp_path):
    lake = _lake(built, tmp_path)
    part = _a_part(lake, "events")
    with duckdb.connect() as c:  # other valid Parquet of the same table: 40 of its rows
        c.execute(
            f"COPY (SELECT * FROM read_parquet('{part}') LIMIT 40) TO '{tmp_path}/fewer.parquet' (FORMAT parquet)"
        )
    shutil.copy(tmp_path / "fewer.parquet", part)
    for args in READERS:
        res = invoke(*args, "--db", lake)
        assert one_line_error(res, ExitCode.STORE), (args, res.output)
        assert part.name in res.stderr and "does not match the manifest" in res.stderr
    res = invoke("check", "--db", lake, "--format", "json")
    assert res.exit_code == ExitCode.STORE and TRACEBACK not in res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "synestra.check/1" and not doc["ok"]
    assert [d["path"] for d in doc["damaged"]] == [str(part.relative_to(lake))]


def test_8_a_junk_part_is_a_clear_error_with_exit_8_not_1(built, tmp_path):
    lake = _lake(built, tmp_path)
    part = _a_part(lake, "metrics")
    part.write_bytes(os.urandom(part.stat().st_size))  # the same size: only its content says so
    res = invoke("sql", "SELECT count(*) FROM metrics", "--db", lake)
    assert res.exit_code == ExitCode.STORE and TRACEBACK not in res.output, res.output
    assert "damaged" in res.stderr
    check = invoke("check", "--db", lake)
    assert check.exit_code == ExitCode.STORE and "sha256" in check.stderr and part.name in check.stderr


def test_8_a_part_changed_in_place_at_the_same_size_is_found_by_check(built, tmp_path):
    lake = _lake(built, tmp_path)
    part = _a_part(lake, "steps")
    data = bytearray(part.read_bytes())
    data[len(data) // 3] ^= 0xFF  # one flipped bit of data: DuckDB reads it without a word
    part.write_bytes(bytes(data))
    res = invoke("check", "--db", lake)
    assert res.exit_code == ExitCode.STORE and "its sha256 is not the manifest's" in res.stderr


def test_8_a_missing_part_is_refused_by_name(built, tmp_path):
    lake = _lake(built, tmp_path)
    part = _a_part(lake, "sources")
    part.unlink()
    res = invoke("jobs", "--db", lake)
    assert one_line_error(res, ExitCode.STORE) and "missing" in res.stderr


def test_8_check_says_whole_for_a_whole_lake_and_store_file(db):
    res = invoke("check", "--db", db, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["damaged"] == []
    if doc["kind"] == "lake":
        parts = [p for e in read_manifest(lake_fs(db)).kept() for p in e.parts]
        assert doc["parts"] == len(parts) > 0 and all(p.sha256 for p in parts)
    else:
        assert doc["tables"]["events"] > 0


def test_8_check_on_a_damaged_store_file_is_exit_8(built, tmp_path):
    store = tmp_path / "s.duckdb"
    shutil.copy(built[1], store)
    os.truncate(store, store.stat().st_size // 2)
    res = subprocess.run([SYNESTRA, "check", "--db", str(store)], capture_output=True, text=True, timeout=60)
    assert res.returncode == ExitCode.STORE and TRACEBACK not in res.stderr, res.stderr


def test_8_a_lake_written_now_is_layout_3_and_an_older_layout_2_lake_still_reads(built, tmp_path):
    lake = _lake(built, tmp_path)
    assert json.loads((Path(lake) / "_lake.json").read_text())["layout"] == 3
    for manifest in Path(lake).glob("_manifest/*.json"):  # as layout 2 wrote it: no sha256
        doc = json.loads(manifest.read_text())
        for entry in doc.get("entries", [doc]):
            for part in entry["parts"]:
                part.pop("sha256", None)
        manifest.write_text(json.dumps(doc))
    (Path(lake) / "_lake.json").write_text(json.dumps({"layout": 2, "buckets": 16}))
    assert invoke("jobs", "--db", lake).exit_code == 0
    assert invoke("check", "--db", lake).exit_code == 0  # without checksums: sizes and footers' rows
