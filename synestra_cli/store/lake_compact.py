"""Compacting a lake's small parts: the parts of one partition (a table, or a table's day and host bucket)
rewritten into one, so that a reader opens tens of files where ingest wrote tens of thousands.

Every ingested file writes its own parts (lake_writer.py): a campus's 10^4 files leave 10^4 parts in each
small table, and a reader opens all of them. A compaction takes, in each partition, runs of consecutive
small parts (in source order, so that rows stay in the order a store file holds them), writes each run
as one part (`part-<id>-c<k>.parquet`, named after the compaction's own manifest id), then commits by
one manifest checkpoint in which the compaction's entry lists the new parts and no entry lists the old
ones. Before that object lands a reader sees the old parts; after it, the new ones: the same rows either
way. The old parts are *retired*, not deleted: a reader that read the old manifest may still be reading
them, so they are deleted by a later writer once they have been retired for $SYNESTRA_LAKE_RETAIN
seconds (an hour; docs/lake.md gives the rule). A compacted part records the rows of each source it
holds: `forget` (and a changed file's replace) rewrites the compacted parts that hold a removed source,
without its rows, in the same commit (`rewrite_without`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from synestra_cli import settings
from synestra_cli.store.lake import KEYED
from synestra_cli.store.lake_fs import FsspecFS, LakeFS, staging_dir
from synestra_cli.store.lake_manifest import COMPACT, Entry, Manifest, Part, file_sha256, mark_layout, write_checkpoint
from synestra_cli.store.sql import quote_ident, quote_literal

SMALL_BYTES = 32 << 20  # a part under this is small: compacted with its neighbours
TARGET_BYTES = 256 << 20  # a compacted part gathers at most this many bytes of parts
# an ingest compacts a run of this many small parts in a row; `synestra compact`, 2
MIN_RUN = settings.DEFAULT_LAKE_COMPACT_RUN
RETAIN_S = settings.DEFAULT_LAKE_RETAIN_S  # how long a retired part is kept for the readers still on it


@dataclass(frozen=True)
class Held:
    """A part, the entry that lists it, and its place among that entry's parts."""

    entry: Entry
    part: Part
    k: int


@dataclass
class Compaction:
    """What a compaction did: the parts it read and wrote, and the retired parts it deleted."""

    merged: int = 0
    written: int = 0
    partitions: int = 0
    deleted: int = 0
    checkpoint: str | None = None


def retain_s() -> int:
    return settings.lake_retain_s()


def auto_run() -> int:
    """The run of small parts an ingest or forget compacts as it closes ($SYNESTRA_LAKE_COMPACT_RUN;
    0: never, for a site that runs `synestra compact` in a window of its own)."""
    return settings.lake_compact_run()


def plan(entries: list[Entry], min_run: int = MIN_RUN) -> list[list[Held]]:
    """The runs to compact: in each partition, consecutive small parts (source order), at most
    TARGET_BYTES each, at least `min_run` long. A big part breaks a run: rows never change order."""
    groups: dict[tuple[str, str | None, int | None], list[Held]] = {}
    for entry in entries:
        for k, part in enumerate(entry.parts):
            groups.setdefault((part.table, part.day, part.bucket), []).append(Held(entry, part, k))
    runs: list[list[Held]] = []
    for key in sorted(groups, key=str):
        run: list[Held] = []
        size = 0
        for held in sorted(groups[key], key=lambda h: (h.part.order(), h.k)):
            small = held.part.bytes < SMALL_BYTES
            if small and size + held.part.bytes <= TARGET_BYTES:
                run.append(held)
                size += held.part.bytes
                continue
            if len(run) >= min_run:
                runs.append(run)
            run, size = ([held], held.part.bytes) if small else ([], 0)
        if len(run) >= min_run:
            runs.append(run)
    return runs


def is_due(manifest: Manifest, retain: int | None = None) -> bool:
    """Whether a retired part has waited out its retention (a writer then deletes it)."""
    limit = retain_s() if retain is None else retain
    now = time.time()
    return any(now - float(r["at"]) >= limit for r in manifest.retired)


def compact_parts(fs: LakeFS, manifest: Manifest, min_run: int, retain: int | None = None) -> Compaction:
    """Compact the runs `plan` finds (the caller holds the writer lock) and commit them by one checkpoint;
    delete the retired parts whose retention has run out. A `min_run` of 0 compacts nothing."""
    runs = plan(manifest.kept(), min_run) if min_run > 0 else []
    if not runs:
        return Compaction()
    cid = manifest.last_id + 1
    conn = _conn(fs)
    try:
        with staging_dir(fs) as tmp:
            parts = [_merge(conn, fs, run, cid, k, tmp) for k, run in enumerate(runs)]
    finally:
        conn.close()
    retired = {h.part.path: [s for s, _ in h.part.sources or [[h.part.order(), 0]]] for run in runs for h in run}
    entries = [replace(e, parts=[p for p in e.parts if p.path not in retired]) for e in manifest.kept()]
    entry = Entry(cid, "", "", "", COMPACT, parts, kind=COMPACT)
    at = time.time()
    moved = [{"path": p, "at": at, "sources": retired[p]} for p in sorted(retired)]
    after = Manifest([*entries, entry], cid, cid, 0, [*manifest.retired, *moved])
    mark_layout(fs)
    before_commit(fs, after)
    held = len(after.retired)
    name = write_checkpoint(fs, after, retain_s() if retain is None else retain)
    deleted = held - len(after.retired)  # those whose retention ran out (write_checkpoint updates the list)
    return Compaction(len(retired), len(parts), len({(p.table, p.day, p.bucket) for p in parts}), deleted, name)


def before_commit(fs: LakeFS, manifest: Manifest) -> None:
    """The point between a compaction's parts and its commit (tests kill a process here)."""


def rewrite_without(fs: LakeFS, manifest: Manifest, ids: list[int], new_id: int) -> tuple[list[Entry], list[str], int]:
    """The compacted parts that hold rows of these sources, rewritten without them (named after the
    entry `new_id` that will commit them): the compaction entries with their parts swapped, the paths
    they replace, and the rows removed (as a store file counts them: data, not bookkeeping)."""
    from synestra_cli.store.sources import BOOKKEEPING_TABLES

    gone = set(ids)
    owners = [e for e in manifest.kept() if e.kind == COMPACT and _holds(e, gone)]
    if not owners:
        return [], [], 0
    conn = _conn(fs)
    changed, old, rows, k = [], [], 0, 0
    try:
        with staging_dir(fs) as tmp:
            for entry in owners:
                parts = []
                for part in entry.parts:
                    held = [n for s, n in part.sources or [] if s in gone]
                    if not held or part.table in KEYED:  # a keyed table keeps its rows (a store file does)
                        parts.append(part)
                        continue
                    old.append(part.path)
                    rows += sum(held) if part.table not in BOOKKEEPING_TABLES else 0
                    kept = [[s, n] for s, n in part.sources or [] if s not in gone]
                    if kept:
                        parts.append(_filtered(conn, fs, part, kept, ids, new_id, k, tmp))
                        k += 1
                changed.append(replace(entry, parts=parts))
    finally:
        conn.close()
    return changed, old, rows


def _holds(entry: Entry, ids: set[int]) -> bool:
    return any(s in ids for p in entry.parts for s, _ in p.sources or [])


def _merge(conn: duckdb.DuckDBPyConnection, fs: LakeFS, run: list[Held], cid: int, k: int, tmp: Path) -> Part:
    """One run written as one part, its rows in source order; a keyed table keeps its standing row per
    key (the first in source order, as a reader would pick it)."""
    first = run[0].part
    files = _files(fs, [h.part.path for h in run])
    scan = f"read_parquet({files}, union_by_name = true, filename = true, file_row_number = true)"
    query = f"SELECT * EXCLUDE (filename, file_row_number) FROM {scan}"
    if first.table in KEYED:
        at = f"list_position({files}, filename), file_row_number"
        query += f" QUALIFY row_number() OVER (PARTITION BY {quote_ident(KEYED[first.table])} ORDER BY {at}) = 1"
        query += f" ORDER BY {at}"
    sources: dict[int, int] = {}
    for held in run:
        for sid, n in held.part.sources or [[held.part.order(), held.part.rows]]:
            sources[sid] = sources.get(sid, 0) + n
    holds = [[s, sources[s]] for s in sorted(sources)]
    return _write(conn, fs, query, first, f"part-{cid:08d}-c{k}.parquet", holds, tmp)


def _filtered(
    conn: duckdb.DuckDBPyConnection,
    fs: LakeFS,
    part: Part,
    kept: list[list[int]],
    ids: list[int],
    new_id: int,
    k: int,
    tmp: Path,
) -> Part:
    gone = ", ".join(str(int(i)) for i in ids)
    query = f"SELECT * FROM read_parquet({_files(fs, [part.path])}) WHERE source_id NOT IN ({gone})"
    return _write(conn, fs, query, part, f"part-{new_id:08d}-r{k}.parquet", kept, tmp)


def _write(
    conn: duckdb.DuckDBPyConnection, fs: LakeFS, query: str, like: Part, name: str, sources: list[list[int]], tmp: Path
) -> Part:
    """Write `query` as a part in `like`'s partition, then move it into place (no reader lists it yet)."""
    folder = like.path.rsplit("/", 1)[0]
    local = tmp / name
    conn.execute(f"COPY ({query}) TO {quote_literal(local)} (FORMAT parquet, COMPRESSION zstd)")
    row = conn.execute("SELECT sum(num_rows) FROM parquet_file_metadata(?)", [str(local)]).fetchone()
    rows = int(row[0] or 0) if row else 0
    part = replace(like, path=f"{folder}/{name}", rows=rows, bytes=local.stat().st_size, sha256=file_sha256(local))
    fs.put_file(local, part.path)
    return replace(part, sources=sources)


def _files(fs: LakeFS, rels: list[str]) -> str:
    return "[" + ", ".join(quote_literal(fs.url(r)) for r in rels) + "]"


def _conn(fs: LakeFS) -> duckdb.DuckDBPyConnection:
    from synestra_cli.store.session import MEMORY_LIMIT, OFFLINE_CONFIG

    conn = duckdb.connect(
        ":memory:",
        config={**OFFLINE_CONFIG, "threads": settings.threads(), "memory_limit": settings.memory_limit(MEMORY_LIMIT)},
    )
    if isinstance(fs, FsspecFS):
        conn.register_filesystem(fs.fs)
    return conn
