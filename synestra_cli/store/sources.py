"""Sources and the rows they wrote: finding them by id or path, and forgetting them.

Every table with a `source_id` column holds rows of one source each; the tables are found in the
catalog, so that a table a later migration adds is covered without being listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from synestra_cli.errors import NotFoundError
from synestra_cli.store.sql import quote_ident, scalar, transaction
from synestra_cli.store.summaries import DERIVED_TABLES

# Sourced tables that keep what ingest knows of a source, not rows read from its file: not counted as
# its rows, and not compared when two stores of the same files are (a file followed as it grew is
# several sources, read once is one).
BOOKKEEPING_TABLES = ("sources", "rejects", "source_years", *DERIVED_TABLES)

# Base tables (not views, not temp) with a source_id column, and their TIMESTAMP columns.
SOURCED_TABLES_SQL = """
SELECT c.table_name,
       list(c.column_name ORDER BY c.column_index) FILTER (WHERE c.data_type = 'TIMESTAMP') AS ts_columns,
       bool_or(c.column_name = 'line') AS has_line
FROM duckdb_columns() c JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
WHERE c.database_name = coalesce($catalog, current_database()) AND c.schema_name = 'main' AND NOT t.temporary
GROUP BY c.table_name HAVING bool_or(c.column_name = 'source_id')
ORDER BY c.table_name
"""

FIND_SQL = """
SELECT source_id, path, format, rows FROM sources
WHERE source_id = try_cast($ref AS INTEGER) OR path = $path ORDER BY source_id
"""


@dataclass(frozen=True)
class SourcedTable:
    name: str
    ts_columns: tuple[str, ...]
    has_line: bool


def sourced_tables(conn: duckdb.DuckDBPyConnection, catalog: str | None = None) -> list[SourcedTable]:
    """Every table whose rows belong to a source, `sources` and `rejects` last (the bookkeeping), in
    `catalog` (default: the current database)."""
    rows = conn.execute(SOURCED_TABLES_SQL, {"catalog": catalog}).fetchall()
    tables = [SourcedTable(name, tuple(ts or ()), bool(line)) for name, ts, line in rows]
    return sorted(tables, key=lambda t: t.name in ("rejects", "sources"))


def find_sources(conn: duckdb.DuckDBPyConnection, refs: list[str]) -> list[tuple[int, str, str, int]]:
    """(source_id, path, format, rows) of each ref: a source id, or a path (every source read from it).
    NotFoundError naming the refs that match nothing."""
    found: dict[int, tuple[int, str, str, int]] = {}
    missing = []
    for ref in refs:
        rows = conn.execute(FIND_SQL, {"ref": ref, "path": str(Path(ref).resolve())}).fetchall()
        if not rows:
            missing.append(ref)
        found.update({row[0]: row for row in rows})
    if missing:
        raise NotFoundError(
            f"no source {', '.join(map(repr, missing))} in the store "
            "(give a source id or a path as `synestra sources` lists them)"
        )
    return [found[i] for i in sorted(found)]


def qualified(catalog: str | None, table: str) -> str:
    return f"{quote_ident(catalog)}.main.{quote_ident(table)}" if catalog else quote_ident(table)


def delete_sources(
    conn: duckdb.DuckDBPyConnection,
    ids: list[int],
    catalog: str | None = None,
    tables: list[SourcedTable] | None = None,
) -> int:
    """Delete these sources and every row they wrote, in the caller's transaction. Rows deleted.
    `tables`: the catalog's sourced tables, when the caller knows them."""
    if not ids:
        return 0
    deleted = 0
    for table in tables if tables is not None else sourced_tables(conn, catalog):
        name = qualified(catalog, table.name)
        removed = scalar(conn, f"DELETE FROM {name} WHERE list_contains(?, source_id)", [ids])
        deleted += removed if table.name not in BOOKKEEPING_TABLES else 0
    return deleted


def forget(conn: duckdb.DuckDBPyConnection, refs: list[str]) -> tuple[list[tuple[int, str, str, int]], int]:
    """`synestra forget`: the sources refs name, and every row they wrote, removed in one transaction.
    Returns the sources removed and the number of rows."""
    with transaction(conn):
        sources = find_sources(conn, refs)
        rows = delete_sources(conn, [s[0] for s in sources])
    return sources, rows
