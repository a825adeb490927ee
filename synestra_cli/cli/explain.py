"""`synestra explain`: classify and attribute every checkpoint of a job (library: synestra_cli.explain)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import (
    ITERATION,
    UTC_TIME,  # noqa: F401  (fleet and risks imported it from here)
    db_option,
    format_option,
    host_option,
    job_option,
    refuse_together,
    require_one,
    window_options,
)

if TYPE_CHECKING:
    from synestra_cli.api.explanations import ExplainResult

CSV_COLUMNS = [
    "job",
    "attempt",
    "iteration",
    "kind",
    "trigger",
    "slow",
    "start",
    "end",
    "duration_s",
    "cause",
    "host",
    "component",
    "confidence",
    "reported_healthy",
    "action",
    "alternatives",
]
TAX_CSV_COLUMNS = ["tax_s", "tax_gpu_hours"]


@click.command("explain")
@job_option()
@click.option("--checkpoint", type=ITERATION, help="Only the checkpoint(s) at this iteration (of one job).")
@window_options("checkpoints")
@click.option("--all", "all_jobs", is_flag=True, help="Every job with checkpoints in the window.")
@host_option("jobs")
@click.option(
    "--tax",
    "with_tax",
    is_flag=True,
    help="Add each checkpoint's cost and the job's checkpoint tax (as tax-report computes it).",
)
@db_option
@format_option("table", "json", "jsonl", "csv", "markdown")
@handle_errors
def command(
    jobs: tuple[str, ...],
    checkpoint: int | None,
    since: datetime | None,
    until: datetime | None,
    all_jobs: bool,
    hosts: tuple[str, ...],
    with_tax: bool,
    db,
    fmt: str,
) -> None:
    """Explain every checkpoint of a job: routine, reactive, restart, preemption or final, and for
    the non-routine ones the root cause, its causal chain with evidence, and ranked alternatives.

    \b
    With --tax each checkpoint also carries its cost and the badput charged through its cause, and
    the job ends with its checkpoint-tax summary (whole-job views only).
    --format markdown writes a ticket to paste into an issue tracker: verdict, action, assets,
    the chain with file:line, the alternatives with their evidence, and the cost (tax included).
    --format csv writes one row per checkpoint (cause, confidence, action, alternatives).
    A whole job's explanation is kept in the store and reused until an ingest or forget changes it
    (SYNESTRA_KEPT=0: compute every time; docs/explain.md "Kept explanations").
    Exit codes: 0 explained, 5 unknown job or checkpoint, 6 store without jobs.
    JSON schema: synestra.explain/3 (docs/explain.md); one document, or a list of them for several jobs.

    \b
    Examples:
      synestra explain --job 1001
      synestra explain --job 1003 --checkpoint 1802 --format json | jq '.checkpoints[0].cause'
      synestra explain --all --since 24h --format jsonl
      synestra explain --all --host gpu-002 --format csv
      synestra explain --job 1003 --checkpoint 1950 --format markdown > ticket.md
    """
    require_one({"--job": jobs, "--all": all_jobs})
    if checkpoint is not None and (all_jobs or len(jobs) > 1):
        refuse_together({"--checkpoint": checkpoint, "--all" if all_jobs else "several --job": True})
    from synestra_cli.api.explanations import explain_jobs
    from synestra_cli.cli.progress import progress_on_tty

    # markdown: whole jobs explained with their tax, so that a ticket for one checkpoint still carries
    # its cost (then only the checkpoints asked for are written).
    markdown = fmt == "markdown"
    result = explain_jobs(
        db,
        jobs=jobs,
        all_jobs=all_jobs,
        hosts=hosts,
        checkpoint=None if markdown else checkpoint,
        since=None if markdown else since,
        until=None if markdown else until,
        tax=with_tax or markdown,
        long_steps=progress_on_tty,
    )
    if markdown:
        for ticket in result.to_markdown(checkpoint, since, until):
            click.echo(ticket)
    else:
        _render(result, fmt)


def csv_rows(docs: list) -> list[dict]:
    """One row per checkpoint, every cell a scalar (alternatives joined with spaces)."""
    rows = []
    for d in docs:
        for cp in d.checkpoints:
            c = cp.cause
            rows.append(
                {
                    "job": d.job,
                    "attempt": cp.attempt,
                    "iteration": cp.iteration,
                    "kind": cp.kind,
                    "trigger": cp.trigger,
                    "slow": cp.slow,
                    "start": cp.start,
                    "end": cp.end,
                    "duration_s": cp.duration_s,
                    "cause": c.category if c else None,
                    "host": c.host if c else None,
                    "component": c.component if c else None,
                    "confidence": round(c.confidence, 3) if c else None,
                    "reported_healthy": c.reported_healthy if c else None,
                    "action": c.action["text"] if c and c.action else None,
                    "alternatives": [a.category for a in cp.alternatives],
                    "tax_s": cp.tax["seconds"] if cp.tax else None,
                    "tax_gpu_hours": round(cp.tax["gpu_hours"], 4) if cp.tax else None,
                }
            )
    return rows


def _render(result: ExplainResult, fmt: str) -> None:
    from synestra_cli.cli.render import dumps

    docs = result.explanations

    if fmt == "jsonl":
        for d in docs:
            click.echo(dumps(d.to_json()))
    elif fmt == "json":
        click.echo(dumps(result.to_json()))
    elif fmt == "csv":
        from synestra_cli.cli.render import render_rows

        taxed = any(d.tax for d in docs)
        render_rows(csv_rows(docs), CSV_COLUMNS + (TAX_CSV_COLUMNS if taxed else []), "csv")
    else:
        from synestra_cli.cli.explain_view import render_job
        from synestra_cli.cli.render import console

        out = console()
        for d in docs:
            render_job(out, d)
