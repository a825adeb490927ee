"""`synestra explain`: classify and attribute every checkpoint of a job (library: synestra_cli.explain)."""

from __future__ import annotations

import os
from datetime import datetime

import click

from synestra_cli.cli.common import check_window, db_option, format_option, handle_errors

# DuckDB's buffer pool for one job's explanation (SYNESTRA_MEMORY_LIMIT overrides it, as everywhere).
ONE_JOB_MEMORY_LIMIT = "384MB"
# ISO-8601 as explain prints it (with Z) or without; always read as UTC.
UTC_TIME = click.DateTime(
    ["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%dT%H:%M:%S.%fZ"]
)


@click.command("explain")
@click.option("--job", "job_id", help="Job id (sacct JobID, as `synestra jobs` lists it).")
@click.option("--checkpoint", type=int, help="Only the checkpoint(s) at this iteration.")
@click.option("--since", type=UTC_TIME, help="Only checkpoints from this UTC time.")
@click.option("--until", type=UTC_TIME, help="Only checkpoints up to this UTC time.")
@click.option("--all", "all_jobs", is_flag=True, help="Every job with checkpoints in the window.")
@click.option(
    "--tax",
    "with_tax",
    is_flag=True,
    help="Add each checkpoint's cost and the job's checkpoint tax (as tax-report computes it).",
)
@db_option
@format_option("table", "json", "jsonl", "markdown")
@handle_errors
def command(
    job_id: str | None,
    checkpoint: int | None,
    since: datetime | None,
    until: datetime | None,
    all_jobs: bool,
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
    Exit codes: 0 explained, 5 unknown job or checkpoint, 6 store without jobs.
    JSON schema: synestra.explain/2 (docs/explain.md).

    \b
    Examples:
      synestra explain --job 1001
      synestra explain --job 1001 --checkpoint 4350 --format json | jq '.checkpoints[0].cause'
      synestra explain --all --since 2026-03-01T00:00:00 --format jsonl
      synestra explain --job 1003 --checkpoint 1950 --format markdown > ticket.md
    """
    if bool(job_id) == all_jobs:
        raise click.UsageError("give either --job ID or --all")
    check_window(since, until)
    from synestra_cli.explain.api import explain_each, explain_job, jobs_in_window
    from synestra_cli.store import open_store
    from synestra_cli.store.lake import narrow_to_job

    if fmt == "markdown":
        return _markdown(db, job_id, checkpoint, since, until, all_jobs)
    explain = explain_job
    if with_tax:  # lazily: tax-report's buckets cost ~0.4 s more (pyarrow, bucket queries)
        from synestra_cli.accounting.checkpoint_tax import explain_with_tax

        explain = explain_with_tax
    with open_store(db, read_only=True) as conn:
        from synestra_cli.clusters import resolve_job

        if not all_jobs and "SYNESTRA_MEMORY_LIMIT" not in os.environ:
            # One explanation reads each block of its hosts once: cached, they would only swell the RSS
            # (a 256-host job: ~950 MB at the store's 1 GB limit, ~480 MB at this one, same speed).
            conn.execute("SET memory_limit = ?", [ONE_JOB_MEMORY_LIMIT])
        ids = jobs_in_window(conn, since, until) if all_jobs else [resolve_job(conn, str(job_id))]
        if not all_jobs:  # on a lake, read only the job's partitions (a store file: nothing changes)
            narrow_to_job(conn, ids[0])
        docs = explain_each(conn, ids, lambda c, j: explain(c, j, checkpoint, since, until))
    _render(docs, fmt, all_jobs)


def _markdown(
    db, job_id: str | None, checkpoint: int | None, since: datetime | None, until: datetime | None, all_jobs: bool
) -> None:
    """Whole jobs explained with their tax, so that a ticket for one checkpoint still carries its cost;
    then only the checkpoints asked for."""
    from synestra_cli.accounting.checkpoint_tax import explain_with_tax
    from synestra_cli.clusters import resolve_job
    from synestra_cli.explain.api import explain_each, jobs_in_window, select
    from synestra_cli.explain.markdown import job_markdown
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        ids = jobs_in_window(conn, since, until) if all_jobs else [resolve_job(conn, str(job_id))]
        docs = explain_each(conn, ids, explain_with_tax)
    filtered = checkpoint is not None or since is not None or until is not None
    for d in docs:
        cps = select(d, checkpoint, since, until) if filtered else None
        click.echo(job_markdown(d, cps))


def _render(docs: list, fmt: str, many: bool) -> None:
    from synestra_cli.cli.render import dumps

    if fmt == "jsonl":
        for d in docs:
            click.echo(dumps(d.to_json()))
    elif fmt == "json":
        click.echo(dumps([d.to_json() for d in docs] if many else docs[0].to_json()))
    else:
        from synestra_cli.cli.explain_view import render_job
        from synestra_cli.cli.render import console

        out = console()
        for d in docs:
            render_job(out, d)
