"""Explanations kept on a lake (kept/explanations.py's cache, beside the parts): the same key as in a store file.

A store file keeps them in its `explanations` table; a lake keeps them as Parquet objects under
`_explanations/key-<digest of the key>/`, one per save (`<time>-<random>.parquet`: job_id, store_key,
doc), written whole (a temporary name renamed, or one PUT). A reader loads those of its current key into
its in-memory `explanations` table the first time kept/explanations.py asks; those of any other key are stale
(the key names the sources and the code) and are removed by the next save. Keeping them is best effort,
as on a store file, and needs no writer lock: a save checks that the lake's sources are still those of
its key, and a save that races an ingest only writes under a key no reader will ask for again.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import duckdb

from synestra_cli.store.lake import load_lake
from synestra_cli.store.lake_fs import FsspecFS, LakeFS, LocalFS, open_fs, staging_dir
from synestra_cli.store.lake_manifest import read_manifest
from synestra_cli.store.session import is_lake_reader
from synestra_cli.store.sql import quote_literal

KEPT_DIR = "_explanations"
LOADED_TABLE = "_lake_kept_loaded"  # the keys a reader has loaded already


def key_dir(key: str) -> str:
    return f"{KEPT_DIR}/key-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def sources_state(fs: LakeFS) -> tuple[int, int]:
    """(count, last id) of the lake's live sources, from its manifest: what `SELECT count(*),
    max(source_id) FROM sources` answers on a reader (one `sources` row per live entry)."""
    live = read_manifest(fs).live()
    return len(live), max((e.source_id for e in live), default=0)


def load_kept(conn: duckdb.DuckDBPyConnection, key: str) -> None:
    """On a lake reader, the explanations kept under `key` into its `explanations` table (once per key);
    on a store file, nothing."""
    if not is_lake_reader(conn):
        return
    conn.execute(f"CREATE TEMP TABLE IF NOT EXISTS {LOADED_TABLE} (store_key VARCHAR)")
    row = conn.execute(f"SELECT count(*) FROM {LOADED_TABLE} WHERE store_key = ?", [key]).fetchone()
    if row and row[0]:
        return
    root = conn.execute("SELECT root FROM _lake_info").fetchone()
    fs = open_fs(str(root[0])) if root else None
    urls = [fs.url(rel) for rel in fs.listdir(key_dir(key)) if rel.endswith(".parquet")] if fs else []
    if urls:  # the latest save of a job stands (names sort by time)
        conn.execute(
            "INSERT OR REPLACE INTO explanations (job_id, store_key, doc) SELECT job_id, store_key, doc FROM "
            "read_parquet(?, filename = true) WHERE store_key = ? "
            "QUALIFY row_number() OVER (PARTITION BY job_id ORDER BY filename DESC) = 1",
            [urls, key],
        )
    conn.execute(f"INSERT INTO {LOADED_TABLE} VALUES (?)", [key])


def keep(target: str, key: str, docs: list[tuple[str, str]], key_of: Callable[[int, int], str]) -> int:
    """Keep (job, JSON document) pairs on the lake under `key` if its sources are still those of the key
    (`key_of(count, last id)` rebuilds it); how many were kept."""
    lake = load_lake(target)
    fs = lake.fs
    if not docs or key_of(*sources_state(fs)) != key:
        return 0
    folder = key_dir(key)
    name = f"{folder}/{time.time_ns():020d}-{uuid.uuid4().hex[:8]}.parquet"
    conn = duckdb.connect(":memory:")
    try:
        with staging_dir(fs) as tmp:
            local = tmp / "kept.parquet"
            conn.execute(
                "COPY (SELECT unnest(?::VARCHAR[]) AS job_id, ?::VARCHAR AS store_key, unnest(?::VARCHAR[]) AS doc) "
                f"TO {quote_literal(local)} (FORMAT parquet, COMPRESSION zstd)",
                [[j for j, _ in docs], key, [d for _, d in docs]],
            )
            fs.put_file(local, name)
    finally:
        conn.close()
    _remove_stale(fs, folder)
    return len(docs)


def _remove_stale(fs: LakeFS, current: str) -> None:
    """Other keys' explanations: no reader asks for them again."""
    for rel in fs.listdir(KEPT_DIR):
        if rel == current:
            continue
        with suppress(OSError):
            if isinstance(fs, LocalFS):
                import shutil

                shutil.rmtree(Path(fs.url(rel)), ignore_errors=True)
            elif isinstance(fs, FsspecFS):
                fs.fs.rm(fs.url(rel), recursive=True)
