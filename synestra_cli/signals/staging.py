"""Handles of the temporary tables that pass data from one step of a read to the next.

A detector's read is a chain of statements over DuckDB temp tables (one job's candidates, their samples,
their rates; the same for a fleet). The tables stay in DuckDB, where the next statement joins them without
a copy; what a step writes and what it reads is said by its signature: a step that creates a table returns
its `TempTable`, a step that reads one takes it as a parameter and puts its name into its SQL with
`staged_sql`, instead of a name written inside the SQL text. A reader of `anomalies(conn, samples, ...)`
sees where its samples come from (`stage_scope`), and a test can ask a handle for its rows.

The names are the code's own identifiers, never user input: they go into the SQL text as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

_NAME = re.compile(r"_[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class TempTable:
    """A temp table one step writes and later steps read: its name and the columns a reader may use."""

    name: str
    columns: tuple[str, ...]

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):  # a name goes into SQL text unquoted
            raise ValueError(f"not a temp table name: {self.name!r}")

    def __str__(self) -> str:
        return self.name

    def rows(self, conn: duckdb.DuckDBPyConnection) -> int:
        row = conn.execute(f"SELECT count(*) FROM temp.{self.name}").fetchone()
        return int(row[0]) if row else 0

    def drop(self, conn: duckdb.DuckDBPyConnection) -> None:
        conn.execute(f"DROP TABLE IF EXISTS temp.{self.name}")


def staged_sql(template: str, **tables: TempTable) -> str:
    """`template` with each `{key}` of `tables` replaced by that table's name. Other braces stay as they
    are (placeholders filled later, such as `{spans}`, and DuckDB's struct literals), so the text may be
    an f-string's result; a key the template does not hold is an error (a handle passed for nothing)."""
    for key, table in tables.items():
        marker = "{" + key + "}"
        if marker not in template:
            raise ValueError(f"the SQL reads no table {marker}")
        template = template.replace(marker, table.name)
    return template
