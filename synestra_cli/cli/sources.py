"""`synestra sources`: what is in the store."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import dumps, render_rows
from synestra_cli.query.inspect import SOURCE_COLUMNS, list_sources
from synestra_cli.shown import path
from synestra_cli.store import open_store

SCHEMA = "synestra.sources/1"
# At 80 columns these give way, in this order; source_id (what `forget` takes) and the path never do.
DROP_FIRST = ["hosts", "n_hosts", "last_ts", "first_ts", "rejected"]


@click.command("sources")
@db_option
@format_option("table", "csv", "json")
@handle_errors
def command(db, fmt) -> None:
    """List ingested files: format, rows, rejected lines, time span, hosts.

    JSON schema: synestra.sources/1 (docs/formats.md).

    \b
    Example:
      synestra sources --format json | jq '.sources[] | select(.rejected > 0)'
      synestra sources --format csv | column -s, -t | less -S
    """
    with open_store(db, read_only=True) as conn:
        rows = list_sources(conn)
    if fmt == "json":
        click.echo(dumps({"schema": SCHEMA, "sources": [{c: r.get(c) for c in SOURCE_COLUMNS} for r in rows]}))
    else:
        if fmt == "table":  # a person reads the path from where they are; csv keeps the store's own
            rows = [{**r, "path": path(r.get("path"))} for r in rows]
        render_rows(rows, SOURCE_COLUMNS, fmt, title="sources", drop_first=DROP_FIRST)
