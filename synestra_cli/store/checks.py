"""Checks on the rows one source wrote, inside its transaction, before it commits: bad rows never stay.

- Times outside years 1-9999 (a Prometheus millisecond stamp before year 1, `0000-` RFC 3339, a
  negative epoch, `--year -5`): no consumer can represent them (Python, JSON, ISO 8601). The row is
  rejected, with its line when the table has one.
- Duplicate samples, as Prometheus's TSDB treats them: for one series (host, entity, metric) and one
  time, the first sample stored is kept; a later one with another value is rejected ("duplicate sample
  for timestamp"), one with the same value is dropped and counted in a note.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from synestra_cli.store.sources import SourcedTable, sourced_tables
from synestra_cli.store.sql import quote_ident

TS_MIN = "TIMESTAMP '0001-01-01 00:00:00'"
TS_MAX = "TIMESTAMP '9999-12-31 23:59:59.999999'"
SAMPLES = 20

DUP_KEYS_SQL = """
CREATE OR REPLACE TEMP TABLE _dup_keys AS
SELECT host, entity, metric, ts FROM metrics WHERE source_id = $sid GROUP BY ALL HAVING count(*) > 1
"""
DUP_ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE _dup_rows AS
SELECT m.rowid AS rid, m.host, m.entity, m.metric, m.ts, m.value,
       row_number() OVER w AS k, first(m.value) OVER w AS kept
FROM metrics m JOIN _dup_keys d
  ON m.host IS NOT DISTINCT FROM d.host AND m.entity IS NOT DISTINCT FROM d.entity
 AND m.metric = d.metric AND m.ts = d.ts
WHERE m.source_id = $sid
WINDOW w AS (PARTITION BY m.host, m.entity, m.metric, m.ts ORDER BY m.rowid
             ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
"""
DUP_COUNT_SQL = """
SELECT count(*) FILTER (WHERE value IS DISTINCT FROM kept), count(*) FILTER (WHERE value IS NOT DISTINCT FROM kept)
FROM _dup_rows WHERE k > 1
"""
DUP_SAMPLE_SQL = f"""
SELECT metric, coalesce(host, '') || CASE WHEN entity IS NULL THEN '' ELSE ':' || entity END, ts::VARCHAR,
       kept, value
FROM _dup_rows WHERE k > 1 AND value IS DISTINCT FROM kept ORDER BY ts, metric, host, entity LIMIT {SAMPLES}
"""
DUP_DELETE_SQL = "DELETE FROM metrics WHERE source_id = $sid AND rowid IN (SELECT rid FROM _dup_rows WHERE k > 1)"
DUP_DROP_SQL = "DROP TABLE IF EXISTS _dup_keys; DROP TABLE IF EXISTS _dup_rows"


@dataclass
class CheckResult:
    deleted: int = 0  # rows removed from the store
    rejects: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, reason, text) samples
    rejected: int = 0  # rows rejected (a sample of them in rejects)
    notes: list[str] = field(default_factory=list)


def check_source(conn: duckdb.DuckDBPyConnection, source_id: int) -> CheckResult:
    """Remove the rows of this source that must not be stored; say what was removed."""
    out = CheckResult()
    for table in sourced_tables(conn):
        if table.ts_columns and table.name not in ("sources", "rejects"):
            _out_of_range(conn, table, source_id, out)
    _duplicate_samples(conn, source_id, out)
    return out


def _out_of_range(conn: duckdb.DuckDBPyConnection, table: SourcedTable, sid: int, out: CheckResult) -> None:
    name = quote_ident(table.name)
    bad = " OR ".join(f"{quote_ident(c)} < {TS_MIN} OR {quote_ident(c)} > {TS_MAX}" for c in table.ts_columns)
    where = f"source_id = $sid AND ({bad})"
    (n,) = conn.execute(f"SELECT count(*) FROM {name} WHERE {where}", {"sid": sid}).fetchone() or (0,)
    if not n:
        return
    line = "line" if table.has_line else "NULL"
    values = " || ' ' || ".join(f"coalesce('{c}=' || {quote_ident(c)}::VARCHAR, '')" for c in table.ts_columns)
    rows = conn.execute(
        f"SELECT {line}, {values} FROM {name} WHERE {where} ORDER BY {line} LIMIT {SAMPLES}", {"sid": sid}
    ).fetchall()
    for lineno, text in rows:
        out.rejects.append((lineno, f"time outside years 1-9999 ({table.name} row)", text.strip()))
    conn.execute(f"DELETE FROM {name} WHERE {where}", {"sid": sid})
    out.deleted += n
    out.rejected += n


def _duplicate_samples(conn: duckdb.DuckDBPyConnection, sid: int, out: CheckResult) -> None:
    params = {"sid": sid}
    conn.execute(DUP_KEYS_SQL, params)
    if not (conn.execute("SELECT count(*) FROM _dup_keys").fetchone() or (0,))[0]:
        conn.execute(DUP_DROP_SQL)
        return
    conn.execute(DUP_ROWS_SQL, params)
    conflicting, identical = conn.execute(DUP_COUNT_SQL).fetchone() or (0, 0)
    for metric, series, ts, kept, value in conn.execute(DUP_SAMPLE_SQL).fetchall():
        out.rejects.append(
            (
                None,
                f"duplicate sample for timestamp: {metric} {series} at {ts} (kept the first, {kept}; rejected {value})",
                "",
            )
        )
    conn.execute(DUP_DELETE_SQL, params)
    conn.execute(DUP_DROP_SQL)
    out.deleted += conflicting + identical
    out.rejected += conflicting
    if identical:
        out.notes.append(f"{identical} repeated sample(s) (same series, time and value) stored once")
