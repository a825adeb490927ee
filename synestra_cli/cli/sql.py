"""`synestra sql`: a read-only query for runbooks."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import write_batches


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
    from synestra_cli.api import upkeep
    from synestra_cli.cli import main

    if main.OWN_PROCESS:  # not in a test's or a notebook's process
        upkeep.hold_process_to_budget()
    with upkeep.query(query, db) as (columns, batches):
        write_batches(batches, columns, fmt)
