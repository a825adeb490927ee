"""`synestra check`: is the store whole (store/check.py)?"""

from __future__ import annotations

import sys

import click

from synestra_cli.api.shared import ExitCode
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option
from synestra_cli.cli.render import dumps, printable


@click.command("check")
@db_option
@format_option("table", "json")
@handle_errors
def command(db: str | None, fmt: str) -> None:
    """Check that the store is whole. A store file is read whole, every table and column (DuckDB verifies
    each block's checksum as it reads it). A lake's every part is checked against its manifest entry:
    there, the size it was written with, and the sha256 of its bytes (for a part written before
    checksums, the rows its Parquet footer says). A reader already refuses a part of the wrong size by
    name; this also finds one changed in place. Exit 0 whole, 8 damaged (each damaged part listed, with
    its source: restore it, or `synestra forget` the source and ingest the file again), 6 no store.
    JSON schema: synestra.check/1 (docs/outputs.md).

    \b
    Example:
      synestra check --db /data/synestra-lake/
      synestra check --format json | jq '.damaged'
    """
    from synestra_cli.api.upkeep import check

    report = check(db)
    doc = report.to_json()
    if fmt == "json":
        click.echo(dumps(doc))
    for d in report.damaged:
        owner = f" (source {d.source_id})" if d.source_id is not None else " (a compacted part)"
        click.echo(f"damaged: {printable(d.path)}{owner}: {d.problem}", err=True)
    if report.kind == "lake":
        summary = f"{report.parts} part(s), {report.bytes:,} bytes"
    else:
        summary = f"{len(report.tables)} table(s), {sum(report.tables.values()):,} rows read"
    verdict = "whole" if report.ok else f"{len(report.damaged)} part(s) damaged"
    click.echo(f"{printable(report.store)}: {report.kind}, {summary}: {verdict}", err=True)
    if not report.ok:
        sys.exit(int(ExitCode.STORE))
