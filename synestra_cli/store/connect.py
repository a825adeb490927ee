"""One connection factory: session policy (UTC, limits), the write lock, migrations on open."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from synestra_cli import settings
from synestra_cli.errors import EmptyStoreError, StoreBusyError, StoreError
from synestra_cli.store.migrations import apply_migrations

DEFAULT_DB = Path("synestra.duckdb")
ENV_DB = "SYNESTRA_DB"
MEMORY_LIMIT = "1GB"
# A DuckDB file: bytes 8..12 of its first block. Anything else (a SQLite file, a log) is refused before
# DuckDB sees it: DuckDB would otherwise try to download the extension that reads it.
DUCKDB_MAGIC = b"DUCK"
# An offline tool never downloads: no connection installs or autoloads an extension.
OFFLINE_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
# `synestra sql` runs what a runbook types: besides read-only, no file, network or setting beyond the
# store itself (ATTACH, COPY ... TO, EXPORT DATABASE, INSTALL, secrets, PRAGMA profiling_output), and
# the configuration locked so that no SET undoes it.
# (lock_configuration is set last, once the session's own settings are made).
LOCKED_CONFIG = {**OFFLINE_CONFIG, "enable_external_access": False}

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


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def lock_wait_s() -> float:
    """$SYNESTRA_LOCK_WAIT seconds, read (and validated) at each connection, not at import."""
    return settings.lock_wait_s()


def _connect_with_wait(path: Path, read_only: bool, config: dict) -> duckdb.DuckDBPyConnection:
    wait_s = lock_wait_s()
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise StoreError(f"cannot open store {path}: {_one_line(exc)}") from exc
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"store {path} is locked by another synestra process (waited {wait_s:g} s); "
                    "wait for it to finish or use another --db"
                ) from exc
            time.sleep(0.2)


def _nearest_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.exists():
            return p
    return Path(".")


def check_store_path(path: Path, read_only: bool) -> None:
    """Refuse, with the reason, what DuckDB would hang on (a FIFO) or answer with an opaque error."""
    if path.exists():
        if path.is_dir():
            raise StoreError(f"{path} is a folder: give --db a store file, e.g. {path / 'synestra.duckdb'}")
        if not path.is_file():
            raise StoreError(f"{path} is not a regular file (a FIFO, socket or device): give --db a store file")
        with path.open("rb") as f:
            head = f.read(16)
        if head and head[8:12] != DUCKDB_MAGIC:
            kind = "a SQLite database" if head.startswith(b"SQLite format") else "not a DuckDB file"
            raise StoreError(f"{path} is not a Synestra store ({kind}): give --db a store file or a new path")
        if not read_only and not os.access(path, os.W_OK):
            raise StoreError(f"store {path} is read-only: read commands (jobs, explain, sql) still work")
        return
    if read_only:
        raise EmptyStoreError(f"no store at {path}: run `synestra ingest PATH...` first (or pass --db)")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise StoreError(f"cannot create store {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create store {path}: folder {base} is not writable")


def connect(db: str | Path | None = None, *, read_only: bool = False,
            locked: bool = False) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the store. Read-only opens require an existing store.
    `locked` (read-only only): `synestra sql`'s sandbox, LOCKED_CONFIG."""
    path = resolve_db_path(db)
    # DuckDB takes 80% of RAM by default; bounded, it spills big sorts to disk instead, so that
    # ingesting a file of any size stays within a laptop's memory (docs/performance.md).
    config = {**(LOCKED_CONFIG if locked else OFFLINE_CONFIG), "threads": settings.threads(),
              "memory_limit": settings.memory_limit(MEMORY_LIMIT)}
    check_store_path(path, read_only or locked)
    if not read_only and not locked:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store {path}: {exc.strerror}") from exc
    conn = _connect_with_wait(path, read_only or locked, config)
    try:
        for sql in SESSION_SQL:
            conn.execute(sql)
        if locked:
            conn.execute("SET lock_configuration = true")
        if not read_only and not locked:
            _migrate(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _migrate(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    try:
        apply_migrations(conn)
    except duckdb.Error as exc:
        raise StoreError(f"store {path}: its schema does not match its migration record (_migrations): "
                         f"{_one_line(exc)}; ingest into a new --db") from exc


@contextmanager
def open_store(db: str | Path | None = None, *, read_only: bool = False,
               locked: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    conn = connect(db, read_only=read_only, locked=locked)
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
