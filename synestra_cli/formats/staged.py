"""Snapshot outputs read in SQL: a file's lines staged in a temp table, its rows written from temp tables.

The tools of this family (nvidia-smi, dcgmi, SONiC portstat, ibswinfo, slurmctld) print small files
whose lines only mean something together: a value under a section title, a row under a header. Their
parsers stage all lines once (`stage_lines`), read them with window functions in one statement each,
and write metrics, events and rejects from the temp tables they built. Nothing loops over lines in
Python.
"""

from __future__ import annotations

from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.formats.snapshot import CATALOG_TABLE
from synestra_cli.store.sql import quote_ident, registered, scalar

INSERT_METRICS_SQL = """
INSERT INTO metrics (ts, host, entity, metric, value, source_id)
SELECT ts, host, entity, metric, value, $sid FROM {rel} ORDER BY host, entity, metric, ts
"""
INSERT_CATALOG_SQL = """
INSERT INTO metric_catalog (metric, unit, kind, description)
SELECT c.metric, c.unit, c.kind, c.description FROM staged_catalog c
WHERE c.metric IN (SELECT DISTINCT metric FROM {rel})
ON CONFLICT DO NOTHING
"""
INSERT_EVENTS_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
SELECT ts, host, component, kind, code, severity, message, fields, $sid, line FROM {rel} ORDER BY host, ts, line
"""
REJECT_SAMPLES_SQL = "SELECT lineno, reason, line FROM {rel} WHERE reason IS NOT NULL ORDER BY lineno LIMIT 20"
REJECT_COUNT_SQL = "SELECT count(*) FROM {rel} WHERE reason IS NOT NULL"


def stage_lines(ctx: LoadContext, table: str) -> None:
    """All of the file's lines in temp table `table` (lineno, line); TABs read as 4 blanks (indentation)."""
    name = quote_ident(table)
    ctx.conn.execute(f"CREATE OR REPLACE TEMP TABLE {name} (lineno BIGINT, line VARCHAR)")
    for batch in ctx.line_batches():
        staged_batch = batch  # noqa: F841 - DuckDB's replacement scan of this local
        ctx.conn.execute(f"INSERT INTO {name} SELECT lineno, replace(line, chr(9), '    ') FROM staged_batch")


def write_metrics(ctx: LoadContext, rel: str) -> int:
    """Insert the rows of `rel` (ts, host, entity, metric, value) and the catalog rows of its canonical
    metrics; rows without a value are not samples (a tool's `N/A`)."""
    name = quote_ident(rel)
    ctx.conn.execute(f"DELETE FROM {name} WHERE value IS NULL OR metric IS NULL OR ts IS NULL")
    with registered(ctx.conn, "staged_catalog", CATALOG_TABLE):
        ctx.conn.execute(INSERT_METRICS_SQL.format(rel=name), {"sid": ctx.source_id})
        ctx.conn.execute(INSERT_CATALOG_SQL.format(rel=name))
    return int(scalar(ctx.conn, f"SELECT count(*) FROM {name}"))


def write_events(ctx: LoadContext, rel: str) -> int:
    """Insert the rows of `rel` (ts, host, component, kind, code, severity, message, fields JSON, line)."""
    name = quote_ident(rel)
    ctx.conn.execute(INSERT_EVENTS_SQL.format(rel=name), {"sid": ctx.source_id})
    return int(scalar(ctx.conn, f"SELECT count(*) FROM {name}"))


def rejects(ctx: LoadContext, result: LoadResult, rel: str) -> None:
    """The lines of `rel` (lineno, line, reason) whose reason is set, counted and sampled with file:line."""
    name = quote_ident(rel)
    result.rejects_from(ctx.conn, REJECT_SAMPLES_SQL.format(rel=name), REJECT_COUNT_SQL.format(rel=name))
