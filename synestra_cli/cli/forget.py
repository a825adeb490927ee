"""`synestra forget SOURCE...`: remove sources and every row they wrote."""

from __future__ import annotations

import click

from synestra_cli.api.shared import plural
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import dumps, render_rows


@click.command("forget")
@click.argument("sources", nargs=-1, required=True)
@db_option
@format_option("table", "json", "csv", json_alias=True)
@handle_errors
def command(sources: tuple[str, ...], db: str | None, fmt: str) -> None:
    """Remove sources, by id or by path as `synestra sources` lists them, and every row they wrote,
    in one transaction (all of them or none). A path names every source read from it.

    Use it to correct a load: forget a file read with the wrong --timezone, --host, --job or --input-format,
    then ingest it again with the right one. Exit 5 if a SOURCE is not in the store.
    The report goes to stderr; with --format json or csv, what was removed also goes to stdout
    (JSON schema synestra.forget/1, docs/formats.md).

    \b
    Example:
      synestra forget 12 13
      synestra forget /var/export/dmesg.txt && synestra ingest /var/export/dmesg.txt --host gpu-017
    """
    from synestra_cli.api.upkeep import forget

    result = forget(sources, db)  # a lake: one manifest entry removes them (docs/lake.md)
    removed, rows = result.removed, result.rows
    for source_id, source_path, source_format, n in removed:
        click.echo(f"forgot source {source_id}: {source_path} ({source_format}, {plural(n, 'row')})", err=True)
    click.echo(f"total: {plural(len(removed), 'source')} forgotten, {plural(rows, 'row')} removed", err=True)
    records = result.records
    if fmt == "json":
        click.echo(dumps(result.to_json()))
    elif fmt == "csv":
        render_rows(records, ["source_id", "path", "format", "rows"], "csv")
