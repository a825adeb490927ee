"""`synestra timeline`: a job's attempts, checkpoints, slowdowns and causes as a picture."""

from __future__ import annotations

from pathlib import Path

import click

from synestra_cli.cli.common import handle_errors, output_file
from synestra_cli.cli.options import OUTPUT_FILE, db_option


@click.command("timeline")
@click.option("--job", "job_id", required=True, help="Job id (as `synestra jobs` lists it).")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=OUTPUT_FILE,
    help="File to write: .html (self-contained, the default for other names), .svg or .png.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "svg", "png"]),
    help="What to write (default: by the suffix of --output, html for any other).",
)
@db_option
@handle_errors
def command(job_id: str, output: Path, fmt: str | None, db: str | None) -> None:
    """Draw a job's timeline: one lane per attempt with its state, checkpoints as ticks (non-routine ones
    coloured by trigger), degradation windows shaded, each cause's first signal marked and labelled, the
    step time, and each cause's key signals, on one time axis (UTC).

    \b
    The HTML page inlines its Vega libraries: it opens without a network.
    Exit codes: 0 written, 5 unknown job, 6 store without jobs.

    \b
    Examples:
      synestra timeline --job 1003 -o job-1003.html
      synestra timeline --job 1003 -o job-1003.png
    """
    from synestra_cli.cli.timeline_chart import write
    from synestra_cli.clusters import resolve_job
    from synestra_cli.explain.timeline import build
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        tl = build(conn, resolve_job(conn, job_id))
    with output_file(output):
        fmt = write(tl, output, fmt)
    click.echo(
        f"{output}: {fmt} timeline of job {job_id}, {len(tl.job.checkpoints)} checkpoint(s), {len(tl.causes)} cause(s)",
        err=True,
    )
