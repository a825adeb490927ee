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
from synestra_cli.store.sources import qualified
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


# The batch form (ingest's commit): the rows of `ids`, in the stage, before they are copied to the store.
BATCH_PREFIX_SQL = (
    "UPDATE {table} SET job_id = $cluster || ':' || job_id "
    "WHERE list_contains($ids, source_id) AND NOT contains(job_id, ':')"
)
BATCH_RESOLVE_SQL = """
CREATE OR REPLACE TEMP TABLE _job_alias AS
WITH mine AS ({mine}), known AS (
    SELECT DISTINCT job_id, source_id FROM {store_jobs} WHERE contains(job_id, ':')
    UNION ALL SELECT DISTINCT job_id, source_id FROM {stage_jobs} WHERE contains(job_id, ':')
)
SELECT m.source_id, m.job_id AS bare, any_value(k.job_id) AS qualified FROM mine m JOIN known k
  ON k.job_id[strpos(k.job_id, ':') + 1:] = m.job_id AND k.source_id <> m.source_id
GROUP BY m.source_id, m.job_id HAVING count(DISTINCT k.job_id) = 1
"""
BATCH_ALIAS_SQL = (
    "UPDATE {table} AS t SET job_id = a.qualified FROM _job_alias a "
    "WHERE t.source_id = a.source_id AND t.job_id = a.bare"
)


def qualify_batch(
    conn: duckdb.DuckDBPyConnection, stage: str, store: str, sources: list[tuple[int, str]], cluster: str | None
) -> None:
    """qualify_source for a batch of (source_id, format) staged in `stage`, against the jobs `store`
    holds and the other staged files' (a job log is matched to a sacct export of the same batch too)."""
    if not sources:
        return
    tables = [qualified(stage, t) for t in JOB_TABLES]
    if cluster:
        ids = [sid for sid, _ in sources]
        for table in tables:
            conn.execute(BATCH_PREFIX_SQL.format(table=table), {"ids": ids, "cluster": cluster})
        return
    ids = [sid for sid, fmt in sources if fmt != "sacct"]  # a bare sacct is another cluster's export
    if not ids:
        return
    mine = " UNION ".join(
        f"SELECT source_id, job_id FROM {t} WHERE list_contains($ids, source_id) AND NOT contains(job_id, ':')"
        for t in tables[:-1]
    )
    sql = BATCH_RESOLVE_SQL.format(mine=mine, store_jobs=qualified(store, "jobs"), stage_jobs=qualified(stage, "jobs"))
    conn.execute(sql, {"ids": ids})
    if scalar(conn, "SELECT count(*) FROM _job_alias"):
        for table in tables[:-1]:
            conn.execute(BATCH_ALIAS_SQL.format(table=table))
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
