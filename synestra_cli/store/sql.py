"""Small query helpers. DuckDB 2 refuses new work on a connection while a result is unfinished,
so single-row reads go through fetch_one, which drains the result."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import duckdb


def fetch_one(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple[Any, ...] | None:
    rows = conn.execute(sql, params).fetchall() if params is not None else conn.execute(sql).fetchall()
    return rows[0] if rows else None


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> Any:
    """The first column of the one row a query returns (aggregates, sequences); drains the result."""
    row = fetch_one(conn, sql, params)
    if row is None:
        raise LookupError(f"query returned no row: {sql.strip()[:60]}")
    return row[0]


def quote_ident(name: str) -> str:
    """The one quoting helper for identifiers that cannot be parameters."""
    return '"' + name.replace('"', '""') + '"'


@contextmanager
def transaction(conn: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """BEGIN ... COMMIT, or ROLLBACK on any exception (then re-raised): all of it or nothing."""
    conn.execute("BEGIN TRANSACTION")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        with suppress(duckdb.TransactionException):  # a COMMIT that failed has already ended it
            conn.execute("ROLLBACK")
        raise
