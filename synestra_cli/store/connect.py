"""One connection factory: session policy (UTC, limits), the write lock, migrations on open."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from synestra_cli.errors import EmptyStoreError, StoreBusyError, StoreError
from synestra_cli.store.migrations import apply_migrations

DEFAULT_DB = Path("synestra.duckdb")
ENV_DB = "SYNESTRA_DB"
MEMORY_LIMIT = "1GB"
ENV_LOCK_WAIT = "SYNESTRA_LOCK_WAIT"
LOCK_WAIT_S = 5.0  # how long a second writer waits for the first to finish before giving up, by default

# Session macros every query may use. to_utc: a naive local timestamp in zone tz -> naive UTC.
SESSION_SQL = [
    "SET TimeZone = 'UTC'",
    "CREATE OR REPLACE TEMP MACRO to_utc(ts, tz) AS timezone('UTC', timezone(tz, ts))",
]


def resolve_db_path(db: str | Path | None) -> Path:
    """--db beats $SYNESTRA_DB beats ./synestra.duckdb."""
    if db:
        return Path(db)
    env = os.environ.get(ENV_DB)
    return Path(env) if env else DEFAULT_DB


def _is_lock_error(exc: duckdb.Error) -> bool:
    # The one place that reads a driver message: DuckDB reports a held file lock as an IOException.
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


def lock_wait_s() -> float:
    """$SYNESTRA_LOCK_WAIT seconds, read at each connection (not at import: a caller may set it later)."""
    return float(os.environ.get(ENV_LOCK_WAIT, LOCK_WAIT_S))


def _connect_with_wait(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    wait_s = lock_wait_s()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise StoreError(f"cannot open store {path}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"store {path} is locked by another synestra process (waited {wait_s:g} s); "
                    "wait for it to finish or use another --db"
                ) from exc
            time.sleep(0.2)


def connect(db: str | Path | None = None, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the store. Read-only opens require an existing store."""
    path = resolve_db_path(db)
    if read_only and not path.exists():
        raise EmptyStoreError(f"no store at {path}: run `synestra ingest PATH...` first (or pass --db)")
    if not read_only:
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = _connect_with_wait(path, read_only)
    try:
        for sql in SESSION_SQL:
            conn.execute(sql)
        conn.execute("SET threads = ?", [int(os.environ.get("SYNESTRA_THREADS", os.cpu_count() or 2))])
        # DuckDB takes 80% of RAM by default; bounded, it spills big sorts to disk instead, so that
        # ingesting a file of any size stays within a laptop's memory (docs/performance.md).
        conn.execute("SET memory_limit = ?", [os.environ.get("SYNESTRA_MEMORY_LIMIT", MEMORY_LIMIT)])
        if not read_only:
            apply_migrations(conn)
    except BaseException:
        conn.close()
        raise
    return conn


@contextmanager
def open_store(db: str | Path | None = None, *, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    conn = connect(db, read_only=read_only)
    try:
        yield conn
    finally:
        conn.close()


def memory_store() -> duckdb.DuckDBPyConnection:
    """An in-memory store with the full schema (tests, simulator checks)."""
    conn = duckdb.connect(":memory:")
    for sql in SESSION_SQL:
        conn.execute(sql)
    apply_migrations(conn)
    return conn
