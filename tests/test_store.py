"""The store: migrations, session policy, the write lock."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from synestra_cli.errors import EmptyStoreError, StoreBusyError
from synestra_cli.store import open_store
from synestra_cli.store.connect import connect
from synestra_cli.store.migrations import MIGRATIONS, apply_migrations


def test_a_new_store_has_every_migration_recorded_in_order(db_path):
    with open_store(db_path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]
    assert names == [name for name, _ in MIGRATIONS]


def test_reopening_a_store_applies_nothing_twice(db_path):
    with open_store(db_path) as conn:
        assert apply_migrations(conn) == []


def test_a_store_at_the_previous_version_is_upgraded(db_path, monkeypatch):
    import synestra_cli.store.migrations as m

    monkeypatch.setattr(m, "MIGRATIONS", MIGRATIONS[:-1])
    with open_store(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS) - 1
    monkeypatch.setattr(m, "MIGRATIONS", MIGRATIONS)
    with open_store(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == len(MIGRATIONS)


def test_sessions_run_in_utc_and_convert_local_times(db_path):
    with open_store(db_path) as conn:
        assert conn.execute("SELECT current_setting('TimeZone')").fetchone()[0] == "UTC"
        got = conn.execute("SELECT to_utc(TIMESTAMP '2026-07-01 12:00:00', 'Europe/Paris')").fetchone()[0]
    assert str(got) == "2026-07-01 10:00:00"


def test_read_only_open_of_a_missing_store_says_to_ingest_first(tmp_path):
    with pytest.raises(EmptyStoreError, match="synestra ingest"):
        connect(tmp_path / "absent.duckdb", read_only=True)


def test_a_second_writer_waits_then_fails_with_a_reason(db_path, monkeypatch):
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "1")  # set after import: read when connecting
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb,sys,time; c=duckdb.connect(sys.argv[1]); print('ok', flush=True); time.sleep(30)",
            str(db_path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ok"
        with pytest.raises(StoreBusyError, match=r"locked by another synestra process \(waited 1 s\)"):
            connect(db_path)
    finally:
        holder.kill()
        holder.wait()


def test_no_progress_bar_can_reach_stdout(db_path):
    """DuckDB prints its progress bar on stdout for a query over 2 s: it corrupted `explain --format json`
    on a 256-host job of a busy machine. Every connection, writable or read-only, has it off."""
    with open_store(db_path) as conn:
        assert conn.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)
    with open_store(db_path, read_only=True) as conn:
        assert conn.execute("SELECT current_setting('enable_progress_bar')").fetchone() == (False,)


def test_a_migration_out_of_memory_names_itself_and_leaves_the_store_as_it_was(tmp_path, monkeypatch):
    """A migration's rewrite of a big store can exceed the memory limit: the error names the migration and
    the setting to raise, and the store still opens (without the failing migration) afterwards."""
    from synestra_cli.errors import StoreError
    from synestra_cli.store import migrations

    db = tmp_path / "s.duckdb"
    connect(db).close()

    def out_of_memory(conn):
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to pin block")

    monkeypatch.setattr(migrations, "MIGRATIONS", [*migrations.MIGRATIONS, ("999_big_rewrite", "SELECT 1")])
    monkeypatch.setattr(migrations, "AFTER_SQL", {**migrations.AFTER_SQL, "999_big_rewrite": out_of_memory})
    with pytest.raises(StoreError, match="migration 999_big_rewrite ran out of memory.*SYNESTRA_MEMORY_LIMIT"):
        connect(db)
    monkeypatch.undo()
    with connect(db, read_only=True) as conn:
        assert "999_big_rewrite" not in {r[0] for r in conn.execute("SELECT name FROM _migrations").fetchall()}
