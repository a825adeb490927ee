"""Where ingest parses, and when it holds the store.

Files are parsed into a *stage*: an in-memory DuckDB database with the store's schema, attached beside
it (DuckDB spills it to the store's `.tmp` folder beyond the memory limit). Formats write to the
unqualified table names, which `USE stage` points at the stage. A batch of staged files is then
copied into the store in one short transaction, and the stage is dropped.

Given a store path, ingest attaches the store only for those commits and detaches it between them:
DuckDB's file lock is held only while a batch is copied, and a reader (`jobs`, `explain`,
`tax-report`) waiting SYNESTRA_LOCK_WAIT gets in between two commits. Given an open connection (tests,
an in-memory store, a caller that holds the store anyway), the store stays attached.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import duckdb

from synestra_cli import settings
from synestra_cli.errors import StoreBusyError
from synestra_cli.store.connect import connect, resolve_db_path, wait_for_lock
from synestra_cli.store.session import OFFLINE_CONFIG, SESSION_SQL, session_limits
from synestra_cli.store.sources import SourcedTable, sourced_tables
from synestra_cli.store.spill import spill_folder, sweep
from synestra_cli.store.sql import fetch_one, quote_ident, quote_literal

STORE_ALIAS = "_store"
STAGE_TABLES_SQL = """
SELECT sql FROM duckdb_tables()
WHERE database_name = current_database() AND schema_name = 'main' AND NOT temporary
  AND table_name NOT IN ('explanations', '_migrations')
ORDER BY table_name
"""
STORE_PATH_SQL = "SELECT path FROM duckdb_databases() WHERE database_name = $name"
# A commit waits this long at least for readers to let go of the store (a cold `tax-report` reads
# for tens of seconds): a reader's wait is SYNESTRA_LOCK_WAIT, a staged batch's is longer.
COMMIT_WAIT_MIN_S = 300.0
# What of the store a parser may read while the store is detached (Stores.refresh_evidence).
EVIDENCE_TABLES = (
    ("sources", "source_id, path, first_ts, last_ts, hosts"),  # dated evidence for a yearless log
    ("source_years", "source_id, basis"),
    ("gpus", "source_id, host, uuid"),  # a hostless scrape's host, by its GPUs' UUIDs
    ("metric_catalog", "metric, kind"),  # a batch's summaries, computed in its stage (store/summaries.py)
)


class Stores:
    """The connection ingest runs on, the store's catalog name on it, and the stages it creates."""

    def __init__(self, conn: duckdb.DuckDBPyConnection, store: str, path: Path | None, owned: bool, ddl: str) -> None:
        self.conn = conn
        self.ddl = ddl  # CREATE TABLE of the stage's tables: the store's own (stage_ddl)
        self.store = store  # catalog name of the store on conn (while attached)
        self.path = path  # the store's file; None: in memory
        self.owned = owned  # path mode: ingest opened conn, attaches the store only to commit
        self.home = fetch_one(conn, "SELECT current_database()")[0]  # type: ignore[index]
        self.attached = not owned
        self._stage_ids = itertools.count(1)
        self.tables: list[SourcedTable] | None = None  # a stage's tables with a source_id (all alike)

    @classmethod
    def open(cls, store: duckdb.DuckDBPyConnection | str | Path | None, wait_s: float | None = None) -> Stores:
        """A connection given: the store is that connection's database. A path (or None: $SYNESTRA_DB,
        ./synestra.duckdb): the store is opened once to create and migrate it (waiting for a reader at
        most `wait_s`, default commit_wait_s()), then only attached."""
        if isinstance(store, duckdb.DuckDBPyConnection):
            name = fetch_one(store, "SELECT current_database()")[0]  # type: ignore[index]
            row = fetch_one(store, STORE_PATH_SQL, {"name": name})
            path = Path(row[0]).resolve() if row and row[0] else None
            return cls(store, name, path, owned=False, ddl=stage_ddl(store))
        path = resolve_db_path(store)
        # checks, creates, migrates (waits for readers)
        opened = connect(path, wait_s=commit_wait_s() if wait_s is None else wait_s)
        try:
            ddl = stage_ddl(opened)
        finally:
            opened.close()
        path = path.resolve()
        spill = spill_folder(path)
        sweep(spill)  # what a killed ingest or reader left there (store/spill.py)
        config = {**OFFLINE_CONFIG, **session_limits(), "temp_directory": str(spill)}
        conn = duckdb.connect(":memory:", config=config)
        for sql in SESSION_SQL:
            conn.execute(sql)
        return cls(conn, STORE_ALIAS, path, owned=True, ddl=ddl)

    def skip(self) -> frozenset[Path]:
        """The store's own files, never read as input."""
        db = self.path
        return frozenset({db, Path(f"{db}.wal"), Path(f"{db}.tmp")}) if db else frozenset()

    # --- the store, attached for a commit --------------------------------------------------------------

    def attach(self, wait: bool, wait_s: float | None = None) -> bool:
        """Attach the store for a commit; False when a reader (or another writer) holds it and `wait` is
        false. Waiting, at most `wait_s` (default max(SYNESTRA_LOCK_WAIT, COMMIT_WAIT_MIN_S)), then
        StoreBusyError."""
        if self.attached:
            return True
        sql = f"ATTACH {quote_literal(str(self.path))} AS {STORE_ALIAS}"
        wait_s = (commit_wait_s() if wait_s is None else wait_s) if wait else 0.0
        try:
            wait_for_lock(lambda: self.conn.execute(sql), self.path or Path(), wait_s)
        except StoreBusyError:
            if wait:
                raise
            return False
        self.attached = True
        return True

    def detach(self) -> None:
        """Release the store (DuckDB checkpoints it on the way out)."""
        if self.owned and self.attached:
            self.attached = False
            self.conn.execute(f"DETACH {STORE_ALIAS}")

    # --- what a file parsed in a stage may read of the store ----------------------------------------------

    @property
    def evidence(self) -> str:
        """Where a staged file's parser sees the store's sources (formats/years.py: dated evidence for a
        yearless log): a snapshot beside the stages, the store itself when it stays attached."""
        return f"{quote_ident(self.home)}.evidence." if self.owned else f"{quote_ident(self.store)}.main."

    def refresh_evidence(self) -> None:
        """Snapshot what parsers read of the store (EVIDENCE_TABLES) while it is attached: the stages are
        parsed while it is not."""
        if not self.owned:
            return
        home, store = quote_ident(self.home), quote_ident(self.store)
        self.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {home}.evidence")
        for table, columns in EVIDENCE_TABLES:
            self.conn.execute(
                f"CREATE OR REPLACE TABLE {home}.evidence.{table} AS SELECT {columns} FROM {store}.main.{table}"
            )

    # --- stages ------------------------------------------------------------------------------------------

    def new_stage(self) -> str:
        """A fresh in-memory stage with the store's tables (not its views: formats write tables)."""
        name = f"_stage{next(self._stage_ids)}"
        self.conn.execute(f"ATTACH ':memory:' AS {name}")
        self.conn.execute(f"USE {quote_ident(name)}")
        try:
            self.conn.execute(self.ddl)
        finally:
            self.conn.execute(f"USE {quote_ident(self.home)}")
        if self.tables is None:
            self.tables = sourced_tables(self.conn, name)
        return name

    def drop_stage(self, name: str) -> None:
        self.conn.execute(f"DETACH DATABASE IF EXISTS {name}")

    def close(self) -> None:
        if self.owned:
            self.detach()
            self.conn.close()


def commit_wait_s() -> float:
    return max(settings.lock_wait_s(), COMMIT_WAIT_MIN_S)


def stage_ddl(store: duckdb.DuckDBPyConnection) -> str:
    """CREATE TABLE of every table of the store (migrated: the one schema there is), with its constraints
    (metric_catalog's key: formats insert into it ON CONFLICT DO NOTHING), but the explanations cache
    and _migrations. Read from the store itself: building a template store would run every migration
    again (~0.3 s per ingest)."""
    rows = store.execute(STAGE_TABLES_SQL).fetchall()
    return ";\n".join(sql.rstrip(";") for (sql,) in rows)
