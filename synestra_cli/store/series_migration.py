"""Migration 023: an existing store's samples rewritten once into the series layout (store/series.py).

Resumable and atomic. The samples are copied into a new table a few sources at a time, each group in
its own transaction (so a big store's rewrite never holds more than a group in memory), and
`_series_migrated` records the groups done; the old `metrics` stays whole until one last transaction
drops it, renames the new table in its place and records the migration. A kill -9 anywhere leaves
either the old table (whole, still read by every command: readers open read-only and read the old
layout) and part of the new one, which the next writable open goes on filling from where it stopped,
or the migrated store. A group's sources are checked again at the end (an older Synestra may have
ingested or forgotten files in between): any whose row count differs is copied again inside the last
transaction. Progress is reported per group (synestra_cli.progress: a bar on a terminal).
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from synestra_cli import progress
from synestra_cli.store.series import METRICS_COLUMNS, SERIES_DDL, copy_by_series
from synestra_cli.store.sql import has_table, transaction

NEW = "_metrics_by_series"
DONE = "_series_migrated"
# Rows per transaction: a group's rows are sorted in memory (~40 bytes a row).
GROUP_ROWS = 8_000_000
START_SQL = (
    SERIES_DDL
    + f"""
CREATE TABLE IF NOT EXISTS {NEW} {METRICS_COLUMNS};
CREATE TABLE IF NOT EXISTS {DONE} (source_id INTEGER NOT NULL);
"""
)
TODO_SQL = f"""
SELECT source_id, count(*) FROM metrics
WHERE source_id NOT IN (SELECT source_id FROM {DONE}) GROUP BY source_id ORDER BY source_id
"""
# Sources whose rows in the new table are not those of the old (changed by an older Synestra in between).
DIFFER_SQL = f"""
SELECT coalesce(o.source_id, n.source_id) FROM (SELECT source_id, count(*) AS k FROM metrics GROUP BY ALL) o
FULL JOIN (SELECT source_id, count(*) AS k FROM {NEW} GROUP BY ALL) n USING (source_id)
WHERE o.k IS DISTINCT FROM n.k ORDER BY 1
"""
SWAP_SQL = f"""
DROP TABLE metrics;
ALTER TABLE {NEW} RENAME TO metrics;
DROP TABLE {DONE};
"""
# The summaries' row ranges point into the old table's rowids: a reader of the series layout reads by series,
# and a range that no longer holds would only send it the long way round.
UNRANGE_SQL = "UPDATE metric_summaries SET row_lo = NULL, row_hi = NULL WHERE row_lo IS NOT NULL"
WHAT = "rewriting the samples by series (once)"


def _groups(todo: list[tuple[int, int]]) -> list[list[int]]:
    """Consecutive sources, GROUP_ROWS rows or one source to a group."""
    groups: list[list[int]] = []
    rows = GROUP_ROWS
    for sid, n in todo:
        if rows + n > GROUP_ROWS:
            groups.append([])
            rows = 0
        groups[-1].append(sid)
        rows += n
    return groups


def _copy(conn: duckdb.DuckDBPyConnection, ids: list[int]) -> None:
    where = f"WHERE source_id IN ({', '.join(str(int(i)) for i in ids)})"
    copy_by_series(conn, "metrics", "series", NEW, where, numbered=False)


def migrate(conn: duckdb.DuckDBPyConnection, record: Callable[[], None]) -> None:
    """Migration 023 on the store `conn` is open on (writable), in transactions of its own; `record` writes
    the migration's `_migrations` row (in the last one)."""
    if has_table(conn, DONE) or not _migrated_fresh(conn, record):
        _rewrite(conn, record)


def _migrated_fresh(conn: duckdb.DuckDBPyConnection, record: Callable[[], None]) -> bool:
    """A store without samples (a new one) is migrated in one transaction; False when it has some."""
    with transaction(conn):
        if conn.execute("SELECT 1 FROM metrics LIMIT 1").fetchall():
            return False
        conn.execute(SERIES_DDL + f"DROP TABLE metrics; CREATE TABLE metrics {METRICS_COLUMNS};")
        record()
    return True


def _rewrite(conn: duckdb.DuckDBPyConnection, record: Callable[[], None]) -> None:
    with transaction(conn):
        conn.execute(START_SQL)
    groups = _groups(conn.execute(TODO_SQL).fetchall())
    for ids in progress.track(WHAT, groups, len(groups)):
        with transaction(conn):
            _copy(conn, ids)
            conn.execute(f"INSERT INTO {DONE} SELECT unnest(?::INTEGER[])", [ids])
    with transaction(conn):
        stale = [sid for (sid,) in conn.execute(DIFFER_SQL).fetchall()]
        if stale:
            conn.execute(f"DELETE FROM {NEW} WHERE list_contains(?, source_id)", [stale])
            _copy(conn, stale)
        conn.execute(SWAP_SQL)
        if has_table(conn, "metric_summaries"):
            conn.execute(UNRANGE_SQL)
        record()
