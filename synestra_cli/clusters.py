"""Clusters do not merge: a job is keyed by its cluster and its Slurm id, `CLUSTER:ID` (`a100:4242`).

Slurm numbers jobs per cluster, so two clusters' exports in one store share ids (job 4242 of each would
become one job with both node lists). The cluster is known from sacct's `Cluster` column (as
`sacct -L` / `--format=...,Cluster` prints it) or from `ingest --cluster NAME`, and is written into the
job id of every row the file loads. A job log ingested without `--cluster` that names a bare id held by
exactly one cluster of the store is that cluster's job (load sacct first, or give the log `--cluster`);
a bare id asked for on the command line is resolved the same way, and one several clusters hold is an
error that lists them.
"""

from __future__ import annotations

import re

import duckdb

from synestra_cli.errors import InputError, NotFoundError
from synestra_cli.store.sql import scalar

SEP = ":"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Every table a file writes job rows into; sacct_rows only from sacct.
JOB_TABLES = ("jobs", "attempts", "job_nodes", "steps", "checkpoints", "job_incidents", "sacct_rows")

PREFIX_SQL = (
    "UPDATE {table} SET job_id = $cluster || ':' || job_id WHERE source_id = $sid AND NOT contains(job_id, ':')"
)
# Bare ids of this file that exactly one qualified job of the store (from another file) ends with.
RESOLVE_SQL = """
CREATE OR REPLACE TEMP TABLE _job_alias AS
WITH mine AS ({mine}), known AS (
    SELECT DISTINCT job_id FROM jobs WHERE contains(job_id, ':') AND source_id <> $sid
)
SELECT m.job_id AS bare, any_value(k.job_id) AS qualified FROM mine m JOIN known k
  ON k.job_id[strpos(k.job_id, ':') + 1:] = m.job_id
GROUP BY m.job_id HAVING count(DISTINCT k.job_id) = 1
"""
ALIAS_SQL = (
    "UPDATE {table} SET job_id = a.qualified FROM _job_alias a "
    "WHERE {table}.source_id = $sid AND {table}.job_id = a.bare"
)
CANDIDATES_SQL = """
SELECT DISTINCT job_id FROM (SELECT job_id FROM jobs UNION ALL SELECT job_id FROM attempts
                             UNION ALL SELECT job_id FROM steps UNION ALL SELECT job_id FROM checkpoints)
WHERE job_id = $job OR (contains(job_id, ':') AND job_id[strpos(job_id, ':') + 1:] = $job)
ORDER BY job_id
"""


def check_name(name: str | None) -> str | None:
    if name is not None and not NAME_RE.match(name):
        raise InputError(f"--cluster {name!r}: use letters, digits, '.', '_' and '-' (as Slurm names clusters)")
    return name


def qualify_source(conn: duckdb.DuckDBPyConnection, source_id: int, fmt: str, cluster: str | None) -> None:
    """After a file loaded (in its transaction): its job ids carry the cluster. sacct's own Cluster
    column was applied by the parser; `cluster` (--cluster) names the rest. A job log without one is
    matched to the one cluster that holds its bare id, if exactly one does; sacct never is (a bare
    sacct is another cluster's export, unnamed)."""
    params = {"sid": source_id}
    # every job-writing format (sacct, formats/joblog_rows.py) writes a jobs row: telemetry skips this
    if not scalar(conn, "SELECT count(*) FROM jobs WHERE source_id = $sid", params):
        return
    tables = JOB_TABLES if fmt == "sacct" else JOB_TABLES[:-1]
    if cluster:
        for table in tables:
            conn.execute(PREFIX_SQL.format(table=table), {**params, "cluster": cluster})
        return
    if fmt == "sacct":
        return
    mine = " UNION ".join(
        f"SELECT job_id FROM {t} WHERE source_id = $sid AND NOT contains(job_id, ':')" for t in tables
    )
    conn.execute(RESOLVE_SQL.format(mine=mine), params)
    if scalar(conn, "SELECT count(*) FROM _job_alias"):
        for table in tables:
            conn.execute(ALIAS_SQL.format(table=table), params)
    conn.execute("DROP TABLE _job_alias")


def resolve_job(conn: duckdb.DuckDBPyConnection, job_id: str) -> str:
    """The stored id of a job asked for as `ID` or `CLUSTER:ID`: itself when stored; the one cluster's
    job when exactly one holds the bare id; NotFoundError listing them when several do."""
    found = [r[0] for r in conn.execute(CANDIDATES_SQL, {"job": job_id}).fetchall()]
    if job_id in found or not found:
        return job_id
    if len(found) == 1:
        return found[0]
    raise NotFoundError(f"job {job_id} is in {len(found)} clusters: give one of {', '.join(found)}")
