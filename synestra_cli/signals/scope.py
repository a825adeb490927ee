"""A job's scope: its attempts, hosts, the switch ports that serve them, and its time window.

Every signal query filters by this scope first (hosts and time), so that a store of 10^8 samples is
read through its zonemaps, and so that faults on nodes outside the job can never be blamed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

import duckdb

from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.store.sql import scalar

# Reconciled attempts (sacct authoritative, else the log's own: migration 004); when neither
# recorded any, the attempts implied by the job's steps, checkpoints and incidents.
ATTEMPTS_SQL = """
SELECT job_id, attempt, min(start_ts), max(end_ts), any_value(state), any_value(exit_code),
       coalesce(first(nodes), []::VARCHAR[])
FROM attempts_reconciled WHERE job_id IN (SELECT unnest($jobs)) GROUP BY job_id, attempt ORDER BY job_id, attempt
"""
LOG_ATTEMPTS_SQL = """
SELECT job_id, coalesce(attempt, 1), min(ts), max(ts), NULL, NULL, []::VARCHAR[] FROM (
    SELECT job_id, attempt, ts FROM steps_reconciled WHERE job_id IN (SELECT unnest($jobs))
    UNION ALL SELECT job_id, attempt, coalesce(start_ts, end_ts) FROM checkpoints_reconciled
              WHERE job_id IN (SELECT unnest($jobs))
    UNION ALL SELECT job_id, attempt, coalesce(ts, logged_ts) FROM job_incidents_reconciled
              WHERE job_id IN (SELECT unnest($jobs))
) WHERE ts IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2
"""
JOB_NODES_SQL = "SELECT DISTINCT job_id, host FROM job_nodes WHERE job_id IN (SELECT unnest($jobs))"
JOB_EXISTS_SQL = """
SELECT (SELECT count(*) FROM jobs WHERE job_id = $job)
     + (SELECT count(*) FROM attempts WHERE job_id = $job)
     + (SELECT count(*) FROM steps WHERE job_id = $job)
     + (SELECT count(*) FROM checkpoints WHERE job_id = $job)
"""
ANY_JOB_SQL = "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM checkpoints) + (SELECT count(*) FROM steps)"
GPUS_SQL = "SELECT job_id, max(gpus) FROM jobs WHERE job_id IN (SELECT unnest($jobs)) GROUP BY job_id"
# ordered: the same links in the same order whether one job's scope is loaded or many at once
LINKS_SQL = """
SELECT DISTINCT host, nic, switch, switch_port, rack FROM topology WHERE host IN (SELECT unnest($hosts))
ORDER BY ALL
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


End = tuple[str | None, str | None]  # a link's (switch, port) or (host, nic)


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
        return self._racks.get(host)

    def link_at(self, switch_end: End, host_end: End) -> Link | None:
        """The first link whose (switch, port) is `switch_end` or whose (host, nic) is `host_end`."""
        by_switch, by_host = self._link_ends
        i = min(by_switch.get(switch_end, len(self.links)), by_host.get(host_end, len(self.links)))
        return self.links[i] if i < len(self.links) else None

    # Indexes built on first use: explain asks once per signal, and a 1,024-host job has ~8,000 links to scan.
    @cached_property
    def _link_ends(self) -> tuple[dict[End, int], dict[End, int]]:
        """Each (switch, port) and each (host, nic) to its first link (links are ordered)."""
        by_switch: dict[End, int] = {}
        by_host: dict[End, int] = {}
        for i, lk in enumerate(self.links):
            by_switch.setdefault((lk.switch, lk.switch_port), i)
            by_host.setdefault((lk.host, lk.nic), i)
        return by_switch, by_host

    @cached_property
    def _racks(self) -> dict[str, str]:
        """Each host to the rack of its first link that names one."""
        racks: dict[str, str] = {}
        for lk in self.links:
            if lk.rack:
                racks.setdefault(lk.host, lk.rack)
        return racks


def load_scope(conn: duckdb.DuckDBPyConnection, job_id: str) -> JobScope:
    """The job's attempts, hosts and links; NotFoundError / EmptyStoreError with how to fix it."""
    if scalar(conn, JOB_EXISTS_SQL, {"job": job_id}) == 0:
        if scalar(conn, ANY_JOB_SQL) == 0:
            raise EmptyStoreError("the store holds no jobs: ingest job logs or sacct first")
        raise NotFoundError(f"job {job_id!r} is not in the store: `synestra jobs` lists the known jobs")
    return load_scopes(conn, [job_id])[job_id]


def load_scopes(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, JobScope]:
    """load_scope for many jobs known to be in the store, in five queries whatever their number (a
    fleet's tax-report): the same rows, per job, as one job at a time."""
    jobs = {"jobs": list(job_ids)}
    attempts: dict[str, list[Attempt]] = {j: [] for j in job_ids}
    for j, a, s, e, st, ec, n in conn.execute(ATTEMPTS_SQL, jobs).fetchall():
        attempts[j].append(Attempt(a, s, e, st, ec, tuple(n or ())))
    untimed = [j for j in job_ids if not attempts[j]]  # no attempt rows: the log's own, from its lines
    if untimed:
        for j, a, s, e, st, ec, n in conn.execute(LOG_ATTEMPTS_SQL, {"jobs": untimed}).fetchall():
            attempts[j].append(Attempt(a, s, e, st, ec, tuple(n or ())))
    hosts = {j: {h for a in attempts[j] for h in a.nodes} for j in job_ids}
    for j, h in conn.execute(JOB_NODES_SQL, jobs).fetchall():
        hosts[j].add(h)
    every = sorted({h for hs in hosts.values() for h in hs})
    links: dict[str, list[Link]] = {}
    for r in conn.execute(LINKS_SQL, {"hosts": every}).fetchall():
        links.setdefault(r[0], []).append(Link(*r))
    gpus = dict(conn.execute(GPUS_SQL, jobs).fetchall())
    out = {}
    for j in job_ids:
        ordered = sorted(hosts[j])
        g = gpus.get(j)
        out[j] = JobScope(
            j, attempts[j], ordered, [lk for h in ordered for lk in links.get(h, [])], g if isinstance(g, int) else None
        )
    return out


def padded(t: datetime | None, seconds: float) -> datetime | None:
    return None if t is None else t + timedelta(seconds=seconds)
