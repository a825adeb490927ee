"""`synestra jobs`: the jobs in the store, or some jobs' reconciled attempts."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option, host_option, job_option
from synestra_cli.cli.render import render_rows
from synestra_cli.query.jobs import ATTEMPT_COLUMNS, JOB_COLUMNS, job_summary, jobs_on_hosts, reconciled_attempts
from synestra_cli.store import open_store

JOBS_SCHEMA = "synestra.jobs/2"  # /1 was a bare list with job_id, n_nodes, nodes
ATTEMPTS_SCHEMA = "synestra.attempts/2"
# A narrow terminal leaves these out first, in this order: the rest are what a reader scans for.
JOB_DROP_FIRST = ["hosts", "user", "n_hosts", "last_ts", "steps", "incidents", "name", "gpus", "restores"]
ATTEMPT_DROP_FIRST = ["hosts", "matched_by", "log_start_ts", "log_end_ts", "origin", "n_hosts", "gpus", "end_ts"]


@click.command("jobs")
@db_option
@job_option("Show these jobs' attempts (sacct reconciled with logs); repeat it or separate ids with commas.")
@host_option("jobs")
@format_option("table", "csv", "json")
@handle_errors
def command(db, jobs: tuple[str, ...], hosts: tuple[str, ...], fmt: str) -> None:
    """List jobs: name, user, state, attempts, GPUs, hosts, first/last time, steps, saves, restores,
    incidents.

    Attempts come from sacct when it was ingested (requeues with `sacct -D`), else from the
    restarts found in the job's logs. Exit 5 if --job names an unknown job, 6 if the store has no jobs.
    JSON schemas: synestra.jobs/2 and, with --job, synestra.attempts/2 (docs/data-model.md).

    \b
    Examples:
      synestra jobs
      synestra jobs --host gpu-002 --format csv
      synestra jobs --job 1003 --format json | jq '.attempts[] | {attempt, state, hosts}'
    """
    from synestra_cli.cli.render import dumps

    with open_store(db, read_only=True) as conn:
        on_hosts = jobs_on_hosts(conn, list(hosts)) if hosts else None
        if jobs:
            from synestra_cli.query.clusters import resolve_job

            ids = [resolve_job(conn, j) for j in jobs]
            rows = [r for j in ids if on_hosts is None or j in on_hosts for r in reconciled_attempts(conn, j)]
            columns, drop, schema, key = ATTEMPT_COLUMNS, ATTEMPT_DROP_FIRST, ATTEMPTS_SCHEMA, "attempts"
            title = f"job {', '.join(ids)} attempts"
        else:
            rows = [r for r in job_summary(conn) if on_hosts is None or r["job"] in on_hosts]
            columns, drop, schema, key, title = JOB_COLUMNS, JOB_DROP_FIRST, JOBS_SCHEMA, "jobs", "jobs"
    if fmt == "json":
        click.echo(dumps({"schema": schema, key: [{c: r.get(c) for c in columns} for r in rows]}))
    else:
        render_rows(rows, columns, fmt, title=title, drop_first=drop)
