"""One connection factory: session policy (UTC, limits), the write lock, migrations on open."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

from synestra_cli import __version__, settings
from synestra_cli.errors import (
    EmptyStoreError,
    OutOfMemoryError,
    StoreBusyError,
    StoreError,
    is_out_of_memory,
    out_of_memory_message,
)
from synestra_cli.store.migrations import MIGRATIONS, MigrationFailed, apply_migrations
from synestra_cli.store.session import (
    LOCKED_CONFIG,
    OFFLINE_CONFIG,
    SESSION_SQL,
    DuckConfig,
    session_limits,
)
from synestra_cli.store.spill import spill_folder, sweep
from synestra_cli.store.sql import fetch_one, has_table

DEFAULT_DB = Path("synestra.duckdb")
ENV_DB = "SYNESTRA_DB"
T = TypeVar("T")
# A DuckDB file: bytes 8..12 of its first block. Anything else (a SQLite file, a log) is refused before
# DuckDB sees it: DuckDB would otherwise try to download the extension that reads it.
DUCKDB_MAGIC = b"DUCK"


def resolve_db_path(db: str | Path | None) -> Path:
    """--db beats $SYNESTRA_DB beats ./synestra.duckdb."""
    if db:
        return Path(db)
    env = os.environ.get(ENV_DB)
    return Path(env) if env else DEFAULT_DB


# What the OS says when a write cannot land (ENOSPC, EFBIG, EROFS, EDQUOT, EIO), as DuckDB relays it.
WRITE_FAILURES = (
    "No space left on device",
    "File too large",
    "Read-only file system",
    "Disk quota exceeded",
    "Input/output error",
    "Could not write file",
    "could not truncate",
    "Could not fsync",
)
# What DuckDB says when the file is not what its header promised (truncated, overwritten, bit rot).
CORRUPTION = (
    "Could not read enough bytes",
    "checksum",
    "Corrupt",
    "corrupt",
    "not a valid DuckDB database",
    "database has been invalidated",
    "Failed to load metadata",
    "Invalid block",
    "No magic bytes found at end of file",  # a lake's Parquet part that is not Parquet (junk, truncated)
)
HEADER_BYTES = 3 * 4096  # DuckDB's file header and two database headers, before the first block
MIGRATIONS_SQL = "SELECT name FROM _migrations ORDER BY name"


def is_store_write_failure(exc: BaseException) -> bool:
    """A write the store refused (disk full, quota, read-only, I/O error), or a database DuckDB has
    invalidated after one: no later file can load either."""
    return isinstance(exc, duckdb.FatalException) or (
        isinstance(exc, duckdb.Error) and any(text in str(exc) for text in WRITE_FAILURES)
    )


def as_store_error(exc: BaseException, path: Path | str | None = None) -> StoreError | None:
    """The StoreError a driver error means, when it is about the store file itself (else None)."""
    if not isinstance(exc, duckdb.Error):
        return None
    where = f"store {path}" if path else "the store"
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if any(text in str(exc) for text in CORRUPTION) and not isinstance(exc, duckdb.FatalException):
        return StoreError(
            f"{where} is damaged (truncated or corrupt: {first}); restore it from a copy, or "
            "ingest again into a new --db (`synestra check` names what is damaged)"
        )
    if is_store_write_failure(exc):
        return StoreError(f"{where} cannot be written ({first}): free space, or use another --db")
    if "Permission denied" in str(exc):  # its file, its WAL or its folder (chmod, another user's store)
        return StoreError(f"{where} cannot be read or written ({first}): check its and its folder's permissions")
    return None


def is_lock_error(exc: BaseException) -> bool:
    # The one place that reads a driver message: DuckDB reports a held file lock as an IOException.
    if not isinstance(exc, duckdb.Error):
        return False
    text = str(exc)
    return "lock" in text.lower() and ("Conflicting" in text or "Could not set lock" in text)


def _one_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def lock_wait_s() -> float:
    """$SYNESTRA_LOCK_WAIT seconds, read (and validated) at each connection, not at import."""
    return settings.lock_wait_s()


# Waiting for the lock: short sleeps first (an ingest holds it for a commit of well under a second,
# then releases it while it parses the next files), growing to at most LOCK_POLL_MAX_S.
LOCK_POLL_FIRST_S = 0.005
LOCK_POLL_MAX_S = 0.05


def wait_for_lock(open_fn: Callable[[], T], path: Path, wait_s: float) -> T:
    """open_fn() until it stops failing on the store's file lock, for at most wait_s seconds (then
    StoreBusyError); any other error is raised as it is."""
    deadline = time.monotonic() + wait_s
    pause = LOCK_POLL_FIRST_S
    while True:
        try:
            return open_fn()
        except duckdb.Error as exc:
            left = deadline - time.monotonic()
            if not is_lock_error(exc):
                raise
            if left <= 0:
                raise StoreBusyError(
                    f"store {path} is locked by another synestra process (waited {wait_s:g} s); "
                    "wait for it to finish or use another --db"
                ) from exc
            time.sleep(min(pause, left))
            pause = min(pause * 2, LOCK_POLL_MAX_S)


def _connect_with_wait(
    path: Path, read_only: bool, config: DuckConfig, wait_s: float | None = None
) -> duckdb.DuckDBPyConnection:
    wait = lock_wait_s() if wait_s is None else wait_s
    try:
        return wait_for_lock(lambda: duckdb.connect(str(path), read_only=read_only, config=config), path, wait)
    except duckdb.Error as exc:
        if is_out_of_memory(exc):  # opening needs a few blocks: a limit below that is the limit's fault
            raise OutOfMemoryError(f"cannot open store {path}: {out_of_memory_message(exc)}") from exc
        raise StoreError(
            f"cannot open store {path}: {_one_line(exc)} (not a Synestra store? pass another --db)"
        ) from exc


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
        if path.stat().st_size == 0:  # a first ingest killed as DuckDB created the file: it holds nothing
            if read_only:
                raise EmptyStoreError(f"store {path} is empty (0 bytes): run `synestra ingest PATH...` to fill it")
            path.unlink()  # nothing to lose: a writer makes the store anew
            return check_store_path(path, read_only)
        with path.open("rb") as f:
            head = f.read(16)
        if head and head[8:12] != DUCKDB_MAGIC:
            kind = "a SQLite database" if head.startswith(b"SQLite format") else "not a DuckDB file"
            raise StoreError(f"{path} is not a Synestra store ({kind}): give --db a store file or a new path")
        if not read_only and not os.access(path, os.W_OK):
            raise StoreError(f"store {path} is read-only: read commands (jobs, explain, sql) still work")
        folder = path.parent
        if not read_only and not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(
                f"store {path} is in a read-only folder ({folder}): DuckDB writes its write-ahead log "
                f"({path.name}.wal) beside the store; read commands (jobs, explain, sql) still work"
            )
        return
    if read_only:
        raise EmptyStoreError(f"no store at {path}: run `synestra ingest PATH...` first (or pass --db)")
    base = _nearest_existing(path.parent)
    if not base.is_dir():
        raise StoreError(f"cannot create store {path}: {base} is a file, not a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create store {path}: folder {base} is not writable")


def may_be_lake(db: str | Path | None) -> bool:
    """False when `db` (else $SYNESTRA_DB) surely names a store file, without importing store/lake.py
    (~20 ms of start-up): lake.lake_target decides the rest (a URL, a folder, a path ending in `/`)."""
    raw = str(db) if db else os.environ.get("SYNESTRA_DB", "")
    return bool(raw) and ("://" in raw or raw.endswith(("/", os.sep)) or Path(raw).is_dir())


def connect(
    db: str | Path | None = None,
    *,
    read_only: bool = False,
    locked: bool = False,
    wait_s: float | None = None,
    applied: list[str] | None = None,
    long_migrations: bool = True,
) -> duckdb.DuckDBPyConnection:
    """Open (creating and migrating if needed) the store. Read-only opens require an existing store.
    `locked` (read-only only): `synestra sql`'s sandbox, LOCKED_CONFIG. `wait_s`: how long to wait for
    the store's lock (default SYNESTRA_LOCK_WAIT). A folder or URL is a lake (store/lake.py): read through
    views; only ingest writes one (store/lake_writer.py). `applied`: the names of the migrations applied
    are appended to it. `long_migrations` False: a migration that rewrites the samples (023) waits for the
    next ingest or `compact`: a report keeping its explanations writes a few rows, and the store is read
    in either layout."""
    if may_be_lake(db):
        from synestra_cli.store import lake

        if target := lake.lake_target(db):
            if not (read_only or locked):
                raise lake.refuse_write(target)
            return lake.open_reader(target, locked=locked)
    path = resolve_db_path(db)
    config: DuckConfig = {**(LOCKED_CONFIG if locked else OFFLINE_CONFIG), **session_limits()}
    check_store_path(path, read_only or locked)
    if not read_only and not locked:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create store {path}: {exc.strerror}") from exc
        sweep(spill_folder(path))  # what a killed ingest or reader left in STORE.tmp (store/spill.py)
    conn = _connect_with_wait(path, read_only or locked, config, wait_s)
    try:
        _check_store(conn, path)
        if (read_only or locked) and _unfinished(conn):
            # a first ingest killed before it created the tables, or between two of its migrations (its
            # first second): no source is in, and the next writer finishes the schema
            raise EmptyStoreError(
                f"store {path} holds no data and its tables are not all made (its first ingest stopped "
                "early): run `synestra ingest PATH...` to fill it"
            )
        for sql in SESSION_SQL:
            conn.execute(sql)
        if locked:
            conn.execute("SET lock_configuration = true")
        if not read_only and not locked:
            names = _migrate(conn, path, long_migrations)
            if applied is not None:
                applied += names
    except duckdb.Error as exc:
        conn.close()
        if is_out_of_memory(exc):
            raise OutOfMemoryError(f"cannot open store {path}: {out_of_memory_message(exc)}") from exc
        raise as_store_error(exc, path) or StoreError(f"cannot open store {path}: {_one_line(exc)}") from exc
    except BaseException:
        conn.close()
        raise
    return conn


def _check_store(conn: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Refuse a store that is shorter than its own header says (truncated: it would fail mid-query) or
    written by a newer Synestra (migrations this version does not know: appending would corrupt it)."""
    (_, _, block_size, _, used_blocks, *_) = fetch_one(conn, "PRAGMA database_size") or (0,) * 5
    # Used blocks, not total: DuckDB counts free blocks at the end that it has truncated off the file
    # (a healthy 1.5 GB store after ingest, or any store after a DELETE, is a block short of total).
    expected = HEADER_BYTES + int(block_size or 0) * int(used_blocks or 0)
    if path.is_file() and used_blocks and path.stat().st_size < expected:
        raise StoreError(
            f"store {path} is truncated ({path.stat().st_size:,} bytes of {expected:,}): restore it "
            "from a copy, or ingest again into a new --db"
        )
    if not has_table(conn, "_migrations"):
        return
    known = {name for name, _ in MIGRATIONS}
    newer = [name for (name,) in conn.execute(MIGRATIONS_SQL).fetchall() if name not in known]
    if newer:
        raise StoreError(
            f"store {path} was written by a newer Synestra (schema {newer[-1]}, unknown to "
            f"synestra {__version__}): upgrade synestra, or use another --db"
        )


def _unfinished(conn: duckdb.DuckDBPyConnection) -> bool:
    """A store with no source and not every migration: what a first ingest killed in its first second
    leaves. (A store with data and an older schema is an older synestra's: readers read it as it is.)"""
    if not has_table(conn, "_migrations"):
        return True
    applied = {name for (name,) in conn.execute(MIGRATIONS_SQL).fetchall()}
    if {name for name, _ in MIGRATIONS} <= applied:
        return False
    return not has_table(conn, "sources") or not fetch_one(conn, "SELECT 1 FROM sources LIMIT 1")


def migrate(db: str | Path | None = None, wait_s: float | None = None) -> list[str]:
    """Open the store file for writing, which applies the migrations it lacks, and close it: the names of
    those applied (`synestra compact`, and `ingest` before its files: a long migration's progress shows on
    a terminal, cli/progress.py)."""
    applied: list[str] = []
    connect(db, wait_s=wait_s, applied=applied).close()
    return applied


def _migrate(conn: duckdb.DuckDBPyConnection, path: Path, long: bool = True) -> list[str]:
    try:
        return apply_migrations(conn, long=long)
    except MigrationFailed as exc:
        if isinstance(exc.cause, duckdb.OutOfMemoryException):  # a big store's rewrite: more memory helps
            raise StoreError(
                f"store {path}: migration {exc.name} ran out of memory ({_one_line(exc.cause)}); the store "
                "is as it was: open it again with a larger SYNESTRA_MEMORY_LIMIT (for example 4GB)"
            ) from exc
        raise StoreError(
            f"store {path}: its schema does not match its migration record (_migrations): migration "
            f"{exc.name}: {_one_line(exc.cause)}; ingest into a new --db"
        ) from exc


def memory_store(upto: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory store with the full schema (tests, simulator checks); `upto`: the schema of that
    migration (a store an older Synestra wrote)."""
    conn = duckdb.connect(":memory:")
    for sql in SESSION_SQL:
        conn.execute(sql)
    apply_migrations(conn, upto)
    return conn
