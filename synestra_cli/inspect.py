"""Looking inside the store: the sources listing and read-only SQL for runbooks."""

from __future__ import annotations

from typing import Any

import duckdb

from synestra_cli.errors import InputError

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


def run_sql(conn: duckdb.DuckDBPyConnection, sql: str) -> tuple[list[str], list[dict]]:
    """Run one query on a read-only connection; DuckDB errors become a one-line InputError."""
    try:
        return fetch_dicts(conn, sql)
    except duckdb.Error as exc:
        raise InputError(f"query failed: {str(exc).splitlines()[0]}") from exc
