"""Ingest into a lake: the same ingest, into a staging store, each loaded file then exported as parts.

The staging store is a DuckDB file of the writer's own (in the lake's `_staging/`, or the system's temp
folder for an object store; removed as the writer closes) with the store's schema (the same
migrations), holding what the ingest's decisions read: the lake's sources (so that a file already in
the lake is skipped, a grown one loads only its new lines, a changed one replaces its old source), its
jobs (cluster qualification) and its metric catalog. Every file loads there exactly as into a store
file; as each file's report comes back (its transaction committed), its rows are written out as
Parquet parts, then its manifest entry (lake_manifest.py), then dropped from staging so that it holds
only the files in flight. The manifest entries are the one serial step: parts are written by whichever
worker loaded them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

import duckdb

from synestra_cli import settings
from synestra_cli.errors import StoreError
from synestra_cli.store import lake_lock
from synestra_cli.store.lake import (
    KEYED,
    PARTITIONED,
    bucket_sql,
    day_sql,
    lake_target,
    open_reader,
)
from synestra_cli.store.lake_compact import Compaction, auto_run, compact_parts, is_due, retain_s, rewrite_without
from synestra_cli.store.lake_fs import STAGING_DIR, LakeFS, LocalFS, open_fs, staging_dir
from synestra_cli.store.lake_manifest import (
    Entry,
    Manifest,
    Part,
    entry_name,
    file_sha256,
    mark_layout,
    part_source,
    read_manifest,
    read_settings,
    write_checkpoint,
)
from synestra_cli.store.sources import sourced_tables
from synestra_cli.store.sql import fetch_one, quote_ident, quote_literal, registered

KEPT_IN_STAGING = ("sources", "jobs")  # what later files' ingest decisions read (skip, replace, cluster)
# (and the series dictionary: a file's samples are numbered with the lake's ids, store/series.py)
PRELOADED = ("sources", "jobs", "metric_catalog", "series")
# The order of a part's rows: metrics by series and time (store/series.py), so that a part's row groups hold
# few series each and a reader's series ids skip the others by their min and max (a partitioned COPY does
# not keep the order of the rows it reads).
PART_ORDER = {"metrics": " ORDER BY series_id, ts"}
# Series ids a worker of a distributed ingest numbers new series from: worker k after the lake's last id
# plus k blocks, so that two workers never give one id to two series (one series may get two ids, one
# per worker that met it first: readers join a series' names to all of its ids). A placeholder row of
# the block's first id (metric '') keeps the numbering there; it is never exported.
SERIES_BLOCK = 1 << 20
# Loose manifest entries past which a writer compacts the manifest into one checkpoint as it closes: a
# reader then reads one object and at most this many more (docs/lake.md gives the open times).
COMPACT_AFTER = 64


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
    """The connection `ingest_paths` writes to and the report callback to give it: a lake's staging store
    and a callback that commits each loaded file to the lake before passing its report on (a store file's
    target is its path: store/door.py)."""
    target = lake_target(db)
    if target is None:
        raise ValueError(f"not a lake: {db}")
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

    def __init__(self, target: str, task: bool = False, worker: int = 0) -> None:
        self.fs: LakeFS = open_fs(target)
        self._lock = None if task else lake_lock.take(self.fs)
        self._committed = 0
        self._home = ExitStack()  # the staging store's own folder, removed as the writer closes
        try:
            self.buckets = read_settings(self.fs, create=not task)["buckets"]
            if not task:
                mark_layout(self.fs)  # its parts carry checksums (layout 3)
                clear_stale_staging(self.fs)
            self.conn = _staging_store(self._home.enter_context(staging_dir(self.fs)))
            self._preload(target, task, worker)
        except BaseException:
            self.close()
            raise

    def _preload(self, target: str, task: bool, worker: int) -> None:
        manifest = read_manifest(self.fs)
        reader = open_reader(target)
        try:
            for table in PRELOADED:
                rows = reader.sql(f"SELECT * FROM {quote_ident(table)}").to_arrow_table()
                with registered(self.conn, "_preload", rows):
                    self.conn.execute(f"INSERT INTO {quote_ident(table)} SELECT * FROM _preload")
        finally:
            reader.close()
        last = manifest.last_id
        if not task:
            remove_uncommitted(self.fs, last)
        if last:  # ids continue after every source the lake has seen, replaced ones included
            self.conn.execute("SELECT max(nextval('source_id_seq')) FROM range(?)", [last]).fetchall()
        self._catalog = {r[0] for r in self.conn.execute("SELECT metric FROM metric_catalog").fetchall()}
        self._series = int(self.conn.execute("SELECT coalesce(max(series_id), 0) FROM series").fetchone()[0])  # type: ignore[index]
        if task:  # this worker's own block of ids for new series
            self._series += 1 + worker * SERIES_BLOCK
            self.conn.execute("INSERT INTO series VALUES (?, NULL, NULL, '')", [self._series])
        self._tables = [t.name for t in sourced_tables(self.conn)]  # `sources` last: read for the entry
        self._count_sql = " UNION ALL ".join(  # _rows_of: every staged table's rows of one source
            f"SELECT {quote_literal(t)}, count(*) FROM {quote_ident(t)} WHERE source_id = $sid" for t in self._tables
        )

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
        counts = self._rows_of(sid)
        with staging_dir(self.fs) as tmp:
            parts = self._export(sid, counts, tmp)
            for local, part in parts:
                self.fs.put_file(local, part.path)
        src = fetch_one(self.conn, "SELECT sha256, source_key, path, format FROM sources WHERE source_id = ?", [sid])
        if src is None:
            raise StoreError(f"lake {self.fs.root}: source {sid} was reported loaded but is not staged")
        for table in counts:
            if table not in KEPT_IN_STAGING:
                self.conn.execute(f"DELETE FROM {quote_ident(table)} WHERE source_id = ?", [sid])
        carried = keyed_parts(read_manifest(self.fs).entries, report.replaced) if report.replaced else []
        return Entry(sid, src[0], src[1] or "", src[2], src[3], [p for _, p in parts] + carried, list(report.replaced))

    def write_entry(self, entry: Entry) -> None:
        """The commit point of one source (in source order: remove_uncommitted relies on it), made
        only while this writer still holds the lake."""
        commit_entry(self.fs, entry, self._lock)
        self._committed += 1

    def reserve_ids(self, n: int) -> list[int]:
        """n source ids, in order, for a distributed ingest's files."""
        return sorted(r[0] for r in self.conn.execute("SELECT nextval('source_id_seq') FROM range(?)", [n]).fetchall())

    def _rows_of(self, sid: int) -> dict[str, int]:
        """The staged tables holding rows of this source, and how many: one statement, so that a file
        writes (and later deletes) only the few tables it filled, not the ~20 a store has."""
        got = dict(self.conn.execute(self._count_sql, {"sid": sid}).fetchall())
        return {t: got[t] for t in self._tables if got.get(t)}  # in table order, as the entry lists its parts

    def _export(self, sid: int, counts: dict[str, int], tmp: Path) -> list[tuple[Path, Part]]:
        out: list[tuple[Path, Part]] = []
        for name, rows in counts.items():
            if name in PARTITIONED:
                out += self._export_partitioned(name, sid, tmp)
            else:
                query = f"SELECT * FROM {quote_ident(name)} WHERE source_id = {sid}"
                out += self._export_one(name, query, sid, tmp, rows=rows)
        new = sorted(
            r[0] for r in self.conn.execute("SELECT metric FROM metric_catalog").fetchall() if r[0] not in self._catalog
        )
        if new:
            query = "SELECT * FROM metric_catalog WHERE list_contains(?, metric) ORDER BY metric"
            out += self._export_one("metric_catalog", query, sid, tmp, [new])
            self._catalog.update(new)
        out += self._export_series(sid, tmp)
        # the source's own row last: to a reader of the folder alone, rows are live when their source is
        return sorted(out, key=lambda part: part[1].table == "sources")

    def _export_series(self, sid: int, tmp: Path) -> list[tuple[Path, Part]]:
        """The series this source's samples were the first to name, as its part of the lake's dictionary."""
        query = f"SELECT * FROM series WHERE series_id > {self._series} AND metric <> '' ORDER BY series_id"
        out = self._export_one("series", query, sid, tmp)
        self._series = int(self.conn.execute("SELECT coalesce(max(series_id), 0) FROM series").fetchone()[0])  # type: ignore[index]
        return out

    def _export_one(
        self, table: str, query: str, sid: int, tmp: Path, params: list[Any] | None = None, rows: int | None = None
    ) -> list[tuple[Path, Part]]:
        local = tmp / f"{table}-{sid}.parquet"
        self.conn.execute(f"COPY ({query}) TO {quote_literal(local)} (FORMAT parquet, COMPRESSION zstd)", params)
        if rows is None:
            rows = _rows_in(self.conn, [local])[0]
        if not rows:
            return []
        part = Part(table, f"{table}/part-{sid:08d}.parquet", rows, local.stat().st_size, sha256=file_sha256(local))
        return [(local, part)]

    def _export_partitioned(self, table: str, sid: int, tmp: Path) -> list[tuple[Path, Part]]:
        ts = PARTITIONED[table]
        folder = tmp / table
        self.conn.execute(
            f"COPY (SELECT *, {day_sql(ts)} AS day, {bucket_sql('host', self.buckets)} AS bucket "
            f"FROM {quote_ident(table)} WHERE source_id = {sid}{PART_ORDER.get(table, '')}) TO {quote_literal(folder)} "
            f"(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (day, bucket), FILENAME_PATTERN 'part-{sid:08d}-{{i}}')"
        )
        files = sorted(folder.rglob("*.parquet"), key=lambda f: (_partition(f, "day"), int(_partition(f, "bucket"))))
        rows = _rows_in(self.conn, files)
        out = []
        for local, count in zip(files, rows, strict=True):
            day, bucket = _partition(local, "day"), int(_partition(local, "bucket"))
            rel = f"{table}/day={day}/bucket={bucket}/{local.name}"
            out.append((local, Part(table, rel, count, local.stat().st_size, day, bucket, sha256=file_sha256(local))))
        return out

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None  # type: ignore[assignment]
        self._home.close()
        if self._lock is not None:
            try:
                if self._committed:
                    compact_if_due(self.fs)
            finally:
                self._lock.release()
                self._lock = None


def commit_entry(fs: LakeFS, entry: Entry, lock: lake_lock.WriterLock | None) -> int:
    """Commit one entry (the caller holds the writer lock), then remove the parts and entries of the
    sources it replaces (but the parts it carries on): a plain Parquet reader of the folder sees what
    Synestra sees. Where compacted parts hold rows of those sources, they are rewritten without them
    and the commit is a checkpoint that swaps them (one object: the old parts, or the new). The rows
    removed from compacted parts (lake_compact.rewrite_without)."""
    manifest = read_manifest(fs) if entry.replaces else None  # the common case reads nothing
    changed, old, rows = rewrite_without(fs, manifest, entry.replaces, entry.source_id) if manifest else ([], [], 0)
    if lock is not None:
        lock.check()
    # retired parts (lake_compact.py) that hold these sources' rows go at once too, and leave the list
    purge = [r for r in manifest.retired if set(r.get("sources", [])) & set(entry.replaces)] if manifest else []
    if manifest and changed:
        swapped = {e.source_id: e for e in changed}
        entries = [swapped.get(e.source_id, e) for e in manifest.entries] + [entry]
        retired = [r for r in manifest.retired if r not in purge]
        write_checkpoint(fs, Manifest(entries, entry.source_id, entry.source_id, 0, retired), retain_s())
    else:
        fs.write_text(entry_name(entry.source_id), entry.to_json())
    if manifest:  # rows that leave the lake leave at once (docs/lake.md: the retention is for moves)
        for path in [*old, *(str(r["path"]) for r in purge)]:
            fs.remove(path)
        gone = [e for e in manifest.entries if e.source_id in entry.replaces]
        _remove_parts(fs, gone, frozenset(p.path for p in entry.parts))
    return rows


def _remove_parts(fs: LakeFS, entries: list[Entry], keep: frozenset[str]) -> None:
    for entry in entries:
        for part in entry.parts:
            if part.path not in keep:
                fs.remove(part.path)
        fs.remove(entry_name(entry.source_id))


def keyed_parts(entries: list[Entry], ids: list[int]) -> list[Part]:
    """What these sources added to keyed tables (the metric catalog): a store file keeps those rows when
    a source is forgotten or replaced, so the entry that removes the source carries its parts on."""
    return [p for e in entries if e.source_id in ids for p in e.parts if p.table in KEYED]


def compact_if_due(
    fs: LakeFS, every: int | None = None, min_run: int | None = None, retain: int | None = None
) -> Compaction:
    """As a writer closes (it holds the lock): compact the runs of small parts (lake_compact.py), else
    compact the manifest when `every` (COMPACT_AFTER) entries or more are loose or a retired part is due
    for deletion."""
    manifest: Manifest = read_manifest(fs)
    done = compact_parts(fs, manifest, auto_run() if min_run is None else min_run, retain)
    if done.checkpoint:
        return done
    loose = manifest.loose >= (COMPACT_AFTER if every is None else every)
    if manifest.entries and (loose or is_due(manifest, retain)):
        held = len(manifest.retired)
        done.checkpoint = write_checkpoint(fs, manifest, retain_s() if retain is None else retain)
        done.deleted = held - len(manifest.retired)
    return done


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


def _staging_store(home: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB file of its own in `home`, not `:memory:`: the rows of committed files wait there for
    their export, compressed and evictable as a store file's blocks are, where an in-memory database
    keeps its tables uncompressed in the buffer pool."""
    from synestra_cli.store.migrations import apply_migrations
    from synestra_cli.store.session import MEMORY_LIMIT, OFFLINE_CONFIG, SESSION_SQL

    conn = duckdb.connect(
        str(home / "staging.duckdb"),
        config={
            **OFFLINE_CONFIG,
            "threads": settings.threads(),
            "memory_limit": settings.memory_limit(MEMORY_LIMIT),
            "temp_directory": str(home / "tmp"),
        },
    )
    for sql in SESSION_SQL:
        conn.execute(sql)
    apply_migrations(conn)
    return conn


def remove_uncommitted(fs: LakeFS, last: int) -> None:
    """Parts of sources past the last manifest entry: a killed ingest's file in flight. Entries are written
    in source order, so no live part has a later id; we hold the writer's lock."""
    for rel in fs.parts():
        sid = part_source(rel)
        if sid is not None and sid > last:
            fs.remove(rel)


def clear_stale_staging(fs: LakeFS) -> None:
    """Parts a killed ingest left half-staged: nobody lists them, and we hold the writer's lock."""
    if isinstance(fs, LocalFS):
        shutil.rmtree(os.path.join(fs.root, STAGING_DIR), ignore_errors=True)
