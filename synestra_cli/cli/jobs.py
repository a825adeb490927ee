"""`synestra jobs`: the jobs in the store, or one job's reconciled attempts."""

from __future__ import annotations

import click

from synestra_cli.cli.common import db_option, format_option, handle_errors
from synestra_cli.cli.render import render_rows
from synestra_cli.jobs import ATTEMPT_COLUMNS, JOB_COLUMNS, job_summary, reconciled_attempts
from synestra_cli.store import open_store

# A terminal table stays readable: the user and the host list are in the csv and json output.
TABLE_HIDDEN = {"user", "nodes"}


@click.command("jobs")
@db_option
@click.option("--job", "job_id", metavar="ID", help="Show this job's attempts (sacct reconciled with logs).")
@format_option("table", "csv", "json")
@handle_errors
def command(db, job_id, fmt) -> None:
    """List jobs: name, state, attempts, GPUs, nodes, first/last time, steps, saves, restores, incidents.

    Attempts come from sacct when it was ingested (requeues with `sacct -D`), else from the
    restarts found in the job's logs. Exit 5 if --job names an unknown job, 6 if the store has no jobs.

    \b
    Examples:
      synestra jobs
      synestra jobs --job 4242 --format json | jq '.[] | {attempt, state, nodes}'
    """
    with open_store(db, read_only=True) as conn:
        if job_id:
            from synestra_cli.clusters import resolve_job

            job_id = resolve_job(conn, job_id)
            rows = reconciled_attempts(conn, job_id)
            render_rows(rows, ATTEMPT_COLUMNS, fmt, title=f"job {job_id} attempts")
        else:
            columns = JOB_COLUMNS if fmt != "table" else [c for c in JOB_COLUMNS if c not in TABLE_HIDDEN]
            render_rows(job_summary(conn), columns, fmt, title="jobs")
