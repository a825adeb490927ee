"""Clusters do not merge: a job is keyed by its cluster and its Slurm id, `CLUSTER:ID` (`a100:4242`).

Slurm numbers jobs per cluster, so two clusters' exports in one store share ids (job 4242 of each would
become one job with both node lists). The cluster is known from sacct's `Cluster` column (as
`sacct -L` / `--format=...,Cluster` prints it) or from `ingest --cluster NAME`, and is written into the
job id of every row the file loads. A job log ingested without `--cluster` that names a bare id held by
exactly one cluster of the store is that cluster's job (load sacct first, or give the log `--cluster`);
a bare id asked for on the command line is resolved the same way, and one several clusters hold is an
error that lists them.

Hosts: with `--cluster NAME`, every host a file names becomes `NAME:host` too (`a100:gpu-001`), in every
table with a host column, so that two clusters' `gpu-001` do not merge. Only `--cluster` does this, not
sacct's Cluster column: telemetry carries no cluster, so qualifying the hosts of sacct alone would cut
its jobs off from their nodes' telemetry. Give `--cluster` to all of a cluster's files or to none; a file
whose hosts the store already holds in the other form gets a note saying so. Switches are hosts (their
port counters are rows of their name) and are qualified with them, and so are the other parts a cluster
names in its own namespace: racks (topology's rack) and filesystem servers (the NFS server or Lustre
target of a storage event's component). Two clusters' `rack-01` or `nfs-01` never merge: not in `fleet`,
a rack's ticket or explain's assets.
"""

from __future__ import annotations

import re

import duckdb

from synestra_cli.errors import NotFoundError, UsageError
from synestra_cli.store.sources import qualified
from synestra_cli.store.sql import drop_temp, scalar

SEP = ":"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# Every table a file writes job rows into (kube_runs: Kubernetes' pods, `namespace/name`); sacct_rows only from
# sacct, last.
JOB_TABLES = (
    "jobs",
    "attempts",
    "job_nodes",
    "steps",
    "checkpoints",
    "job_incidents",
    "job_marks",
    "kube_runs",
    "sacct_rows",
)

CANDIDATES_SQL = """
SELECT DISTINCT job_id FROM (SELECT job_id FROM jobs UNION ALL SELECT job_id FROM attempts
                             UNION ALL SELECT job_id FROM steps UNION ALL SELECT job_id FROM checkpoints)
WHERE job_id = $job OR (contains(job_id, ':') AND job_id[strpos(job_id, ':') + 1:] = $job)
ORDER BY job_id
"""


def check_name(name: str | None) -> str | None:
    if name is not None and not NAME_RE.match(name):
        raise UsageError(f"--cluster {name!r}: use letters, digits, '.', '_' and '-' (as Slurm names clusters)")
    return name


HOST_TABLES_SQL = """
SELECT c.table_name FROM duckdb_columns() c JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
WHERE c.database_name = coalesce($catalog, current_database()) AND c.schema_name = 'main' AND NOT t.temporary
GROUP BY c.table_name HAVING bool_or(c.column_name = 'host') AND bool_or(c.column_name = 'source_id')
ORDER BY c.table_name
"""
HOST_PREFIX_SQL = (
    "UPDATE {table} SET host = $cluster || ':' || host "
    "WHERE source_id = $sid AND host IS NOT NULL AND NOT starts_with(host, $cluster || ':')"
)
# Host lists (attempts.nodes, sacct_rows.nodes: the expanded NodeList).
NODES_TABLES_SQL = """
SELECT c.table_name FROM duckdb_columns() c JOIN duckdb_tables() t USING (database_name, schema_name, table_name)
WHERE c.database_name = current_database() AND c.schema_name = 'main' AND NOT t.temporary
  AND c.column_name = 'nodes' AND c.data_type = 'VARCHAR[]'
ORDER BY c.table_name
"""
NODES_PREFIX_SQL = (
    "UPDATE {table} SET nodes = list_transform(nodes, lambda h: CASE WHEN starts_with(h, $cluster || ':') THEN h "
    "ELSE $cluster || ':' || h END) WHERE source_id = $sid AND nodes IS NOT NULL"
)
# A switch is a host too: its port counters are rows of its name (SNMP, gNMI), joined to topology's links.
SWITCH_PREFIX_SQL = (
    "UPDATE topology SET switch = $cluster || ':' || switch "
    "WHERE source_id = $sid AND switch IS NOT NULL AND NOT starts_with(switch, $cluster || ':')"
)
# Hosts of the sources `ids` that other sources hold in the other form: bare when theirs are qualified, or
# qualified (by any cluster) when theirs are bare. From the host lists `sources` keeps (ingest's spans).
OTHER_FORM_SQL = """
WITH mine AS (SELECT source_id, unnest(hosts) AS h FROM {sources} WHERE list_contains($ids, source_id)),
other AS (SELECT source_id, unnest(hosts) AS h FROM {sources}),
pairs AS (
    SELECT DISTINCT m.source_id, m.h FROM mine m JOIN other o ON o.source_id <> m.source_id
     AND CASE WHEN $cluster IS NULL THEN contains(o.h, ':') AND o.h[strpos(o.h, ':') + 1:] = m.h
              ELSE o.h = m.h[length($cluster) + 2:] END
)
SELECT source_id, list(h ORDER BY h)[:3], count(*) FROM pairs GROUP BY source_id
"""


# A rack and a filesystem server are named within a cluster, as its hosts are.
RACK_PREFIX_SQL = (
    "UPDATE topology SET rack = $cluster || ':' || rack "
    "WHERE source_id = $sid AND rack IS NOT NULL AND NOT starts_with(rack, $cluster || ':')"
)
# The storage events (formats/kernel/kernel_events_classify.sql) whose component is a filesystem server.
FILESYSTEM_KINDS = ("nfs_ok", "nfs_not_responding", "lustre_restored", "lustre_lost")
FILESYSTEM_PREFIX_SQL = (
    "UPDATE events SET component = $cluster || ':' || component WHERE source_id = $sid "
    "AND list_contains($kinds, kind) AND component IS NOT NULL AND NOT starts_with(component, $cluster || ':')"
)


def host_tables(conn: duckdb.DuckDBPyConnection, catalog: str | None = None) -> list[str]:
    """The tables of `catalog` (default: the current database) with a host per row."""
    return [r[0] for r in conn.execute(HOST_TABLES_SQL, {"catalog": catalog}).fetchall()]


def prefix_hosts(conn: duckdb.DuckDBPyConnection, source_id: int, cluster: str | None) -> None:
    """With --cluster, this file's hosts (in the current database: ingest's stage) become CLUSTER:host, and
    its switches, racks and filesystem servers CLUSTER:name."""
    if not cluster:
        return
    params = {"sid": source_id, "cluster": cluster}
    for table in host_tables(conn):
        conn.execute(HOST_PREFIX_SQL.format(table=table), params)
    conn.execute(SWITCH_PREFIX_SQL, params)
    conn.execute(RACK_PREFIX_SQL, params)
    conn.execute(FILESYSTEM_PREFIX_SQL, {**params, "kinds": list(FILESYSTEM_KINDS)})
    for (table,) in conn.execute(NODES_TABLES_SQL).fetchall():
        conn.execute(NODES_PREFIX_SQL.format(table=table), params)


def other_form_notes(
    conn: duckdb.DuckDBPyConnection, catalog: str, source_ids: list[int], cluster: str | None
) -> dict[int, list[str]]:
    """Per source of `source_ids` (committed to the store `catalog`), a note when the store holds its
    hosts in the other form: the two would not join, and explain would miss the telemetry of a job's nodes."""
    sql = OTHER_FORM_SQL.format(sources=qualified(catalog, "sources"))
    given = f"--cluster {cluster}" if cluster else "no --cluster"
    return {
        sid: [
            f"{n} host(s) of this file ({', '.join(shown)}{', ...' if n > 3 else ''}), read with {given}, are in "
            "the store in the other form: they do not join; give every file of a cluster the same --cluster"
        ]
        for sid, shown, n in conn.execute(sql, {"ids": source_ids, "cluster": cluster}).fetchall()
    }


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
    drop_temp(conn, ["_job_alias"])


def resolve_job(conn: duckdb.DuckDBPyConnection, job_id: str) -> str:
    """The stored id of a job asked for as `ID` or `CLUSTER:ID`: itself when stored; the one cluster's
    job when exactly one holds the bare id; NotFoundError listing them when several do."""
    found = [r[0] for r in conn.execute(CANDIDATES_SQL, {"job": job_id}).fetchall()]
    if job_id in found or not found:
        return job_id
    if len(found) == 1:
        return found[0]
    raise NotFoundError(f"job {job_id} is in {len(found)} clusters: give one of {', '.join(found)}")
