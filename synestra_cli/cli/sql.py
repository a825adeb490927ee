"""`synestra sql`: a read-only query for runbooks."""

from __future__ import annotations

import click

from synestra_cli.cli.common import db_option, format_option, handle_errors
from synestra_cli.cli.render import render_rows
from synestra_cli.inspect import run_sql
from synestra_cli.store import open_store


@click.command("sql")
@click.argument("query")
@db_option
@format_option("table", "csv", "json", "jsonl")
@handle_errors
def command(query, db, fmt) -> None:
    """Run a read-only SQL QUERY against the store (tables: docs/data-model.md).

    \b
    Example:
      synestra sql "SELECT host, count(*) FROM events WHERE kind = 'xid' GROUP BY host"
    """
    with open_store(db, read_only=True) as conn:
        columns, rows = run_sql(conn, query)
    render_rows(rows, columns, fmt)
