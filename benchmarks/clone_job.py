"""Make job 1001 k times bigger, in place (run it on a copy of a store): its hosts' telemetry, events,
topology, GPUs and switch ports cloned under new names (host-cN, port-cN), its job_nodes and sacct nodes
extended, and their hourly summaries when the store has them. For measuring how `explain` grows with a
job's hosts (docs/performance.md), not for answers.

    cp store.duckdb big.duckdb && python benchmarks/clone_job.py big.duckdb 8
"""

from __future__ import annotations

import sys
import time

import duckdb

JOB = "1001"
HOSTS_SQL = (
    "SELECT DISTINCT host FROM job_nodes WHERE job_id = ? UNION SELECT unnest(nodes) FROM attempts WHERE job_id = ?"
)
IN_JOB = "host IN (SELECT host FROM jh)"
# One statement per table; {s} is the clone's suffix. Telemetry in the order ingest writes it.
CLONE_SQL = [
    "INSERT INTO metrics (ts, host, entity, metric, value, source_id)"
    " SELECT ts, host || '{s}', entity, metric, value, source_id FROM metrics "
    f"WHERE {IN_JOB} ORDER BY host, entity, metric, ts",
    "INSERT INTO metrics (ts, host, entity, metric, value, source_id)"
    " SELECT ts, m.host, m.entity || '{s}', metric, value, source_id FROM metrics m "
    "SEMI JOIN jp ON jp.switch = m.host AND jp.switch_port = m.entity ORDER BY m.host, m.entity, m.metric, ts",
    "INSERT INTO events SELECT ts, host || '{s}', component, kind, code, severity, message, fields, source_id, "
    f"line FROM events WHERE {IN_JOB}",
    "INSERT INTO topology SELECT host || '{s}', nic, switch, switch_port || '{s}', rack, source_id FROM topology "
    f"WHERE {IN_JOB}",
    f"INSERT INTO gpus SELECT host || '{{s}}', entity, pci_bus_id, uuid, model, source_id FROM gpus WHERE {IN_JOB}",
    "INSERT INTO job_nodes SELECT job_id, attempt, host || '{s}', source_id FROM job_nodes "
    f"WHERE job_id = '{JOB}' AND {IN_JOB}",
    "UPDATE attempts SET nodes = list_concat(nodes, list_transform(nodes, lambda x: x || '{s}')[1:{n}]) "
    f"WHERE job_id = '{JOB}'",
]


# The clones' hourly summaries (store/summaries.py, migration 012), when the store has them: a clone's rows
# keep their source ids, which are already listed as summarised.
SUMMARY_CLONE_SQL = [
    "INSERT INTO metric_summaries SELECT * REPLACE (host || '{s}' AS host) FROM metric_summaries WHERE " + IN_JOB,
    "INSERT INTO metric_summaries SELECT m.* REPLACE (m.entity || '{s}' AS entity) FROM metric_summaries m "
    "SEMI JOIN jp ON jp.switch = m.host AND jp.switch_port = m.entity",
]
HAS_SUMMARIES_SQL = "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'metric_summaries'"
# The clones' summaries point at their own rows (migration 018's row ranges), not at the originals'.
HAS_RANGES_SQL = (
    "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'metric_summaries' AND column_name = 'row_lo'"
)
RANGES_SQL = """
UPDATE metric_summaries s SET row_lo = r.lo, row_hi = r.hi FROM (
    SELECT source_id, host, entity, metric, time_bucket(INTERVAL 1 HOUR, ts) AS bucket, min(rowid) AS lo,
           max(rowid) AS hi
    FROM metrics WHERE (host LIKE '%-c%' OR entity LIKE '%-c%') AND value IS NOT NULL GROUP BY ALL
) r
WHERE r.source_id = s.source_id AND r.host IS NOT DISTINCT FROM s.host AND r.entity IS NOT DISTINCT FROM s.entity
  AND r.metric = s.metric AND r.bucket = s.bucket
"""


def main(db: str, k: int) -> None:
    conn = duckdb.connect(db)
    hosts = [r[0] for r in conn.execute(HOSTS_SQL, [JOB, JOB]).fetchall()]
    conn.execute("CREATE TEMP TABLE jh AS SELECT unnest(?::VARCHAR[]) AS host", [hosts])
    conn.execute(f"CREATE TEMP TABLE jp AS SELECT DISTINCT switch, switch_port FROM topology WHERE {IN_JOB}")
    for c in range(1, k):
        t = time.perf_counter()
        conn.execute("BEGIN")
        summaries = SUMMARY_CLONE_SQL if conn.execute(HAS_SUMMARIES_SQL).fetchone()[0] else []
        for sql in CLONE_SQL + summaries:
            conn.execute(sql.format(s=f"-c{c}", n=len(hosts)))
        conn.execute("COMMIT")
        print(f"clone {c}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if conn.execute(HAS_RANGES_SQL).fetchone()[0]:
        conn.execute(RANGES_SQL)
    conn.execute("CHECKPOINT")
    print(f"job {JOB}: {len(hosts) * k} hosts; {conn.execute('SELECT count(*) FROM metrics').fetchone()[0]:,} samples")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
