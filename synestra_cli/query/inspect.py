"""Looking inside the store: the sources listing and read-only SQL for runbooks."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb

from synestra_cli.errors import (
    OutOfMemoryError,
    QueryError,
    SynestraError,
    is_out_of_memory,
    out_of_memory_message,
)
from synestra_cli.store.connect import as_store_error

BATCH_ROWS = 8192  # rows per Arrow record batch a `sql` result streams in
# The statements `sql` runs: those that read. Every other kind (COPY, EXPORT, ATTACH, INSERT, CREATE, DROP,
# INSTALL/LOAD, PREPARE/EXECUTE ...) is refused by its kind before it runs, on a store file and on a lake
# alike: a lake reader is an in-memory database whose own parts DuckDB may read, and may therefore write
# (`COPY ... TO '<a part>'` overwrote a lake's data: issue 38). SET stays, for the locked configuration
# to refuse in its own words; PRAGMA and CALL read the catalog (a setting is the lock's to refuse).
READING_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "SET", "CALL", "MULTI", "TRANSACTION"})
SANDBOX = "synestra sql is read-only and reads the store only: no files, network, extensions or settings"

SOURCES_SQL = """
SELECT source_id, path, format, rows, rejected, first_ts, last_ts, len(hosts) AS n_hosts, hosts
FROM sources ORDER BY source_id
"""

SOURCE_COLUMNS = ["source_id", "path", "format", "rows", "rejected", "first_ts", "last_ts", "n_hosts", "hosts"]


def fetch_dicts(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple[list[str], list[dict]]:
    cur = conn.execute(sql, params) if params is not None else conn.execute(sql)
    cols = [d[0] for d in cur.description]
    return cols, [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


def list_sources(conn: duckdb.DuckDBPyConnection) -> list[dict]:
    return fetch_dicts(conn, SOURCES_SQL)[1]


def _query_error(exc: duckdb.Error) -> SynestraError:
    """The query's own failure (exit 9), or what it met that is not the query's: the memory limit (exit
    10), a store damaged or unreadable (exit 8)."""
    if is_out_of_memory(exc):
        return OutOfMemoryError(out_of_memory_message(exc))
    damaged = as_store_error(exc)
    if damaged is not None:
        return damaged
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in text:
        text += f" ({SANDBOX})"
    return QueryError(f"query failed: {text}")


def _unique(names: list[str]) -> list[str]:
    """Column names made unique (SELECT 1 AS a, 2 AS a -> a, a_2): rows are keyed by name."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _reading(statement: duckdb.Statement) -> str:
    """The statement's text when it is of a kind that reads (READING_STATEMENTS), else QueryError."""
    kind = str(statement.type).rsplit(".", 1)[-1]
    if kind not in READING_STATEMENTS:
        verb = statement.query.strip().split(None, 1)[0].upper() if statement.query.strip() else kind
        raise QueryError(f"query refused: {verb} is not a query ({kind} statement); {SANDBOX}")
    return str(statement.query)


def stream_sql(
    conn: duckdb.DuckDBPyConnection, sql: str, batch_rows: int = BATCH_ROWS
) -> tuple[list[str], Iterator[list[dict]]]:
    """Run one query; its columns and its rows in batches, streamed from DuckDB as Arrow record batches.
    DuckDB errors, when the query starts or while it streams, become a one-line QueryError."""
    if not sql.strip():
        raise QueryError('empty query: give one SQL statement, e.g. synestra sql "SELECT * FROM sources"')
    try:
        statements = conn.extract_statements(sql)
        if not statements:
            raise QueryError('empty query: give one SQL statement, e.g. synestra sql "SELECT * FROM sources"')
        for statement in statements[:-1]:  # each checked as its turn comes, as DuckDB would run them
            conn.execute(_reading(statement)).fetchall()  # drained: DuckDB 2 refuses new work before
        rel = conn.sql(_reading(statements[-1]))  # a relation streams; a DB-API result would copy every row first
        if rel is None:  # a statement without a result (SET, CREATE TEMP ...)
            return [], iter(())
        cols = _unique(rel.columns)
        # DuckDB 2: to_arrow_reader; DuckDB 1.x: fetch_arrow_reader (the same streaming reader)
        reader = (getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader)(batch_rows)
    except duckdb.Error as exc:
        raise _query_error(exc) from exc

    def batches() -> Iterator[list[dict]]:
        try:
            for batch in reader:
                yield [
                    dict(zip(cols, row, strict=True))
                    for row in zip(*(c.to_pylist() for c in batch.columns), strict=True)
                ]
        except duckdb.Error as exc:
            raise _query_error(exc) from exc

    return cols, batches()


def run_sql(conn: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[dict]]:
    """Run one query and hold its whole result (small results; `stream_sql` for exports)."""
    cols, batches = stream_sql(conn, sql)
    return cols, [row for batch in batches for row in batch]
