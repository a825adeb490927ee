"""`synestra jobs`: the jobs the store holds, or the attempts of the jobs named (query/jobs.py)."""

from __future__ import annotations

from collections.abc import Sequence

from synestra_cli.api._frames import Db, Table
from synestra_cli.query.clusters import resolve_job
from synestra_cli.query.jobs import ATTEMPT_COLUMNS, JOB_COLUMNS, job_summary, jobs_on_hosts, reconciled_attempts
from synestra_cli.store import open_store

__all__ = ["Table", "attempts", "jobs_in_store"]

JOBS_SCHEMA = "synestra.jobs/2"  # /1 was a bare list with job_id, n_nodes, nodes
ATTEMPTS_SCHEMA = "synestra.attempts/2"


def jobs_in_store(db: Db = None, *, hosts: Sequence[str] = ()) -> Table:
    """Every job (one row each: hosts, span, steps, incidents...), or those that ran on one of `hosts`."""
    with open_store(db, read_only=True) as conn:
        on_hosts = jobs_on_hosts(conn, list(hosts)) if hosts else None
        rows = [r for r in job_summary(conn) if on_hosts is None or r["job"] in on_hosts]
    return Table(JOBS_SCHEMA, "jobs", JOB_COLUMNS, rows)


def attempts(job_ids: Sequence[str], db: Db = None, *, hosts: Sequence[str] = ()) -> tuple[list[str], Table]:
    """The jobs named, resolved (NotFoundError if unknown), and their attempts (from sacct, else from the
    restarts in their logs), only those of jobs that ran on one of `hosts` if given."""
    with open_store(db, read_only=True) as conn:
        on_hosts = jobs_on_hosts(conn, list(hosts)) if hosts else None
        ids = [resolve_job(conn, j) for j in job_ids]
        rows = [r for j in ids if on_hosts is None or j in on_hosts for r in reconciled_attempts(conn, j)]
    return ids, Table(ATTEMPTS_SCHEMA, "attempts", ATTEMPT_COLUMNS, rows)
