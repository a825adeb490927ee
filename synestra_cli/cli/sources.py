"""`synestra sources`: what is in the store."""

from __future__ import annotations

import click

from synestra_cli.cli.common import db_option, format_option, handle_errors
from synestra_cli.cli.render import render_rows
from synestra_cli.inspect import SOURCE_COLUMNS, list_sources
from synestra_cli.store import open_store


@click.command("sources")
@db_option
@format_option("table", "csv", "json")
@handle_errors
def command(db, fmt) -> None:
    """List ingested files: format, rows, rejected lines, time span, hosts.

    \b
    Example:
      synestra sources --format json | jq '.[] | select(.rejected > 0)'
    """
    with open_store(db, read_only=True) as conn:
        render_rows(list_sources(conn), SOURCE_COLUMNS, fmt, title="sources")
