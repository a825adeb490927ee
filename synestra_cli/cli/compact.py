"""`synestra compact`: a lake's small parts and manifest compacted now (docs/lake.md)."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option
from synestra_cli.errors import InputError
from synestra_cli.store.lake import lake_target


@click.command("compact")
@db_option
@click.option(
    "--retain",
    type=click.IntRange(min=0),
    default=None,
    help="Delete parts retired at least this many seconds ago (default $SYNESTRA_LAKE_RETAIN, else 3600).",
)
@handle_errors
def command(db: str | None, retain: int | None) -> None:
    """Compact a lake: in each partition (a table, or a table's day and host bucket), every run of two
    or more small parts rewritten as one part, committed by one manifest checkpoint. Readers never
    wait and see the same rows before and after. The parts it replaces are deleted once retired for
    --retain seconds (a reader that opened the lake before may still read them); --retain 0 deletes
    them now, when no reader is running. `synestra ingest` compacts by itself once a partition holds
    8 small parts in a row; this is for an operator (after a bulk load, before other engines scan the
    folder). Exit 4 if another writer holds the lake.

    \b
    Example:
      synestra compact --db /data/synestra-lake/
      synestra compact --db s3://telemetry/synestra --retain 0
    """
    target = lake_target(db)
    if target is None:
        raise InputError("compact works on a lake (--db FOLDER/ or s3://...); a store file needs no compaction")
    from synestra_cli.store.lake_writer import compact

    done = compact(target, retain)
    click.echo(
        f"compacted {done.merged} part(s) into {done.written} in {done.partitions} partition(s); "
        f"{done.deleted} retired part(s) deleted; manifest: {done.checkpoint or 'unchanged'}",
        err=True,
    )
