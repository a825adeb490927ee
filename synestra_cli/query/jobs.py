"""Jobs in the store: the reconciled view of each job's attempts, and the `synestra jobs` listing.

The reconciliation itself is SQL (views of migration 004_job_views, see store/job_views.py), so
explain and tax-report query `attempts_reconciled`, `steps_reconciled`, `checkpoints_reconciled`
and `job_incidents_reconciled` directly; this module is the typed Python face of those views.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import duckdb

from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.query.inspect import fetch_dicts
from synestra_cli.shown import plural
from synestra_cli.store.sql import one_row, scalar

JOB_IDS_SQL = """
SELECT job_id FROM jobs UNION SELECT job_id FROM attempts UNION SELECT job_id FROM steps
UNION SELECT job_id FROM checkpoints UNION SELECT job_id FROM job_incidents
"""

JOB_EXISTS_SQL = "SELECT count(*) FROM (" + JOB_IDS_SQL + ") WHERE job_id = ?"

ATTEMPTS_SQL = """
SELECT job_id AS job, attempt, start_ts, end_ts, duration_s, state, exit_code, n_nodes AS n_hosts,
       nodes AS hosts, gpus, origin, log_start_ts, log_end_ts, matched_by
FROM attempts_reconciled WHERE job_id = ? ORDER BY attempt
"""

ATTEMPT_MAP_SQL = """
SELECT m.source_id, s.path, m.log_attempt, m.attempt, m.matched_by
FROM attempt_map m JOIN sources s USING (source_id) WHERE m.job_id = ? ORDER BY m.source_id, m.log_attempt
"""

# Saves and restores count distinct (attempt, iteration): an async save logs a scheduled and a
# finalized row, and two logs of one job (stdout, progress.txt) repeat the same events. A checkpoint
# line without an iteration counts on its own (-line stands in for the iteration).
SUMMARY_SQL = (
    """
WITH ids AS ("""
    + JOB_IDS_SQL
    + """),
a AS (SELECT job_id, count(*) AS attempts, min(start_ts) AS first_ts, max(end_ts) AS last_ts
      FROM attempts_reconciled GROUP BY job_id),
s AS (SELECT job_id, count(DISTINCT (attempt, iteration)) AS steps, min(ts) AS first_ts, max(ts) AS last_ts
      FROM steps_reconciled GROUP BY job_id),
c AS (SELECT job_id,
             count(DISTINCT (attempt, coalesce(iteration, -line))) FILTER (kind = 'save') AS saves,
             count(DISTINCT (attempt, coalesce(iteration, -line))) FILTER (kind = 'restore') AS restores,
             min(start_ts) AS first_ts, max(coalesce(end_ts, start_ts)) AS last_ts
      FROM checkpoints_reconciled GROUP BY job_id),
i AS (SELECT job_id, count(*) AS incidents FROM job_incidents GROUP BY job_id)
SELECT ids.job_id AS job, j.name, j.user_name AS "user", j.state, coalesce(a.attempts, 0) AS attempts, j.gpus,
       len(j.nodes) AS n_hosts, j.nodes AS hosts,
       least(a.first_ts, s.first_ts, c.first_ts) AS first_ts,
       greatest(a.last_ts, s.last_ts, c.last_ts) AS last_ts,
       coalesce(s.steps, 0) AS steps, coalesce(c.saves, 0) AS saves, coalesce(c.restores, 0) AS restores,
       coalesce(i.incidents, 0) AS incidents
FROM ids LEFT JOIN jobs_reconciled j USING (job_id) LEFT JOIN a USING (job_id) LEFT JOIN s USING (job_id)
LEFT JOIN c USING (job_id) LEFT JOIN i USING (job_id)
ORDER BY first_ts NULLS LAST, ids.job_id
"""
)

# One name per concept across every JSON output: `job`, `hosts`, `user` (as explain and tax-report say).
JOB_COLUMNS = [
    "job",
    "name",
    "user",
    "state",
    "attempts",
    "gpus",
    "n_hosts",
    "hosts",
    "first_ts",
    "last_ts",
    "steps",
    "saves",
    "restores",
    "incidents",
]
ATTEMPT_COLUMNS = [
    "job",
    "attempt",
    "start_ts",
    "end_ts",
    "duration_s",
    "state",
    "exit_code",
    "n_hosts",
    "hosts",
    "gpus",
    "origin",
    "log_start_ts",
    "log_end_ts",
    "matched_by",
]


def job_ids(conn: duckdb.DuckDBPyConnection) -> list[str]:
    """Every job id the store knows, from sacct or from any job log, sorted."""
    return sorted(r[0] for r in conn.execute(JOB_IDS_SQL).fetchall())


def require_job(conn: duckdb.DuckDBPyConnection, job_id: str) -> None:
    """NotFoundError (exit 5) naming a few known jobs when job_id is not in the store."""
    n = scalar(conn, JOB_EXISTS_SQL, [job_id])
    if n:
        return
    known = job_ids(conn)
    hint = (
        f"known jobs: {', '.join(known[:10])}{' ...' if len(known) > 10 else ''}"
        if known
        else "the store holds no jobs: ingest job logs or sacct output first"
    )
    raise NotFoundError(f"job {job_id!r} is not in the store ({hint})")


def reconciled_attempts(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[dict[str, Any]]:
    """The job's attempts, sacct-authoritative, with the span of the log segments mapped to each."""
    require_job(conn, job_id)
    return fetch_dicts(conn, ATTEMPTS_SQL, [job_id])[1]


def attempt_mapping(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[dict[str, Any]]:
    """How each log attempt segment of the job was matched: source, log attempt -> attempt, method."""
    require_job(conn, job_id)
    return fetch_dicts(conn, ATTEMPT_MAP_SQL, [job_id])[1]


def job_summary(conn: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """One row per job (JOB_COLUMNS), oldest first. EmptyStoreError (exit 6) when there is none."""
    rows = fetch_dicts(conn, SUMMARY_SQL)[1]
    if not rows:
        raise EmptyStoreError(
            "no jobs in the store: ingest job logs or sacct output first (`synestra ingest slurm-1234.out sacct.txt`)"
        )
    return rows


SPAN_SQL = "SELECT count(DISTINCT job_id), min(start_ts), max(end_ts) FROM attempts_reconciled"


def empty_window_message(conn: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None) -> str:
    """An empty --since/--until window is not an empty store: say which, and where the jobs are."""
    n, lo, hi = one_row(conn, SPAN_SQL)

    def iso(t: datetime) -> str:
        return f"{t:%Y-%m-%dT%H:%M:%SZ}"

    window = (
        f"between {iso(since)} and {iso(until)}"
        if since and until
        else f"after {iso(since)}"
        if since
        else f"before {iso(until)}"
        if until
        else "at all"
    )
    if not n:
        return "no jobs in the store (ingest job logs and sacct output first)"
    span = f"{iso(lo)} .. {iso(hi)}" if lo and hi else "with no times"
    return f"no job ran {window}; the store's {plural(n, 'job')} ran {span}"


JOBS_ON_HOSTS_SQL = """
SELECT DISTINCT job_id FROM (
    SELECT job_id, unnest(nodes) AS host FROM attempts_reconciled
    UNION ALL SELECT job_id, unnest(nodes) AS host FROM jobs_reconciled
) WHERE host IN (SELECT unnest(?::VARCHAR[]))
"""


def jobs_on_hosts(conn: duckdb.DuckDBPyConnection, hosts: list[str]) -> set[str]:
    """The jobs whose allocation (sacct's node list, per attempt or per job) held any of these hosts."""
    return {r[0] for r in conn.execute(JOBS_ON_HOSTS_SQL, [hosts]).fetchall()}
