"""A job's scope: its attempts, hosts, the switch ports that serve them, and its time window.

Every signal query filters by this scope first (hosts and time), so that a store of 10^8 samples is
read through its zonemaps, and so that faults on nodes outside the job can never be blamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from synestra_cli.errors import EmptyStoreError, NotFoundError

# Reconciled attempts (sacct authoritative, else the log's own: migration 004); when neither
# recorded any, the attempts implied by the job's steps, checkpoints and incidents.
ATTEMPTS_SQL = """
SELECT attempt, min(start_ts), max(end_ts), any_value(state), any_value(exit_code),
       coalesce(first(nodes), []::VARCHAR[])
FROM attempts_reconciled WHERE job_id = ? GROUP BY attempt ORDER BY attempt
"""
LOG_ATTEMPTS_SQL = """
SELECT coalesce(attempt, 1), min(ts), max(ts), NULL, NULL, []::VARCHAR[] FROM (
    SELECT attempt, ts FROM steps_reconciled WHERE job_id = $job
    UNION ALL SELECT attempt, coalesce(start_ts, end_ts) FROM checkpoints_reconciled WHERE job_id = $job
    UNION ALL SELECT attempt, coalesce(ts, logged_ts) FROM job_incidents_reconciled WHERE job_id = $job
) WHERE ts IS NOT NULL GROUP BY 1 ORDER BY 1
"""
JOB_NODES_SQL = "SELECT DISTINCT host FROM job_nodes WHERE job_id = ?"
JOB_EXISTS_SQL = """
SELECT (SELECT count(*) FROM jobs WHERE job_id = $job)
     + (SELECT count(*) FROM attempts WHERE job_id = $job)
     + (SELECT count(*) FROM steps WHERE job_id = $job)
     + (SELECT count(*) FROM checkpoints WHERE job_id = $job)
"""
ANY_JOB_SQL = "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM steps)"
GPUS_SQL = "SELECT max(gpus) FROM jobs WHERE job_id = ?"
LINKS_SQL = """
SELECT DISTINCT host, nic, switch, switch_port, rack FROM topology WHERE host IN ({hosts})
"""


@dataclass(frozen=True)
class Attempt:
    attempt: int
    start: datetime | None
    end: datetime | None
    state: str | None
    exit_code: str | None
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    host: str
    nic: str | None
    switch: str | None
    switch_port: str | None
    rack: str | None


@dataclass
class JobScope:
    job_id: str
    attempts: list[Attempt]
    hosts: list[str]
    links: list[Link] = field(default_factory=list)
    gpus: int | None = None

    @property
    def start(self) -> datetime | None:
        return min((a.start for a in self.attempts if a.start), default=None)

    @property
    def end(self) -> datetime | None:
        return max((a.end for a in self.attempts if a.end), default=None)

    def rack_of(self, host: str) -> str | None:
        return next((lk.rack for lk in self.links if lk.host == host and lk.rack), None)


def placeholders(n: int) -> str:
    """`?, ?, ?` for an IN list of n bound values (the values themselves are always parameters)."""
    return ", ".join("?" * n) if n else "NULL"


def _attempts(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[Attempt]:
    rows = conn.execute(ATTEMPTS_SQL, [job_id]).fetchall()
    if not rows:
        rows = conn.execute(LOG_ATTEMPTS_SQL, {"job": job_id}).fetchall()
    return [Attempt(a, s, e, st, ec, tuple(n or ())) for a, s, e, st, ec, n in rows]


def load_scope(conn: duckdb.DuckDBPyConnection, job_id: str) -> JobScope:
    """The job's attempts, hosts and links; NotFoundError / EmptyStoreError with how to fix it."""
    if scalar(conn, JOB_EXISTS_SQL, {"job": job_id}) == 0:
        if scalar(conn, ANY_JOB_SQL) == 0:
            raise EmptyStoreError("the store holds no jobs: ingest job logs or sacct first")
        raise NotFoundError(f"job {job_id!r} is not in the store: `synestra jobs` lists the known jobs")
    attempts = _attempts(conn, job_id)
    hosts = {h for a in attempts for h in a.nodes}
    hosts |= {r[0] for r in conn.execute(JOB_NODES_SQL, [job_id]).fetchall()}
    ordered = sorted(hosts)
    links = [Link(*r) for r in conn.execute(LINKS_SQL.format(hosts=placeholders(len(ordered))), ordered).fetchall()]
    gpus = scalar(conn, GPUS_SQL, [job_id])
    return JobScope(job_id, attempts, ordered, links, gpus if isinstance(gpus, int) else None)


def scalar(conn: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> Any:
    """The single value a one-row query returns."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None, "a one-row query returned no row"
    return row[0]


def insert_rows(conn: duckdb.DuckDBPyConnection, table: str, rows: list[tuple]) -> None:
    """Insert rows into a temp table in one statement (executemany pays a round trip per row).
    `table` is one of this package's own temp tables, never user input; values are parameters."""
    if rows:
        one = "(" + ", ".join("?" * len(rows[0])) + ")"
        conn.execute(f"INSERT INTO {table} VALUES " + ", ".join([one] * len(rows)), [v for r in rows for v in r])


def padded(t: datetime | None, seconds: float) -> datetime | None:
    return None if t is None else t + timedelta(seconds=seconds)
