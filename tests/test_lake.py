"""The lake store (docs/lake.md): sample_data/ (a simulated 36-hour campaign) ingested into a Parquet lake
and into a store file gives the same explain and tax-report JSON byte for byte; re-ingest adds nothing;
explain reads only its job's partitions; a crash between a file's parts and its manifest entry leaves no
half source; other tools read the parts as plain Parquet."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.errors import StoreError
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import lake_manifest
from synestra_cli.store.connect import connect
from synestra_cli.store.lake import lake_target, narrow_to_job, scope_parts
from synestra_cli.store.lake_manifest import read_entries
from synestra_cli.store.lake_writer import ingest_target

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
JOBS = ["1001", "1003", "1008"]  # a plain job, one with a restart, one with a ghost link on a switch


def _ingest(db: str, paths: list[Path]) -> list:
    with ingest_target(db, None) as (conn, on_report):
        return ingest_paths(conn, paths, IngestOptions(), on_report=on_report)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[str, str]:
    base = tmp_path_factory.mktemp("lake")
    lake, store = f"{base}/lake/", str(base / "store.duckdb")
    _ingest(lake, [SAMPLE])
    _ingest(store, [SAMPLE])
    return lake, store


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_folder_or_url_is_a_lake_and_a_file_path_is_not(tmp_path):
    assert lake_target(f"{tmp_path}/new-lake/") == f"{tmp_path}/new-lake/"
    assert lake_target(str(tmp_path)) == str(tmp_path)  # an existing folder
    assert lake_target("s3://bucket/synestra") == "s3://bucket/synestra"
    assert lake_target(str(tmp_path / "store.duckdb")) is None


@pytest.mark.parametrize("job", JOBS)
def test_explain_on_the_lake_is_byte_for_byte_the_store_files(stores, job):
    lake, store = stores
    on_lake = _cli("explain", "--job", job, "--format", "json", "--db", lake)
    assert json.loads(on_lake)["checkpoints"], "an explanation with checkpoints, not an empty document"
    assert on_lake == _cli("explain", "--job", job, "--format", "json", "--db", store)


def test_tax_report_on_the_lake_is_byte_for_byte_the_store_files(stores):
    lake, store = stores
    on_lake = _cli("tax-report", "--all", "--format", "json", "--db", lake)
    assert len(json.loads(on_lake)["jobs"]) >= 8
    assert on_lake == _cli("tax-report", "--all", "--format", "json", "--db", store)


def test_every_table_holds_the_same_rows(stores):
    lake, store = stores
    with connect(lake, read_only=True) as a, connect(store, read_only=True) as b:
        for table in ("metrics", "events", "steps", "checkpoints", "attempts", "jobs", "topology", "gpus"):
            q = f"SELECT * EXCLUDE (source_id) FROM {table} ORDER BY ALL"
            assert a.execute(q).fetchall() == b.execute(q).fetchall(), table
        assert a.execute("SELECT count(*) FROM metrics").fetchone()[0] > 100_000


def test_re_ingest_adds_nothing(stores):
    lake, _ = stores
    before = sorted(p.name for p in Path(lake, "_manifest").iterdir())
    reports = _ingest(lake, [SAMPLE])
    assert {r.status for r in reports} == {"skipped"}
    assert sorted(p.name for p in Path(lake, "_manifest").iterdir()) == before


def test_explain_reads_only_its_jobs_partitions(stores, tmp_path):
    """Every part outside job 1001's hosts and days moved out of the lake once the reader is narrowed:
    explain still answers, and the same. The parts it kept are fewer than the lake's."""
    lake, store = stores
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    conn = connect(str(copy), read_only=True)
    try:
        narrow_to_job(conn, "1001")
        kept = {Path(u) for t in ("metrics", "events") for u in scope_parts(conn, t)}
        every = set(copy.glob("metrics/**/*.parquet")) | set(copy.glob("events/**/*.parquet"))
        assert kept and kept < every, "the job reads some partitions, not all"
        away = tmp_path / "away"
        for part in every - kept:
            dest = away / part.relative_to(copy)
            dest.parent.mkdir(parents=True, exist_ok=True)
            part.rename(dest)
        from synestra_cli.explain.api import explain_job

        narrowed = json.dumps(explain_job(conn, "1001").to_json(), default=str, sort_keys=True)
    finally:
        conn.close()
    with connect(store, read_only=True) as full:
        from synestra_cli.explain.api import explain_job

        assert narrowed == json.dumps(explain_job(full, "1001").to_json(), default=str, sort_keys=True)


def test_a_crash_before_a_files_manifest_entry_leaves_the_lake_as_it_was(tmp_path, monkeypatch):
    """The manifest write of the third file fails (as a kill would stop it): the two files before it
    are in, the third has no rows anywhere a reader looks, and the next ingest loads it and the rest."""
    lake = f"{tmp_path}/lake/"
    files = sorted((SAMPLE / "syslog").iterdir())[:4]
    real = lake_manifest.LocalFS.write_text
    calls = []

    def dies_on_the_third(self, rel, text):
        if rel.startswith("_manifest/"):
            calls.append(rel)
            if len(calls) == 3:
                raise KeyboardInterrupt  # as a kill: nothing after this line runs
        real(self, rel, text)

    monkeypatch.setattr(lake_manifest.LocalFS, "write_text", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        _ingest(lake, files)
    monkeypatch.setattr(lake_manifest.LocalFS, "write_text", real)
    with connect(lake, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 2
        assert conn.execute("SELECT count(DISTINCT source_id) FROM events").fetchone()[0] == 2
    reports = _ingest(lake, files)
    assert [r.status for r in reports] == ["skipped", "skipped", "loaded", "loaded"]
    with connect(lake, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 4


def test_a_changed_file_replaces_its_source_in_the_lake(tmp_path):
    lake = f"{tmp_path}/lake/"
    log = tmp_path / "node.log.gz"
    one, other = sorted((SAMPLE / "syslog").iterdir())[:2]
    shutil.copy(one, log)
    first = _ingest(lake, [log])[0]
    shutil.copy(other, log)
    second = _ingest(lake, [log])[0]
    assert second.replaced == [first.source_id]
    with connect(lake, read_only=True) as conn:
        assert conn.execute("SELECT list(DISTINCT source_id) FROM events").fetchone()[0] == [second.source_id]
    assert [e.source_id for e in read_entries(lake_manifest.open_fs(lake))] == [second.source_id]


def test_a_folder_no_ingest_wrote_is_not_read_as_an_empty_lake(tmp_path):
    res = CliRunner().invoke(cli, ["jobs", "--db", str(tmp_path)])
    assert res.exit_code != 0 and f"no lake at {tmp_path}: run `synestra ingest" in res.output


def test_only_ingest_writes_a_lake(stores):
    lake, _ = stores
    with pytest.raises(StoreError, match="only `synestra ingest` writes a lake"):
        connect(lake)


def test_sql_on_a_lake_reads_the_lake_and_nothing_else(stores):
    lake, _ = stores
    out = _cli("sql", "--db", lake, "--format", "json", "SELECT count(*) AS n FROM jobs")
    assert json.loads(out)[0]["n"] >= 8
    res = CliRunner().invoke(cli, ["sql", "--db", lake, "SELECT * FROM read_csv('/etc/passwd')"])
    assert res.exit_code != 0 and "disabled by configuration" in res.output


def test_the_parts_are_plain_parquet_with_the_documented_partitions(stores):
    """What docs/lake.md tells a DuckDB user to type reads the lake without Synestra."""
    lake, store = stores
    plain = duckdb.connect()
    n, hosts = plain.execute(
        "SELECT count(*), count(DISTINCT host) "
        f"FROM read_parquet('{lake}metrics/*/*/*.parquet', hive_partitioning = true) WHERE day = '2026-11-02'"
    ).fetchone()
    with connect(store, read_only=True) as conn:
        want = conn.execute(
            "SELECT count(*), count(DISTINCT host) FROM metrics WHERE ts::DATE = DATE '2026-11-02'"
        ).fetchone()
    assert (n, hosts) == want
    bucket = plain.execute(
        f"SELECT DISTINCT bucket = (('0x' || left(md5(host), 8))::BIGINT % 16) "
        f"FROM read_parquet('{lake}metrics/*/*/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert bucket == [(True,)]


@pytest.mark.slow
def test_kill_9_mid_ingest_leaves_a_readable_lake(tmp_path):
    """A real kill -9 while files load: what the manifest lists reads whole, and the next ingest ends the
    work (every file in, none twice)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    lake = tmp_path / "lake"
    cmd = [
        sys.executable,
        "-c",
        "from synestra_cli.cli.main import cli; cli()",
        "ingest",
        str(SAMPLE),
        "--db",
        f"{lake}/",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while len(list((lake / "_manifest").glob("*.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with connect(str(lake), read_only=True) as conn:
        n = conn.execute("SELECT count(*) FROM sources").fetchone()[0]
        assert 3 <= n < 29
        for table in ("metrics", "events", "steps", "checkpoints", "jobs", "rejects"):
            conn.execute(f"SELECT count(*) FROM {table}").fetchall()  # every listed part is whole
        assert (
            conn.execute(
                "SELECT count(DISTINCT source_id) FROM metrics WHERE source_id NOT IN (SELECT source_id FROM sources)"
            ).fetchone()[0]
            == 0
        )
    reports = _ingest(f"{lake}/", [SAMPLE])
    assert sum(r.status == "skipped" for r in reports) == n
    assert sum(r.status == "loaded" for r in reports) == 29 - n
    with connect(str(lake), read_only=True) as conn:
        assert conn.execute("SELECT count(*), count(DISTINCT sha256) FROM sources").fetchone() == (29, 29)
    listed = {e.source_id for e in read_entries(lake_manifest.open_fs(str(lake)))}
    on_disk = {lake_manifest.part_source(p.name) for p in lake.glob("*/**/part-*.parquet")}
    assert on_disk == listed, "the killed run's unlisted parts were removed"
