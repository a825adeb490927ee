"""An operator's actions on a lake, each under the writer lock: `compact` (runs of small parts merged,
retired parts deleted, the manifest checkpointed) and `forget` (sources removed by one manifest entry).
Split from lake_writer.py, which writes what an ingest loads."""

from __future__ import annotations

from synestra_cli.store import lake_lock
from synestra_cli.store.lake import KEYED, load_lake, open_reader
from synestra_cli.store.lake_compact import Compaction
from synestra_cli.store.lake_manifest import FORGET, Entry, mark_layout, read_manifest
from synestra_cli.store.lake_writer import (
    clear_stale_staging,
    commit_entry,
    compact_if_due,
    keyed_parts,
    remove_uncommitted,
)
from synestra_cli.store.sources import BOOKKEEPING_TABLES, find_sources


def compact(target: str, retain: int | None = None) -> Compaction:
    """`synestra compact`: every run of two or more small parts compacted now, retired parts older than
    `retain` seconds deleted, and the manifest compacted into one checkpoint (under the writer lock)."""
    fs = load_lake(target).fs
    lock = lake_lock.take(fs)
    try:
        clear_stale_staging(fs)  # what a killed writer left: never listed, and we hold the lock
        remove_uncommitted(fs, read_manifest(fs).last_id)
        return compact_if_due(fs, every=1, min_run=2, retain=retain)
    finally:
        if lock is not None:
            lock.release()


def forget(target: str, refs: list[str]) -> tuple[list[tuple[int, str, str, int]], int]:
    """`synestra forget` on a lake: the sources refs name (as on a store file) and every row they wrote,
    removed at once. One manifest entry (kind forget, a new id) that replaces them is the commit point:
    before it the lake is as it was, after it no reader sees them; their parts and entries are removed
    after it. Compacted parts holding their rows are rewritten without them in the same commit. What they
    added to keyed tables (the metric catalog) stays, as a store file keeps it. Returns the sources
    removed and the rows (counted as the store file counts them)."""
    fs = load_lake(target).fs  # no lake there: EmptyStoreError, and no folder or lock file made
    lock = lake_lock.take(fs)
    try:
        mark_layout(fs)
        reader = open_reader(target)
        try:
            sources = find_sources(reader, refs)
        finally:
            reader.close()
        ids = [s[0] for s in sources]
        manifest = read_manifest(fs)
        gone = [e for e in manifest.live() if e.source_id in ids]
        kept = keyed_parts(gone, ids)
        entry = Entry(manifest.last_id + 1, "", "", "", FORGET, kept, ids, kind=FORGET)
        rewritten = commit_entry(fs, entry, lock)
        rows = rewritten + sum(p.rows for e in gone for p in e.parts if p.table not in (*BOOKKEEPING_TABLES, *KEYED))
        compact_if_due(fs)
    finally:
        if lock is not None:
            lock.release()
    return sources, rows
