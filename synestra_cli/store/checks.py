"""Checks on the rows a batch of sources wrote, before they commit: bad rows never stay.

One pass per table for the whole batch (grouped by source), not per file: a batch of 500 small files
costs the same dozen statements as one file.

- Times outside years 1-9999 (a Prometheus millisecond stamp before year 1, `0000-` RFC 3339, a
  negative epoch, `--year -5`): no consumer can represent them (Python, JSON, ISO 8601). The row is
  rejected, with its line when the table has one.
- Duplicate samples, as Prometheus's TSDB treats them: for one series (host, entity, metric) and one
  time, the first sample stored is kept; a later one with another value is rejected ("duplicate sample
  for timestamp"), one with the same value is dropped and counted in a note.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field

import duckdb

from synestra_cli.store.sources import SourcedTable, qualified, sourced_tables
from synestra_cli.store.sql import drop_temp, quote_ident, scalar
from synestra_cli.store.summaries import DERIVED_TABLES

TS_MIN = "TIMESTAMP '0001-01-01 00:00:00'"
TS_MAX = "TIMESTAMP '9999-12-31 23:59:59.999999'"
OUT_OF_RANGE = "time outside years 1-9999"  # the reject's reason, here and where a parser finds one
SAMPLES = 20

# Series with a repeated time: grouped (not windowed) first, so that the common case (no repeats)
# costs one hash aggregate over the batch's samples and nothing is kept of them. Grouped by a hash of
# the series' names, not the names (16 campus DCGM files, 4.6 M samples: 0.8-1.4 -> 0.6-0.9 s): series
# whose hashes collide only make a key to look at, their rows then told apart by name (DUP_ROWS_SQL).
SERIES_HASH = "hash({m}host, {m}entity, {m}metric)"
DUP_KEYS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _dup_keys AS
SELECT source_id, {SERIES_HASH.format(m="")} AS series, ts FROM {{metrics}}
WHERE list_contains($ids, source_id) GROUP BY ALL HAVING count(*) > 1
"""
DUP_ROWS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _dup_rows AS
SELECT m.rowid AS rid, m.source_id, m.host, m.entity, m.metric, m.ts, m.value,
       row_number() OVER w AS k, first(m.value) OVER w AS kept
FROM {{metrics}} m JOIN _dup_keys d
  ON m.source_id = d.source_id AND {SERIES_HASH.format(m="m.")} = d.series AND m.ts = d.ts
WINDOW w AS (PARTITION BY m.source_id, m.host, m.entity, m.metric, m.ts ORDER BY m.rowid
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
"""
DUP_COUNT_SQL = """
SELECT source_id, count(*) FILTER (WHERE value IS DISTINCT FROM kept),
       count(*) FILTER (WHERE value IS NOT DISTINCT FROM kept)
FROM _dup_rows WHERE k > 1 GROUP BY source_id
"""
DUP_SAMPLE_SQL = f"""
SELECT source_id, metric, coalesce(host, '') || CASE WHEN entity IS NULL THEN '' ELSE ':' || entity END,
       ts::VARCHAR, kept, value
FROM _dup_rows WHERE k > 1 AND value IS DISTINCT FROM kept
QUALIFY row_number() OVER (PARTITION BY source_id ORDER BY ts, metric, host, entity) <= {SAMPLES}
ORDER BY source_id, ts, metric, host, entity
"""
DUP_DELETE_SQL = "DELETE FROM {metrics} WHERE rowid IN (SELECT rid FROM _dup_rows WHERE k > 1)"
DUP_TEMP_TABLES = ("_dup_keys", "_dup_rows")


@dataclass
class CheckResult:
    deleted: int = 0  # rows removed from the store
    rejects: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, reason, text) samples
    rejected: int = 0  # rows rejected (a sample of them in rejects)
    notes: list[str] = field(default_factory=list)


Checked = dict[int, CheckResult]  # per source id


def check_sources(
    conn: duckdb.DuckDBPyConnection,
    ids: list[int],
    catalog: str | None = None,
    tables: list[SourcedTable] | None = None,
    repeatable: Collection[int] | None = None,
) -> Checked:
    """Remove the rows of these sources (in `catalog`, whose sourced `tables` are these when given) that
    must not be stored; say, per source, what was removed (a source with nothing removed is absent).
    `repeatable`: the sources whose samples could hold a duplicate, when the caller knows (default: all);
    the duplicate check, a hash aggregate over every sample, reads only theirs."""
    out: Checked = defaultdict(CheckResult)
    if not ids:
        return out
    for table in tables if tables is not None else sourced_tables(conn, catalog):
        # the summaries are derived from the samples (a rejected sample leaves them stale, and the commit
        # summarises from the store instead): neither rejects nor rows of the source, never counted
        if table.ts_columns and table.name not in ("sources", "rejects", *DERIVED_TABLES):
            _out_of_range(conn, catalog, table, ids, out)
    suspects = ids if repeatable is None else [i for i in ids if i in repeatable]
    if suspects:
        _duplicate_samples(conn, catalog, suspects, out)
    return out


def check_source(conn: duckdb.DuckDBPyConnection, source_id: int) -> CheckResult:
    """check_sources for one source of the current database."""
    return check_sources(conn, [source_id]).get(source_id, CheckResult())


def _out_of_range(
    conn: duckdb.DuckDBPyConnection,
    catalog: str | None,
    table: SourcedTable,
    ids: list[int],
    out: Checked,
) -> None:
    name = qualified(catalog, table.name)
    bad = " OR ".join(f"{quote_ident(c)} < {TS_MIN} OR {quote_ident(c)} > {TS_MAX}" for c in table.ts_columns)
    where = f"list_contains($ids, source_id) AND ({bad})"
    counts = conn.execute(f"SELECT source_id, count(*) FROM {name} WHERE {where} GROUP BY ALL", {"ids": ids}).fetchall()
    if not counts:
        return
    line = "line" if table.has_line else "NULL"
    values = " || ' ' || ".join(f"coalesce('{c}=' || {quote_ident(c)}::VARCHAR, '')" for c in table.ts_columns)
    rows = conn.execute(
        f"SELECT source_id, {line} AS l, {values} FROM {name} WHERE {where} "
        f"QUALIFY row_number() OVER (PARTITION BY source_id ORDER BY l) <= {SAMPLES} ORDER BY source_id, l",
        {"ids": ids},
    ).fetchall()
    for sid, lineno, text in rows:
        out[sid].rejects.append((lineno, f"{OUT_OF_RANGE} ({table.name} row)", text.strip()))
    conn.execute(f"DELETE FROM {name} WHERE {where}", {"ids": ids})
    for sid, n in counts:
        out[sid].deleted += n
        out[sid].rejected += n


def _duplicate_samples(conn: duckdb.DuckDBPyConnection, catalog: str | None, ids: list[int], out: Checked) -> None:
    metrics = qualified(catalog, "metrics")
    conn.execute(DUP_KEYS_SQL.format(metrics=metrics), {"ids": ids})
    if not scalar(conn, "SELECT count(*) FROM _dup_keys"):
        drop_temp(conn, DUP_TEMP_TABLES)
        return
    conn.execute(DUP_ROWS_SQL.format(metrics=metrics))
    counts = conn.execute(DUP_COUNT_SQL).fetchall()
    for sid, metric, series, ts, kept, value in conn.execute(DUP_SAMPLE_SQL).fetchall():
        out[sid].rejects.append(
            (
                None,
                f"duplicate sample for timestamp: {metric} {series} at {ts} (kept the first, {kept}; rejected {value})",
                "",
            )
        )
    conn.execute(DUP_DELETE_SQL.format(metrics=metrics))
    drop_temp(conn, DUP_TEMP_TABLES)
    for sid, conflicting, identical in counts:
        out[sid].deleted += conflicting + identical
        out[sid].rejected += conflicting
        if identical:
            out[sid].notes.append(f"{identical} repeated sample(s) (same series, time and value) stored once")
