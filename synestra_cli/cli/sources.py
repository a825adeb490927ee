"""`synestra sources`: what is in the store."""

from __future__ import annotations

import click

from synestra_cli.api.shared import path
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import dumps, render_rows

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
    from synestra_cli.api.upkeep import sources

    table = sources(db)
    if fmt == "json":
        click.echo(dumps(table.to_json()))
    else:
        rows = table.rows
        if fmt == "table":  # a person reads the path from where they are; csv keeps the store's own
            rows = [{**r, "path": path(r.get("path"))} for r in rows]
        render_rows(rows, table.columns, fmt, title="sources", drop_first=DROP_FIRST)
