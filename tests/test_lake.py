"""The lake store (docs/lake.md): sample_data/ (a simulated 36-hour campaign) ingested into a Parquet lake
and into a store file gives the same explain and tax-report JSON byte for byte; re-ingest adds nothing;
explain reads only its job's partitions; a crash between a file's parts and its manifest entry leaves no
half source; other tools read the parts as plain Parquet."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.errors import StoreError
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import lake_fs, lake_manifest, open_store
from synestra_cli.store.connect import connect, may_be_lake
from synestra_cli.store.lake import lake_target, narrow_to_job, scope_parts
from synestra_cli.store.lake_manifest import read_entries
from synestra_cli.store.lake_upkeep import compact
from synestra_cli.store.lake_upkeep import forget as forget_on_lake
from synestra_cli.store.lake_writer import ingest_target
from synestra_cli.store.sql import has_table

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
JOBS = ["1001", "1003", "1008"]  # a plain job, one with a restart, one with a ghost link on a switch


def _ingest(db: str, paths: list[Path]) -> list:
    store = open_store(db)
    store.prepare_ingest()
    with store.ingest_target(None) as (target, on_report):  # a lake or a store file, as `ingest` does
        return ingest_paths(target, paths, IngestOptions(), on_report=on_report)


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[str, str]:
    """sample_data/ in a lake, each file its own parts (its ingest compacts nothing: the compaction
    tests compact copies), and in a store file."""
    base = tmp_path_factory.mktemp("lake")
    lake, store = f"{base}/lake/", str(base / "store.duckdb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SYNESTRA_LAKE_COMPACT_RUN", "0")
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
    # what connect() asks before it imports the lake's code: never False for a lake
    for target in (f"{tmp_path}/new-lake/", str(tmp_path), "s3://bucket/synestra", "file:///x/lake"):
        assert may_be_lake(target)
    assert not may_be_lake(str(tmp_path / "store.duckdb"))


@pytest.mark.heavy
def test_a_store_file_is_opened_without_importing_the_lake(stores):
    """`explain --job` on a store file imports neither the lake nor its manifest (one job's telemetry is read
    as a fleet's is: store/series.py)."""
    code = (
        "import sys; from click.testing import CliRunner; from synestra_cli.cli.main import cli; "
        f"r = CliRunner().invoke(cli, ['explain', '--job', '1001', '--db', {stores[1]!r}, '--format', 'json']); "
        "assert r.exit_code == 0, r.output; "
        "lazy = ('synestra_cli.store.lake',); "
        "print(sorted(m for m in sys.modules if m.startswith(lazy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


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


def test_a_lake_written_before_host_summaries_explains_as_the_store_file(stores, tmp_path):
    """A lake's sources ingested before migration 021 have per-series summaries and no host summaries:
    its reader leaves the host stage out (it would rule out their hosts) and explains as before."""
    lake, store = stores
    old = tmp_path / "old-lake"
    shutil.copytree(lake, old)
    for entry in (old / "_manifest").glob("*.json"):
        doc = json.loads(entry.read_text())
        doc["parts"] = [p for p in doc["parts"] if p["table"] != "host_summaries"]
        entry.write_text(json.dumps(doc))
    with connect(f"{old}/", read_only=True) as conn:
        assert not has_table(conn, "host_summaries")
    with connect(lake, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM host_summaries").fetchone()[0] > 0
    on_old = _cli("explain", "--job", "1008", "--format", "json", "--db", f"{old}/")
    assert on_old == _cli("explain", "--job", "1008", "--format", "json", "--db", store)


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
        from synestra_cli.explain.job import explain_job

        narrowed = json.dumps(explain_job(conn, "1001").to_json(), default=str, sort_keys=True)
    finally:
        conn.close()
    with connect(store, read_only=True) as full:
        from synestra_cli.explain.job import explain_job

        assert narrowed == json.dumps(explain_job(full, "1001").to_json(), default=str, sort_keys=True)


def test_a_run_of_jobs_explained_together_reads_only_their_partitions(stores, tmp_path):
    """The Ray engine explains runs of jobs at once (engine/ray_engine.py): narrowed to the run, the
    reader keeps the union of its jobs' partitions, and the batch answers as the store does."""
    from synestra_cli.explain.batch import explain_batch
    from synestra_cli.explain.job import explain_job
    from synestra_cli.store.lake import narrow_to_jobs

    lake, store = stores
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    run = ["1001", "1003"]  # gpu-001 and gpu-002, one after the other
    conn = connect(str(copy), read_only=True)
    try:
        narrow_to_job(conn, "1001")
        one = {Path(u) for t in ("metrics", "events") for u in scope_parts(conn, t)}
        narrow_to_jobs(conn, run)
        kept = {Path(u) for t in ("metrics", "events") for u in scope_parts(conn, t)}
        every = set(copy.glob("metrics/**/*.parquet")) | set(copy.glob("events/**/*.parquet"))
        assert one <= kept < every, "the run reads its jobs' partitions (here, their hosts'), not all"
        for part in every - kept:
            dest = tmp_path / "away" / part.relative_to(copy)
            dest.parent.mkdir(parents=True, exist_ok=True)
            part.rename(dest)
        batched = {e.job: json.dumps(e.to_json(), default=str, sort_keys=True) for e in explain_batch(conn, run)}
        narrow_to_jobs(conn, [*run, "no-such-job"])  # a job of no known time or hosts: every partition
        assert {Path(u) for u in scope_parts(conn, "metrics")} == set(copy.glob("metrics/**/*.parquet"))
    finally:
        conn.close()
    with connect(store, read_only=True) as full:
        alone = {j: json.dumps(explain_job(full, j).to_json(), default=str, sort_keys=True) for j in run}
    assert batched == alone


def test_runs_of_jobs_are_consecutive_a_multiple_of_the_actors_and_bounded(monkeypatch):
    from synestra_cli.engine import ray_engine

    jobs = [str(1000 + k) for k in range(10)]
    assert ray_engine.runs_of(jobs, 2) == [jobs[:5], jobs[5:]]
    assert ray_engine.runs_of(jobs[:1], 4) == [jobs[:1]]
    assert ray_engine.runs_of([], 2) == []
    monkeypatch.setattr(ray_engine, "BATCH_JOBS", 3)
    runs = ray_engine.runs_of(jobs, 2)
    assert [len(r) for r in runs] == [3, 3, 2, 2] and sum(runs, []) == jobs


def test_a_crash_before_a_files_manifest_entry_leaves_the_lake_as_it_was(tmp_path, monkeypatch):
    """The manifest write of the third file fails (as a kill would stop it): the two files before it
    are in, the third has no rows anywhere a reader looks, and the next ingest loads it and the rest."""
    lake = f"{tmp_path}/lake/"
    files = sorted((SAMPLE / "syslog").iterdir())[:4]
    real = lake_fs.LocalFS.write_text
    calls = []

    def dies_on_the_third(self, rel, text):
        if rel.startswith("_manifest/"):
            calls.append(rel)
            if len(calls) == 3:
                raise KeyboardInterrupt  # as a kill: nothing after this line runs
        real(self, rel, text)

    monkeypatch.setattr(lake_fs.LocalFS, "write_text", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        _ingest(lake, files)
    monkeypatch.setattr(lake_fs.LocalFS, "write_text", real)
    with connect(lake, read_only=True) as conn:
        kept = {Path(p).name for (p,) in conn.execute("SELECT path FROM sources").fetchall()}
        assert conn.execute("SELECT count(DISTINCT source_id) FROM events").fetchone()[0] == 2
    assert len(kept) == 2  # (the yearless logs come last: ingest/run.py's second pass)
    reports = _ingest(lake, files)
    assert [r.status for r in reports] == ["skipped" if f.name in kept else "loaded" for f in files]
    with connect(lake, read_only=True) as conn:
        assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 4


def test_ingest_stages_in_a_duckdb_file_of_its_own_that_it_removes(tmp_path):
    """Not :memory: (an in-memory database keeps its tables uncompressed in the buffer pool): a file
    under the lake's _staging/, gone when the ingest ends."""
    lake = f"{tmp_path}/lake/"
    with ingest_target(lake, None) as (conn, on_report):
        staged = Path(
            conn.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()[0]
        )
        assert staged.name == "staging.duckdb" and staged.is_file()
        assert staged.parent.parent == Path(tmp_path, "lake", "_staging")
        reports = ingest_paths(conn, [SAMPLE / "sacct.txt"], IngestOptions(), on_report=on_report)
    assert [r.status for r in reports] == ["loaded"]
    assert not staged.parent.exists()
    with connect(lake, read_only=True) as reader:
        assert reader.execute("SELECT count(*) FROM sources").fetchone()[0] == 1


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
    assert [e.source_id for e in read_entries(lake_fs.open_fs(lake))] == [second.source_id]


def test_a_folder_no_ingest_wrote_is_not_read_as_an_empty_lake(tmp_path):
    res = CliRunner().invoke(cli, ["jobs", "--db", str(tmp_path)])
    assert res.exit_code != 0 and f"no lake at {tmp_path}: run `synestra ingest" in res.output


def test_only_ingest_and_forget_write_a_lake(stores):
    lake, _ = stores
    with pytest.raises(StoreError, match="written by `synestra ingest` and `synestra forget` only"):
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
    # the sources, and the compaction the second ingest made as it closed (its parts carry its own id)
    listed = {e.source_id for e in lake_manifest.read_manifest(lake_fs.open_fs(str(lake))).kept()}
    on_disk = {lake_manifest.part_source(p.name) for p in lake.glob("*/**/part-*.parquet")}
    assert on_disk == listed, "the killed run's unlisted parts were removed"


# --- forget, kept explanations, the compacted manifest, the writer lock ------------------------------


@pytest.fixture
def copies(stores, tmp_path) -> tuple[str, str]:
    """Copies of the module's lake and store file, for a test that writes to them."""
    lake, store = stores
    shutil.copytree(lake, tmp_path / "lake")
    shutil.copy(store, tmp_path / "store.duckdb")
    return f"{tmp_path}/lake/", str(tmp_path / "store.duckdb")


def _sources(db: str) -> list[int]:
    with connect(db, read_only=True) as conn:
        return [r[0] for r in conn.execute("SELECT source_id FROM sources ORDER BY 1").fetchall()]


@pytest.mark.heavy
def test_forget_on_a_lake_removes_what_forget_on_a_store_file_removes(copies):
    """Job 1008's log and one DCGM export forgotten on both: the same synestra.forget/1 report, the same
    explain and tax-report JSON afterwards, and the forgotten parts gone from the folder."""
    lake, store = copies
    refs = [str(SAMPLE / "jobs" / "1008.log"), str(sorted((SAMPLE / "dcgm").iterdir())[0])]
    before = _sources(lake)
    on_lake = _cli("forget", *refs, "--db", lake, "--format", "json")
    assert json.loads(on_lake)["rows"] > 1000
    assert on_lake == _cli("forget", *refs, "--db", store, "--format", "json")
    gone = {s["source_id"] for s in json.loads(on_lake)["sources"]}
    assert len(gone) == 2 and _sources(lake) == [s for s in before if s not in gone] == _sources(store)
    on_disk = {lake_manifest.part_source(p.name) for p in Path(lake).glob("*/**/part-*.parquet")}
    assert not on_disk & gone - _catalog_owners(lake), "the forgotten sources' parts are removed"
    for job in ("1001", "1003"):
        assert _cli("explain", "--job", job, "--format", "json", "--db", lake) == _cli(
            "explain", "--job", job, "--format", "json", "--db", store
        )
    assert _cli("tax-report", "--all", "--format", "json", "--db", lake) == _cli(
        "tax-report", "--all", "--format", "json", "--db", store
    )
    res = CliRunner().invoke(cli, ["forget", refs[0], "--db", lake])
    assert res.exit_code == 5 and "no source" in res.output  # forgotten already: as on a store file


def _catalog_owners(lake: str) -> set[int]:
    """Sources whose metric-catalog part a forget carries on (a store file keeps catalog rows too)."""
    return {lake_manifest.part_source(p.name) for p in Path(lake).glob("metric_catalog/part-*.parquet")}


def test_a_forget_killed_before_its_entry_changes_nothing(copies, monkeypatch):
    lake, _ = copies
    before = _sources(lake)
    real = lake_fs.LocalFS.write_text

    def dies_at_the_commit(self, rel, text):
        if rel.startswith("_manifest/source-"):
            raise KeyboardInterrupt
        real(self, rel, text)

    monkeypatch.setattr(lake_fs.LocalFS, "write_text", dies_at_the_commit)
    with pytest.raises(KeyboardInterrupt):
        forget_on_lake(lake, [str(SAMPLE / "jobs" / "1008.log")])
    monkeypatch.setattr(lake_fs.LocalFS, "write_text", real)
    assert _sources(lake) == before
    assert _cli("explain", "--job", "1008", "--format", "json", "--db", lake)


def _explained_now(db: str) -> int:
    """How many jobs a tax report over `db` explains (the rest it reuses), keeping them as the CLI does."""
    from synestra_cli.accounting.kept import explanations as memo
    from synestra_cli.explain.job import jobs_in_window

    with connect(db, read_only=True) as conn:
        _, computed, key = memo.explain_jobs(conn, jobs_in_window(conn))
    memo.save_to(db, key, computed)
    return len(computed)


@pytest.mark.heavy
def test_a_lake_keeps_explanations_under_the_store_files_key(copies):
    """The first report explains every job and keeps them beside the parts; the next reuses them all
    (and answers the same bytes); an ingest changes the key, so none is reused stale, and the stale
    ones are removed when the new ones are kept."""
    lake, store = copies
    shutil.rmtree(Path(lake, "_explanations"), ignore_errors=True)  # the module's earlier reports kept some
    n = _explained_now(lake)
    assert n >= 8
    kept = list(Path(lake, "_explanations").glob("key-*/*.parquet"))
    assert len(kept) == 1
    assert _explained_now(lake) == 0
    assert _cli("tax-report", "--all", "--format", "json", "--db", lake) == _cli(
        "tax-report", "--all", "--format", "json", "--db", store
    )
    forget_on_lake(lake, [str(SAMPLE / "jobs" / "1003.log")])  # the sources change: a new key
    assert _explained_now(lake) == n  # every job explained again: none reused stale
    assert [p.parent.name for p in Path(lake, "_explanations").glob("key-*/*.parquet")] != [kept[0].parent.name]
    assert len(list(Path(lake, "_explanations").iterdir())) == 1, "the stale key's folder is removed"


@pytest.mark.heavy
def test_ingest_explain_on_a_lake_keeps_every_job(tmp_path):
    lake = f"{tmp_path}/lake/"
    res = CliRunner().invoke(cli, ["ingest", str(SAMPLE), "--db", lake, "--explain"])
    assert res.exit_code == 0, res.output
    assert re.search(r"\d+ jobs? explained and kept", res.output)
    assert _explained_now(lake) == 0


def test_a_compacted_manifest_reads_as_the_loose_entries_did(copies, monkeypatch):
    """Compaction folds the loose entries into one checkpoint; a reader sees the same sources. A reader
    whose listing a compaction made stale lists again, and never sees half a manifest; replace and
    forget still work on entries inside the checkpoint; later entries are loose after it."""
    from synestra_cli.store.lake_writer import compact_if_due

    monkeypatch.setenv("SYNESTRA_LAKE_COMPACT_RUN", "0")  # the manifest alone here: no parts compacted
    lake, _ = copies
    fs = lake_fs.open_fs(lake)
    before, listing = read_entries(fs), fs.listdir("_manifest")
    assert compact_if_due(fs, every=1, min_run=10**9).checkpoint  # the manifest alone, as ingest does
    names = fs.listdir("_manifest")
    assert names == [lake_manifest.checkpoint_name(before[-1].source_id)]
    assert [e.to_json() for e in read_entries(fs)] == [e.to_json() for e in before]
    stale = iter([listing])
    real = lake_fs.LocalFS.listdir
    monkeypatch.setattr(lake_fs.LocalFS, "listdir", lambda self, d: next(stale, None) or real(self, d))
    assert [e.source_id for e in read_entries(fs)] == [e.source_id for e in before]
    monkeypatch.setattr(lake_fs.LocalFS, "listdir", real)
    forget_on_lake(lake, [str(SAMPLE / "jobs" / "1003.log")])
    assert len(read_entries(fs)) == len(before) - 1
    assert lake_manifest.read_manifest(fs).loose == 1
    assert compact(lake).checkpoint and lake_manifest.read_manifest(fs).loose == 0
    assert len(_sources(lake)) == len(before) - 1


def test_ingest_compacts_the_manifest_once_enough_entries_are_loose(tmp_path, monkeypatch):
    from synestra_cli.store import lake_writer

    monkeypatch.setattr(lake_writer, "COMPACT_AFTER", 3)
    lake = f"{tmp_path}/lake/"
    files = sorted((SAMPLE / "syslog").iterdir())[:5]
    first = [r for r in _ingest(lake, files[:2]) if r.status == "loaded"]
    assert len(first) == 2
    assert lake_manifest.read_manifest(lake_fs.open_fs(lake)).checkpoint == 0  # 2 loose: not yet
    loaded = first + [r for r in _ingest(lake, files[2:]) if r.status == "loaded"]
    manifest = lake_manifest.read_manifest(lake_fs.open_fs(lake))
    assert len(loaded) >= 3
    assert (manifest.checkpoint, manifest.loose) == (loaded[-1].source_id, 0)
    assert _sources(lake) == [r.source_id for r in loaded]


def test_a_second_writer_is_refused_while_one_holds_the_lake(copies, monkeypatch):
    from synestra_cli.store.lake_writer import LakeWriter

    lake, _ = copies
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "0")
    writer = LakeWriter(lake)
    try:
        res = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), "--db", lake])
        assert res.exit_code == 4 and "is being written by another synestra" in res.output
        res = CliRunner().invoke(cli, ["forget", str(SAMPLE / "sacct.txt"), "--db", lake])
        assert res.exit_code == 4
        assert _cli("jobs", "--db", lake)  # readers never wait
    finally:
        writer.close()
    assert json.loads(_cli("forget", str(SAMPLE / "sacct.txt"), "--db", lake, "--format", "json"))["sources"]


def test_the_engine_needs_a_lake(tmp_path):
    """Refused before Ray is imported: runs where Ray is not installed (CI)."""
    res = CliRunner().invoke(
        cli, ["ingest", str(SAMPLE / "sacct.txt"), "--db", str(tmp_path / "s.duckdb"), "--engine", "ray"]
    )
    assert res.exit_code != 0 and "works on a lake" in res.output


def test_a_new_lake_takes_its_bucket_count_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNESTRA_LAKE_BUCKETS", "64")
    lake = f"{tmp_path}/lake/"
    _ingest(lake, sorted((SAMPLE / "dcgm").iterdir())[:3])
    assert json.loads(Path(lake, "_lake.json").read_text())["buckets"] == 64
    buckets = {int(p.parent.name.split("=")[1]) for p in Path(lake).glob("metrics/*/*/*.parquet")}
    plain = (
        duckdb.connect()
        .execute(
            f"SELECT DISTINCT (('0x' || left(md5(host), 8))::BIGINT % 64)::INTEGER "
            f"FROM read_parquet('{lake}metrics/*/*/*.parquet')"
        )
        .fetchall()
    )
    assert buckets == {r[0] for r in plain}


def test_a_lake_whose_path_holds_a_quote_is_written_and_read(tmp_path):
    # the parts are staged inside a local lake and COPY ... TO takes no parameter: the path is a literal
    lake = f"{tmp_path}/o'brien's lake/"
    res = CliRunner().invoke(
        cli, ["ingest", str(SAMPLE / "jobs"), str(SAMPLE / "sacct.txt"), "--db", lake, "--explain"]
    )
    assert res.exit_code == 0, res.output
    assert re.search(r"\d+ jobs? explained and kept", res.output)
    jobs = json.loads(_cli("jobs", "--format", "json", "--db", lake))
    assert len(jobs["jobs"]) >= 8


# --- compaction of small parts (store/lake_compact.py) ------------------------------------------------


def _answers(db: str) -> list[str]:
    return [_cli("explain", "--job", job, "--format", "json", "--db", db) for job in JOBS] + [
        _cli("tax-report", "--all", "--format", "json", "--db", db)
    ]


def _listed_parts(lake: str) -> list[str]:
    return [p.path for e in lake_manifest.read_manifest(lake_fs.open_fs(lake)).kept() for p in e.parts]


def test_plan_compacts_runs_of_small_parts_and_a_big_part_breaks_a_run():
    from synestra_cli.store.lake_compact import SMALL_BYTES, plan
    from synestra_cli.store.lake_manifest import Entry, Part

    def entry(sid: int, size: int, bucket: int = 3) -> Entry:
        part = Part("metrics", f"metrics/day=d/bucket={bucket}/part-{sid:08d}-0.parquet", 10, size, "d", bucket)
        return Entry(sid, "", "", "", "dcgm", [part, Part("sources", f"sources/part-{sid:08d}.parquet", 1, 100)])

    entries = [entry(1, 10), entry(2, 10), entry(3, SMALL_BYTES), entry(4, 10), entry(5, 10, bucket=4), entry(6, 10)]
    runs = [[h.entry.source_id for h in run] for run in plan(entries, min_run=2)]
    # metrics bucket 3: 1 and 2, then the big part of 3 breaks the run, then 4 and 6; bucket 4 holds one
    assert runs == [[1, 2], [4, 6], [1, 2, 3, 4, 5, 6]]
    assert plan(entries, min_run=7) == []


@pytest.mark.heavy
def test_compaction_answers_byte_for_byte_as_before(copies):
    """Every small table's parts become one part, the telemetry's runs one per partition; explain and
    tax-report answer the same bytes (and as the store file); re-ingest still adds nothing; the old parts
    are retired, not deleted, until their retention has run out."""
    lake, store = copies
    before = _answers(lake)
    parts_before = _listed_parts(lake)
    from synestra_cli.store.lake_upkeep import compact as compact_now

    done = compact_now(lake)
    after = _listed_parts(lake)
    assert done.merged > 0 and len(after) < len(parts_before) / 2
    assert done.deleted == 0  # all retired now, none due
    assert sum(p.startswith("sources/") for p in after) == 1
    assert all(Path(lake, p).exists() for p in parts_before), "retired parts stay for readers in flight"
    assert _answers(lake) == before == _answers(store)
    assert json.loads(Path(lake, "_lake.json").read_text())["layout"] == 3  # checksummed parts (issue 38)
    manifest_files = sorted(p.name for p in Path(lake, "_manifest").iterdir())
    assert {r.status for r in _ingest(lake, [SAMPLE])} == {"skipped"}
    assert sorted(p.name for p in Path(lake, "_manifest").iterdir()) == manifest_files
    again = compact_now(lake, retain=0)  # nothing small left to merge; the retired parts go now
    assert again.merged == 0 and again.deleted == len(set(parts_before) - set(after))
    on_disk = {p.relative_to(lake).as_posix() for p in Path(lake).glob("*/**/part-*.parquet")}
    assert on_disk == set(after), "what is left in the folder is what the manifest lists"
    assert _answers(lake) == before


@pytest.mark.heavy
def test_forget_after_compaction_rewrites_the_parts_that_hold_its_rows(copies):
    """A forgotten source's rows sit in compacted parts with other sources' rows: forget rewrites those
    parts without them, in its one commit, and answers as forget on a store file."""
    lake, store = copies
    from synestra_cli.store.lake_upkeep import compact as compact_now

    compact_now(lake)
    refs = [str(SAMPLE / "jobs" / "1008.log"), str(sorted((SAMPLE / "dcgm").iterdir())[0])]
    on_lake = _cli("forget", *refs, "--db", lake, "--format", "json")
    assert json.loads(on_lake)["rows"] > 1000
    assert on_lake == _cli("forget", *refs, "--db", store, "--format", "json")
    gone = [s["source_id"] for s in json.loads(on_lake)["sources"]]
    assert _sources(lake) == _sources(store)
    files = [str(Path(lake, p)) for p in _listed_parts(lake) if not p.startswith("metric_catalog/")]
    left = duckdb.connect().execute(
        "SELECT count(*) FROM read_parquet(?, union_by_name = true) WHERE list_contains(?, source_id)", [files, gone]
    )
    assert left.fetchone()[0] == 0, "no listed part holds a forgotten row"
    on_disk = [str(p) for p in Path(lake).glob("*/**/part-*.parquet") if "metric_catalog" not in str(p)]
    stray = duckdb.connect().execute(
        "SELECT count(*) FROM read_parquet(?, union_by_name = true) WHERE list_contains(?, source_id)", [on_disk, gone]
    )
    assert stray.fetchone()[0] == 0, "nor any part left in the folder, retired ones included"
    assert _answers(lake)[:2] == _answers(store)[:2]  # 1001, 1003 (1008's log is forgotten)
    assert _answers(lake)[-1] == _answers(store)[-1]
    res = CliRunner().invoke(cli, ["forget", refs[0], "--db", lake])
    assert res.exit_code == 5


def test_ingest_compacts_small_parts_when_due(tmp_path, monkeypatch):
    monkeypatch.setenv("SYNESTRA_LAKE_COMPACT_RUN", "3")
    lake = f"{tmp_path}/lake/"
    files = sorted((SAMPLE / "syslog").iterdir())[:4]
    _ingest(lake, files[:2])
    assert sum(p.startswith("sources/") for p in _listed_parts(lake)) == 2  # a run of 2: not yet
    _ingest(lake, files[2:])
    assert sum(p.startswith("sources/") for p in _listed_parts(lake)) == 1
    assert len(_sources(lake)) == 4
    assert {r.status for r in _ingest(lake, files)} == {"skipped"}


@pytest.mark.slow
@pytest.mark.parametrize("point", ["before_commit", "after_commit"])
def test_kill_9_mid_compaction_leaves_the_same_answers(copies, point):
    """A real SIGKILL in a compacting process, at the hook between its parts and its commit, or as it
    removes the manifest files its checkpoint covers: the lake reads whole with the same answers; the
    next compaction finishes the work (and removes the killed one's unlisted parts)."""
    import subprocess
    import sys

    lake, store = copies
    before = _answers(lake)
    hook = {
        "before_commit": "lake_compact.before_commit = die",
        "after_commit": "lake_fs.LocalFS.remove = lambda self, rel: die()",
    }[point]
    script = (
        "import os, signal, sys\n"
        "from synestra_cli.store import lake_compact, lake_fs\n"
        "from synestra_cli.store.lake_upkeep import compact\n"
        "def die(*a):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
        f"{hook}\n"
        "compact(sys.argv[1])\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, lake], capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr
    assert _answers(lake) == before
    from synestra_cli.store.lake_upkeep import compact as compact_now

    compact_now(lake)
    assert _answers(lake) == before == _answers(store)
    assert sum(p.startswith("sources/") for p in _listed_parts(lake)) == 1
    listed = set(_listed_parts(lake)) | {
        str(r["path"]) for r in lake_manifest.read_manifest(lake_fs.open_fs(lake)).retired
    }
    on_disk = {p.relative_to(lake).as_posix() for p in Path(lake).glob("*/**/part-*.parquet")}
    assert on_disk == listed, "no part of the killed compaction is left unlisted"
