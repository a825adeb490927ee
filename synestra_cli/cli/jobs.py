"""`synestra jobs`: the jobs in the store, or some jobs' reconciled attempts."""

from __future__ import annotations

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import db_option, format_option, host_option, job_option
from synestra_cli.cli.render import render_rows

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
    from synestra_cli.api.jobs import attempts, jobs_in_store
    from synestra_cli.cli.render import dumps

    if jobs:
        ids, table = attempts(jobs, db, hosts=hosts)
        drop, title = ATTEMPT_DROP_FIRST, f"job {', '.join(ids)} attempts"
    else:
        table, drop, title = jobs_in_store(db, hosts=hosts), JOB_DROP_FIRST, "jobs"
    if fmt == "json":
        click.echo(dumps(table.to_json()))
    else:
        render_rows(table.rows, table.columns, fmt, title=title, drop_first=drop)
