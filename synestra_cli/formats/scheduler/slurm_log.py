"""slurmctld and slurmd logs: what the scheduler saw happen to nodes and to jobs.

Lines are `[2023-08-28T16:55:46.905] <message>` (LogTimeFormat iso8601_ms, local time: read in --timezone).
The messages typed are the daemons' own wording (src/slurmctld/ping_nodes.c, node_mgr.c, job_mgr.c,
power_save.c):

- `error: Nodes gpu-[01-03] not responding[, setting DOWN]`: `slurm_node_not_responding`, one event per node;
- `Node gpu-01 now responding`: `slurm_node_responding`;
- `update_node: node gpu-01 reason set to: <reason>`: `slurm_node_reason` (fields.reason, a drain reason);
- `update_node: node gpu-01 state set to DOWN`, `drain_nodes: node gpu-01 state set to DRAIN`: `slurm_node_state`;
- `Node gpu-01 rebooted 136 secs ago`: `slurm_node_reboot`;
- `POWER: power_save: waking nodes …` / `suspending nodes …`, `powering down node …`, `POWER: Node … powered
  up`: `slurm_power_save` (fields.action);
- `Killing JobId=N on failed node X`, `requeue job JobId=N due to failure of node X`: `slurm_node_fail` on X,
  and the job's incident.

Job side (`job_incidents` of the job the line names, never of the file name): `requeue` (`Requeuing
JobId=N`, with the failed node when the line before says so), `node_fail`, `slurm_job_complete` (the
batch script's `WEXITSTATUS` / `WTERMSIG` / OOM). Every other line is kept as a `log` event of the daemon's
host (--host). Node names come from the line (hostlists expanded), not from --host.
"""

from __future__ import annotations

import re

import pyarrow as pa

from synestra_cli.formats import staged
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.hostlist import HostlistError, expand
from synestra_cli.store.sql import drop_temp, registered, sql_file

PARSE_SQL = sql_file(__package__, "slurm_log.sql")
ENVELOPE = re.compile(r"^\[\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?\] ", re.MULTILINE)
MARKERS = re.compile(
    r"JobId=\d|_slurm_rpc_|\bsched: |update_node: |power_save: |not responding|now responding|slurmctld|slurmd"
    r"|select/cons_|job_time_limit|backfill: |_job_complete: "
)
INSERT_INCIDENTS_SQL = """
INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT job, NULL, ts, ts, 'exact', kind, NULL, NULL, NULL, NULL, NULL, msg, fields, $sid, lineno
FROM _slurm_incidents ORDER BY job, lineno
"""
TEMP_TABLES = ("_slurm_lines", "_slurm", "_slurm_events", "_slurm_incidents", "_slurm_nodes")


def sniff(head: str) -> float:
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    if not lines or "T" not in head or not MARKERS.search(head):
        return 0.0
    enveloped = len(ENVELOPE.findall("\n".join(lines)))
    return 0.9 if enveloped >= max(1, len(lines) // 2) else 0.0


def _expand_nodelists(ctx: LoadContext, lists: list[str]) -> pa.Table:
    """Each distinct node list once (Python: the hostlist grammar); one that does not expand is kept whole."""
    nodes = []
    for text in lists:
        try:
            nodes.append(expand(text))
        except HostlistError:
            nodes.append([text])
    return pa.table({"nodelist": pa.array(lists, pa.string()), "nodes": pa.array(nodes, pa.list_(pa.string()))})


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    conn = ctx.conn
    staged.stage_lines(ctx, "_slurm_lines")
    first, *rest = [s for s in PARSE_SQL.split(";\n") if s.strip()]
    conn.execute(first, {"tz": ctx.options.timezone})
    lists = [r[0] for r in conn.execute("SELECT DISTINCT nodelist FROM _slurm WHERE nodelist IS NOT NULL").fetchall()]
    with registered(conn, "slurm_nodes_arrow", _expand_nodelists(ctx, lists)):
        conn.execute("CREATE OR REPLACE TEMP TABLE _slurm_nodes AS SELECT * FROM slurm_nodes_arrow")
    for sql in rest:
        conn.execute(sql, {"host": ctx.options.host} if "$host" in sql else None)
    staged.rejects(ctx, result, "_slurm")
    conn.execute(INSERT_INCIDENTS_SQL, {"sid": ctx.source_id})
    incidents = conn.execute("SELECT count(*) FROM _slurm_incidents").fetchone()
    result.rows = staged.write_events(ctx, "_slurm_events") + (incidents[0] if incidents else 0)
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "slurm_log",
    "slurmctld / slurmd log: nodes not responding, drained, down, rebooted, powered; requeues, node failures",
    sniff,
    load,
    writes=frozenset({"events", "job_incidents"}),
    top=0.9,
    priority=0,
)
