"""Ingest into a lake: the same ingest, into a staging store, each loaded file then exported as parts.

The staging store is an in-memory DuckDB with the store's schema (the same migrations), holding what the
ingest's decisions read: the lake's sources (so that a file already in the lake is skipped, a grown one
loads only its new lines, a changed one replaces its old source), its jobs (cluster qualification) and
its metric catalog. Every file loads there exactly as into a store file; as each file's report comes
back (its transaction committed), its rows are written out as Parquet parts, then its manifest entry
(lake_manifest.py), then dropped from staging so that memory holds only the files in flight. The
manifest entries are the one serial step: parts are written by whichever worker loaded them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

import duckdb

from synestra_cli import settings
from synestra_cli.errors import StoreBusyError, StoreError
from synestra_cli.store.lake import (
    PARTITIONED,
    bucket_sql,
    day_sql,
    lake_target,
    open_reader,
)
from synestra_cli.store.lake_manifest import (
    STAGING_DIR,
    Entry,
    LakeFS,
    LocalFS,
    Part,
    entry_name,
    open_fs,
    part_source,
    read_entries,
    read_settings,
    staging_dir,
)
from synestra_cli.store.sources import sourced_tables
from synestra_cli.store.sql import fetch_one, quote_ident, registered, scalar

KEPT_IN_STAGING = ("sources", "jobs")  # what later files' ingest decisions read (skip, replace, cluster)
PRELOADED = ("sources", "jobs", "metric_catalog")
LOCK_FILE = "_lake.lock"


class Loaded(Protocol):
    """What a file's report says that the lake needs (ingest.FileReport)."""

    status: str
    source_id: int | None
    replaced: list[int]


ReportFn = Callable[[Any], None]


@contextmanager
def ingest_target(
    db: str | Path | None, on_report: ReportFn | None
) -> Iterator[tuple[duckdb.DuckDBPyConnection, ReportFn | None]]:
    """The connection `ingest_paths` writes to and the report callback to give it: the store file and
    `on_report` itself, or a lake's staging store and a callback that commits each loaded file to the
    lake before passing its report on."""
    from synestra_cli.store.connect import open_store

    target = lake_target(db)
    if target is None:
        with open_store(db) as conn:
            yield conn, on_report
        return
    writer = LakeWriter(target)
    try:

        def commit_then_report(report: Any) -> None:
            writer.commit(report)
            if on_report:
                on_report(report)

        yield writer.conn, commit_then_report
    finally:
        writer.close()


class LakeWriter:
    """The staging store of one ingest, and the lake it commits to. `task`: one worker of a distributed
    ingest (engine/), which stages its files' parts while the driver holds the lock and writes the
    entries."""

    def __init__(self, target: str, task: bool = False) -> None:
        self.fs: LakeFS = open_fs(target)
        self._lock = None if task else _take_lock(self.fs)
        try:
            self.buckets = read_settings(self.fs, create=not task)["buckets"]
            if not task:
                _clear_stale_staging(self.fs)
            self.conn = _staging_store()
            self._preload(target, task)
        except BaseException:
            self.close()
            raise

    def _preload(self, target: str, task: bool) -> None:
        every = read_entries(self.fs, live_only=False)
        reader = open_reader(target)
        try:
            for table in PRELOADED:
                rows = reader.sql(f"SELECT * FROM {quote_ident(table)}").to_arrow_table()
                with registered(self.conn, "_preload", rows):
                    self.conn.execute(f"INSERT INTO {quote_ident(table)} SELECT * FROM _preload")
        finally:
            reader.close()
        last = max((e.source_id for e in every), default=0)
        if not task:
            _remove_uncommitted(self.fs, last)
        if last:  # ids continue after every source the lake has seen, replaced ones included
            self.conn.execute("SELECT max(nextval('source_id_seq')) FROM range(?)", [last]).fetchall()
        self._catalog = {r[0] for r in self.conn.execute("SELECT metric FROM metric_catalog").fetchall()}

    def commit(self, report: Loaded) -> None:
        """Write a loaded file's parts, then its manifest entry; then drop its rows from staging."""
        entry = self.stage(report)
        if entry is not None:
            self.write_entry(entry)

    def stage(self, report: Loaded) -> Entry | None:
        """A loaded file's parts written into the lake (no reader lists them yet), its rows dropped from
        staging; the manifest entry that will commit them (None: nothing was loaded)."""
        if report.status != "loaded" or report.source_id is None:
            return None
        sid = report.source_id
        with staging_dir(self.fs) as tmp:
            parts = self._export(sid, tmp)
            for local, part in parts:
                self.fs.put_file(local, part.path)
        src = fetch_one(self.conn, "SELECT sha256, source_key, path, format FROM sources WHERE source_id = ?", [sid])
        if src is None:
            raise StoreError(f"lake {self.fs.root}: source {sid} was reported loaded but is not staged")
        for table in sourced_tables(self.conn):
            if table.name not in KEPT_IN_STAGING:
                self.conn.execute(f"DELETE FROM {quote_ident(table.name)} WHERE source_id = ?", [sid])
        return Entry(sid, src[0], src[1] or "", src[2], src[3], [p for _, p in parts], list(report.replaced))

    def write_entry(self, entry: Entry) -> None:
        """The commit point of one source (in source order: _remove_uncommitted relies on it)."""
        self.fs.write_text(entry_name(entry.source_id), entry.to_json())
        self._remove_replaced(entry.replaces)

    def reserve_ids(self, n: int) -> list[int]:
        """n source ids, in order, for a distributed ingest's files."""
        return sorted(r[0] for r in self.conn.execute("SELECT nextval('source_id_seq') FROM range(?)", [n]).fetchall())

    def _remove_replaced(self, ids: list[int]) -> None:
        """The parts of the sources this file replaced, then their entries: a plain Parquet reader of the
        folder sees only what Synestra sees (a crash in between leaves entries that `replaces` hides)."""
        if not ids:
            return
        for entry in read_entries(self.fs, live_only=False):
            if entry.source_id in ids:
                for part in entry.parts:
                    self.fs.remove(part.path)
                self.fs.remove(entry_name(entry.source_id))

    def _export(self, sid: int, tmp: Path) -> list[tuple[Path, Part]]:
        out: list[tuple[Path, Part]] = []
        for table in sourced_tables(self.conn):
            name = table.name
            if name in PARTITIONED:
                out += self._export_partitioned(name, sid, tmp)
            else:
                out += self._export_one(name, f"SELECT * FROM {quote_ident(name)} WHERE source_id = {sid}", sid, tmp)
        new = sorted(
            r[0] for r in self.conn.execute("SELECT metric FROM metric_catalog").fetchall() if r[0] not in self._catalog
        )
        if new:
            query = "SELECT * FROM metric_catalog WHERE list_contains(?, metric) ORDER BY metric"
            out += self._export_one("metric_catalog", query, sid, tmp, [new])
            self._catalog.update(new)
        # the source's own row last: to a reader of the folder alone, rows are live when their source is
        return sorted(out, key=lambda part: part[1].table == "sources")

    def _export_one(
        self, table: str, query: str, sid: int, tmp: Path, params: list[Any] | None = None
    ) -> list[tuple[Path, Part]]:
        local = tmp / f"{table}-{sid}.parquet"
        self.conn.execute(f"COPY ({query}) TO '{local}' (FORMAT parquet, COMPRESSION zstd)", params)
        rows = _rows_in(self.conn, [local])[0]
        if not rows:
            return []
        return [(local, Part(table, f"{table}/part-{sid:08d}.parquet", rows, local.stat().st_size))]

    def _export_partitioned(self, table: str, sid: int, tmp: Path) -> list[tuple[Path, Part]]:
        ts = PARTITIONED[table]
        if not scalar(self.conn, f"SELECT count(*) FROM {quote_ident(table)} WHERE source_id = ?", [sid]):
            return []
        folder = tmp / table
        self.conn.execute(
            f"COPY (SELECT *, {day_sql(ts)} AS day, {bucket_sql('host', self.buckets)} AS bucket "
            f"FROM {quote_ident(table)} WHERE source_id = {sid}) TO '{folder}' "
            f"(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (day, bucket), FILENAME_PATTERN 'part-{sid:08d}-{{i}}')"
        )
        files = sorted(folder.rglob("*.parquet"), key=lambda f: (_partition(f, "day"), int(_partition(f, "bucket"))))
        rows = _rows_in(self.conn, files)
        out = []
        for local, count in zip(files, rows, strict=True):
            day, bucket = _partition(local, "day"), int(_partition(local, "bucket"))
            rel = f"{table}/day={day}/bucket={bucket}/{local.name}"
            out.append((local, Part(table, rel, count, local.stat().st_size, day, bucket)))
        return out

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None


def _partition(path: Path, key: str) -> str:
    return next(p.split("=", 1)[1] for p in path.parts if p.startswith(f"{key}="))


def _rows_in(conn: duckdb.DuckDBPyConnection, files: list[Path]) -> list[int]:
    """Rows in each Parquet file, from its footer."""
    if not files:
        return []
    names = [str(f) for f in files]
    got = dict(
        conn.execute(
            "SELECT file_name, sum(num_rows) FROM parquet_file_metadata(?) GROUP BY file_name", [names]
        ).fetchall()
    )
    return [int(got.get(n, 0)) for n in names]


def _staging_store() -> duckdb.DuckDBPyConnection:
    from synestra_cli.store.connect import MEMORY_LIMIT, OFFLINE_CONFIG, SESSION_SQL
    from synestra_cli.store.migrations import apply_migrations

    conn = duckdb.connect(
        ":memory:",
        config={**OFFLINE_CONFIG, "threads": settings.threads(), "memory_limit": settings.memory_limit(MEMORY_LIMIT)},
    )
    for sql in SESSION_SQL:
        conn.execute(sql)
    apply_migrations(conn)
    return conn


def _take_lock(fs: LakeFS) -> Any:
    """One writer at a time on a local lake (readers never wait). An object-store lake has no lock:
    docs/lake.md says to give each prefix one writer."""
    if not isinstance(fs, LocalFS):
        return None
    root = Path(fs.root)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock = open(root / LOCK_FILE, "a+")  # noqa: SIM115 - held until close()
    except OSError as exc:
        raise StoreError(f"cannot create lake {root}: {exc.strerror}") from exc
    deadline = time.monotonic() + settings.lock_wait_s()
    while True:
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock.close()
                raise StoreBusyError(
                    f"lake {root} is being written by another synestra ingest; wait for it or use another --db"
                ) from None
            time.sleep(0.2)


def _remove_uncommitted(fs: LakeFS, last: int) -> None:
    """Parts of sources past the last manifest entry: a killed ingest's file in flight. Entries are written
    in source order, so no live part has a later id; we hold the writer's lock."""
    for rel in fs.parts():
        sid = part_source(rel)
        if sid is not None and sid > last:
            fs.remove(rel)


def _clear_stale_staging(fs: LakeFS) -> None:
    """Parts a killed ingest left half-staged: nobody lists them, and we hold the writer's lock."""
    if isinstance(fs, LocalFS):
        shutil.rmtree(os.path.join(fs.root, STAGING_DIR), ignore_errors=True)
