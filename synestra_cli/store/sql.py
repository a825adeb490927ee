"""Small query helpers. DuckDB 2 refuses new work on a connection while a result is unfinished,
so single-row reads go through fetch_one, which drains the result."""

from __future__ import annotations

from typing import Any

import duckdb


def fetch_one(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple | None:
    rows = conn.execute(sql, params).fetchall() if params is not None else conn.execute(sql).fetchall()
    return rows[0] if rows else None


def quote_ident(name: str) -> str:
    """The one quoting helper for identifiers that cannot be parameters."""
    return '"' + name.replace('"', '""') + '"'
