"""The store toolkit: what every module reading or writing the store does the same way.

- one row, one value: ``fetch_one`` (a row or None), ``one_row`` (the row an aggregate always returns),
  ``scalar`` (its first column). DuckDB 2 refuses new work on a connection while a result is unfinished:
  each drains its result;
- an Arrow table readable by name for a few statements: ``registered`` (unregistered after, even on
  error). Inside a file's transaction prefer DuckDB's replacement scan of a local variable: a
  registered table stays in memory until COMMIT;
- rows into a temp table in one statement: ``temp_table`` (columns of Python values) and ``insert_rows``
  (tuples into a table already made);
- temp tables a step staged: ``drop_temp``;
- identifiers that cannot be parameters: ``quote_ident``;
- all of it or nothing: ``transaction``;
- long statements live in ``.sql`` files beside their module: ``sql_file``.
A list is bound as one parameter: ``list_contains(?, col)`` to filter by a few values, ``col IN (SELECT
unnest(?))`` to filter a view by many (a hash semi-join: the jobs of a fleet's tax-report), and
``unnest(?::T[])`` for rows (``temp_table``); only where a scan of a big table should prune row groups on
it, ``col IN (?, ?, ...)`` of constants (``placeholders``), as fleet/scan.py and signals/ do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:  # only a type here: importing pyarrow costs ~0.13 CPU s of every command's start-up
    import pyarrow as pa


def fetch_one(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple[Any, ...] | None:
    rows = conn.execute(sql, params).fetchall() if params is not None else conn.execute(sql).fetchall()
    return rows[0] if rows else None


def one_row(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> tuple[Any, ...]:
    """The one row a query returns (an aggregate without GROUP BY always returns one); drains the result."""
    row = fetch_one(conn, sql, params)
    if row is None:
        raise LookupError(f"query returned no row: {sql.strip()[:60]}")
    return row


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: Any = None) -> Any:
    """The first column of the one row a query returns (aggregates, sequences); drains the result."""
    return one_row(conn, sql, params)[0]


@contextmanager
def registered(conn: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> Iterator[None]:
    """`table` readable as the view `name` inside the block; unregistered after, whatever happens."""
    conn.register(name, table)
    try:
        yield
    finally:
        conn.unregister(name)


def drop_temp(conn: duckdb.DuckDBPyConnection, tables: Iterable[str], views: Iterable[str] = ()) -> None:
    """Drop these temp views and tables if they exist (fixed internal names, never user input). On a
    failure the file's rollback drops them anyway: this is for the path that commits."""
    statements = [f"DROP VIEW IF EXISTS {quote_ident(v)}" for v in views]
    statements += [f"DROP TABLE IF EXISTS {quote_ident(t)}" for t in tables]
    conn.execute("; ".join(statements))


def placeholders(n: int) -> str:
    """`?, ?, ?` for an IN list of n bound values (the values themselves are always parameters)."""
    return ", ".join("?" * n) if n else "NULL"


def temp_table(conn: duckdb.DuckDBPyConnection, name: str, columns: dict[str, tuple[str, list[Any]]]) -> None:
    """A temp table `name` from columns of Python values ({column: (SQL type, values)}), in one statement.
    Lists bound as parameters, not a registered Arrow table: DuckDB's `register` imports pandas, half a
    second of a warm tax-report. `name` and the columns are the caller's own, never user input."""
    cols = ", ".join(f"unnest(?::{sql_type}[]) AS {quote_ident(col)}" for col, (sql_type, _) in columns.items())
    conn.execute(
        f"CREATE OR REPLACE TEMP TABLE {quote_ident(name)} AS SELECT {cols}", [values for _, values in columns.values()]
    )


def insert_rows(conn: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    """Insert rows into a temp table in one statement (executemany pays a round trip per row).
    `table` is the caller's own temp table, never user input; values are parameters."""
    if rows:
        one = "(" + ", ".join("?" * len(rows[0])) + ")"
        values = ", ".join([one] * len(rows))
        conn.execute(f"INSERT INTO {quote_ident(table)} VALUES {values}", [v for r in rows for v in r])


def sql_file(package: str | None, name: str) -> str:
    """The text of a .sql file shipped in `package` (pyproject's package-data includes every *.sql)."""
    if package is None:
        raise ValueError(f"{name}: no package to read it from")
    return resources.files(package).joinpath(name).read_text(encoding="utf-8")


HAS_TABLE_SQL = """
SELECT count(*) FROM duckdb_tables()
WHERE database_name = CASE WHEN $temporary THEN 'temp' ELSE current_database() END AND schema_name = 'main'
  AND table_name = $name
"""


def has_table(conn: duckdb.DuckDBPyConnection, name: str, temporary: bool = False) -> bool:
    """Whether the connection's current database has this table (a store not migrated yet lacks some;
    a lake reader's tables are temporary): the one way every module asks."""
    return bool(scalar(conn, HAS_TABLE_SQL, {"name": name, "temporary": temporary}))


def quote_ident(name: str) -> str:
    """The one quoting helper for identifiers that cannot be parameters."""
    return '"' + name.replace('"', '""') + '"'


def quote_literal(text: str | Path) -> str:
    """A string literal where DuckDB takes no parameter (the file of ATTACH, the target of COPY ... TO):
    a path holding a quote stays one literal."""
    return "'" + str(text).replace("'", "''") + "'"


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
