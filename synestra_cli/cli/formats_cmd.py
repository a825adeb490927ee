"""`synestra formats`: the input formats Synestra recognises."""

from __future__ import annotations

import click

from synestra_cli.api.catalog import FORMATS_SCHEMA, formats
from synestra_cli.cli.options import format_option
from synestra_cli.cli.render import dumps, render_rows


@click.command("formats")
@format_option("table", "csv", "json")
def command(fmt) -> None:
    """List the input formats (names usable with `ingest --input-format NAME`).

    JSON schema: synestra.formats/1 (docs/formats.md).

    \b
    Example:
      synestra formats
    """
    rows = [{"name": name, "description": text} for name, text in formats().items()]
    if fmt == "json":
        click.echo(dumps({"schema": FORMATS_SCHEMA, "formats": rows}))
    else:
        render_rows(rows, ["name", "description"], fmt, title="formats")
