"""`synestra formats`: the input formats Synestra recognises."""

from __future__ import annotations

import click

from synestra_cli.cli.common import format_option
from synestra_cli.cli.render import render_rows
from synestra_cli.formats import all_formats


@click.command("formats")
@format_option("table", "csv", "json")
def command(fmt) -> None:
    """List the input formats (names usable with `ingest --format NAME`).

    \b
    Example:
      synestra formats
    """
    rows = [{"name": name, "description": fmt.description} for name, fmt in sorted(all_formats().items())]
    render_rows(rows, ["name", "description"], fmt, title="formats")
