"""`synestra explain`: classify and attribute every checkpoint of a job (library: synestra_cli.explain)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

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

# DuckDB's buffer pool for one job's explanation (SYNESTRA_MEMORY_LIMIT overrides it, as everywhere).
ONE_JOB_MEMORY_LIMIT = "384MB"
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
    from synestra_cli import settings
    from synestra_cli.explain.explanation import JobExplanation
    from synestra_cli.explain.job import explain_job

    explain: Callable[..., JobExplanation] = explain_job
    if with_tax or fmt == "markdown":
        # markdown: whole jobs explained with their tax, so that a ticket for one checkpoint still
        # carries its cost (then only the checkpoints asked for are written). Lazily: tax-report's
        # buckets cost ~0.4 s more (pyarrow, bucket queries).
        from synestra_cli.accounting.checkpoint_tax import explain_with_tax

        explain = explain_with_tax
    window = (checkpoint, since, until) if fmt != "markdown" else (None, None, None)
    from synestra_cli.cli.progress import progress_on_tty
    from synestra_cli.explain.job import explain_each
    from synestra_cli.store import open_store
    from synestra_cli.store.connect import may_be_lake

    # Whole jobs, as tax-report and `ingest --explain` keep them: a kept explanation is reused, a computed
    # one kept (explain/memo.py). A view of one checkpoint or a time window reads only its own telemetry.
    reuse = explain is explain_job and window == (None, None, None) and settings.reuse_kept()
    computed: list[JobExplanation] = []
    with open_store(db, read_only=True) as conn:
        if len(jobs) == 1 and "SYNESTRA_MEMORY_LIMIT" not in os.environ:
            # One explanation reads each block of its hosts once: cached, they would only swell the RSS
            # (a 256-host job: ~950 MB at the store's 1 GB limit, ~480 MB at this one, same speed).
            conn.execute("SET memory_limit = ?", [ONE_JOB_MEMORY_LIMIT])
        ids = selected_jobs(conn, jobs, all_jobs, hosts, since, until)
        if len(ids) == 1 and not all_jobs and may_be_lake(db):  # on a lake, read only the job's partitions
            from synestra_cli.store.lake import narrow_to_job

            narrow_to_job(conn, ids[0])
        with progress_on_tty():
            if reuse:
                from synestra_cli.explain.memo import explain_reusing

                docs, computed, key = explain_reusing(conn, ids)
            else:
                docs = explain_each(conn, ids, lambda c, j: explain(c, j, *window))
    if computed:  # best effort, after the read: a store held by another process keeps nothing
        from synestra_cli.explain.memo import save_to

        save_to(db, key, computed)
    if fmt == "markdown":
        _markdown(docs, checkpoint, since, until)
    else:
        _render(docs, fmt, all_jobs or len(ids) > 1)


def selected_jobs(
    conn,
    jobs: tuple[str, ...],
    all_jobs: bool,
    hosts: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
) -> list[str]:
    """The jobs named (each resolved, exit 5 if unknown) or those in the window, then those that ran on
    one of the hosts; none left is exit 5 with what was asked."""
    from synestra_cli.errors import NotFoundError
    from synestra_cli.explain.job import jobs_in_window
    from synestra_cli.query.clusters import resolve_job

    ids = jobs_in_window(conn, since, until) if all_jobs else [resolve_job(conn, j) for j in jobs]
    if hosts:
        from synestra_cli.query.jobs import jobs_on_hosts

        on = jobs_on_hosts(conn, list(hosts))
        ids = [j for j in ids if j in on]
        if not ids:
            raise NotFoundError(f"no {'such ' if jobs else ''}job ran on {', '.join(hosts)}")
    return ids


def _markdown(docs: list, checkpoint: int | None, since: datetime | None, until: datetime | None) -> None:
    from synestra_cli.explain.job import select
    from synestra_cli.explain.markdown import job_markdown
    from synestra_cli.shown import relative_in

    filtered = checkpoint is not None or since is not None or until is not None
    for d in docs:
        cps = select(d, checkpoint, since, until) if filtered else None
        click.echo(relative_in(job_markdown(d, cps)))  # a ticket leaks no analyst's home folder


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


def _render(docs: list, fmt: str, many: bool) -> None:
    from synestra_cli.cli.render import dumps

    if fmt == "jsonl":
        for d in docs:
            click.echo(dumps(d.to_json()))
    elif fmt == "json":
        click.echo(dumps([d.to_json() for d in docs] if many else docs[0].to_json()))
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
