"""`synestra timeline`: a job's attempts, checkpoints, slowdowns and causes as a picture."""

from __future__ import annotations

from pathlib import Path

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option
from synestra_cli.cli.output import OUTPUT_TARGET

SUFFIXES = {".html": "html", ".htm": "html", ".svg": "svg", ".png": "png"}


@click.command("timeline")
@click.option("--job", "job_id", required=True, help="Job id (as `synestra jobs` lists it).")
@click.option(
    "-o",
    "--output",
    "output",
    required=True,
    type=OUTPUT_TARGET,
    help="File to write: .html (self-contained, as wide as the window), .svg or .png; - for stdout (HTML, "
    "or --format).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "svg", "png"]),
    help="What to write (default: by the suffix of --output; another suffix is refused).",
)
@db_option
@handle_errors
def command(job_id: str, output: Path, fmt: str | None, db: str | None) -> None:
    """Draw a job's timeline, a picture that stands alone: its title and headline (job, verdict, action,
    checkpoint tax), where the time went (every tax bucket as a span: save, restore, start-up, lost work,
    hang, requeue, degraded), the causes' events as marks with each cause's first signal labelled, one
    lane per attempt with its checkpoints as ticks, the step time, and each cause's key signals, on one
    time axis (UTC), with a legend.

    \b
    The HTML page inlines its Vega libraries: it opens without a network, as wide as the window.
    On a terminal, a spinner on stderr while it explains and draws.
    Exit codes: 0 written, 2 unknown extension or unwritable path, 5 unknown job, 6 store without jobs.

    \b
    Examples:
      synestra timeline --job 1003 -o job-1003.html
      synestra timeline --job 1003 -o job-1003.png
      synestra timeline --job 1003 -o - --format svg > job-1003.svg
    """
    from synestra_cli.api.views import timeline
    from synestra_cli.cli import output as out
    from synestra_cli.cli.progress import status_on_tty
    from synestra_cli.cli.timeline_chart import render

    fmt = out.format_of(output, fmt, SUFFIXES)
    with status_on_tty(f"explaining job {job_id}") as status:
        tl = timeline(job_id, db)
        status(f"drawing the {fmt.upper()} picture of job {job_id}")
        data = render(tl, fmt)
    out.write(output, data)
    n, c = len(tl.job.checkpoints), len(tl.causes)
    click.echo(
        f"{out.shown(output)}: {fmt} timeline of job {job_id}, {n} checkpoint{'' if n == 1 else 's'}, "
        f"{c} cause{'' if c == 1 else 's'}",
        err=True,
    )
