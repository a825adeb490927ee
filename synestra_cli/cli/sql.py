"""`synestra sql`: a read-only query for runbooks."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import write_batches
from synestra_cli.query.inspect import stream_sql
from synestra_cli.store import open_store


@click.command("sql")
@click.argument("query")
@db_option
@format_option("table", "csv", "json", "jsonl")
@handle_errors
def command(query, db, fmt) -> None:
    """Run a read-only SQL QUERY against the store (tables: docs/data-model.md).

    The query reads the store and nothing else: no other file (ATTACH, COPY, read_csv), no network,
    no extension, no setting. Results stream: csv and jsonl exports of any size run in bounded
    memory. --format json is the query's rows as a list of objects, named by its columns (the one
    JSON output without a schema id: its shape is the query's). Exit 9 if the query fails.

    \b
    Example:
      synestra sql "SELECT host, count(*) FROM events WHERE kind = 'xid' GROUP BY host"
      synestra sql "SELECT * FROM metrics WHERE host = 'gpu-004'" --format csv > gpu-004.csv
    """
    from synestra_cli import settings
    from synestra_cli.cli import main
    from synestra_cli.store.session import MEMORY_LIMIT

    if main.OWN_PROCESS:
        # anyone's query: the process's data held to the budget, so that one huge value DuckDB allocates
        # outside its pool is its out-of-memory (exit 10), not twice the budget
        settings.bound_process_data(settings.memory_budget_bytes(MEMORY_LIMIT))
    with open_store(db, locked=True) as conn:
        columns, batches = stream_sql(conn, query)
        write_batches(batches, columns, fmt)
