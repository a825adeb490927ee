"""`synestra compact`: a lake's small parts and manifest compacted now (docs/lake.md)."""

from __future__ import annotations

import click

from synestra_cli.api.shared import plural
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import RETAIN_S, db_option, format_option
from synestra_cli.cli.render import dumps


@click.command("compact")
@db_option
@click.option(
    "--retain",
    type=RETAIN_S,
    default=None,
    help="Delete parts retired at least this many seconds ago (default $SYNESTRA_LAKE_RETAIN, else 3600).",
)
@format_option("table", "json")
@handle_errors
def command(db: str | None, retain: int | None, fmt: str) -> None:
    """Compact a lake: in each partition (a table, or a table's day and host bucket), every run of two
    or more small parts rewritten as one part, committed by one manifest checkpoint. Readers never
    wait and see the same rows before and after. The parts it replaces are deleted once retired for
    --retain seconds (a reader that opened the lake before may still read them); --retain 0 deletes
    them now, when no reader is running. `synestra ingest` compacts by itself once a partition holds
    8 small parts in a row; this is for an operator (after a bulk load, before other engines scan the
    folder). On a store file it applies the migrations the store lacks (a store written before the
    series layout has its samples rewritten by series once, resumable if stopped, with progress on a
    terminal), as `ingest` does before its first file. Exit 4 if another writer holds the lake. The
    report goes to stderr; with --format json, also to stdout (synestra.compact/1, docs/outputs.md).

    \b
    Example:
      synestra compact --db /data/synestra-lake/
      synestra compact --db s3://telemetry/synestra --retain 0
    """
    from synestra_cli.api.upkeep import compact
    from synestra_cli.cli.progress import progress_on_tty

    with progress_on_tty():  # a store file: the migrations it lacks (023 rewrites its samples, resumably)
        done = compact(db, retain)
    if done.migrated is not None:  # a store file
        applied = done.migrated
        click.echo(
            f"a store file: {'migrated (' + ', '.join(applied) + ')' if applied else 'up to date'}; "
            "nothing to compact (a lake is a folder or an s3:// URL)",
            err=True,
        )
    else:
        click.echo(
            f"compacted {plural(done.merged, 'part')} into {done.written} in {plural(done.partitions, 'partition')}; "
            f"{done.deleted} retired {'part' if done.deleted == 1 else 'parts'} deleted; "
            f"manifest: {done.checkpoint or 'unchanged'}",
            err=True,
        )
    if fmt == "json":
        click.echo(dumps(done.to_json()))
