"""Typed log events on the job's hosts (joined to GPU / NIC identity) and the job's own incidents.

Each event carries its evidence: the source file and 1-based line. A GPU event names the GPU by its
PCI bus id; the `gpus` table turns that into the `gpuN` entity DCGM uses, so log and metric evidence
about one GPU meet under one name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.signals.thresholds import (
    AER_CORRECTED_MIN,
    EVENT_RULES,
    RECOVERY,
    XID_APP,
    XID_CONSEQUENCE,
    XID_FELL_OFF,
    XID_MEMORY,
    XID_NVLINK,
)
from synestra_cli.store.sql import insert_rows

EVENT_RULES_DDL = """
CREATE OR REPLACE TEMP TABLE _event_rules (kind VARCHAR, layer VARCHAR, category VARCHAR, weight DOUBLE,
    recovery VARCHAR)
"""

# Xids split by meaning (log-formats A.1.1); consequences (43/45/154) and recoveries are not causes.
# A corrected AER is benign alone: it counts only when repeated on one device within the scope.
# How an event reads (its state, a corrected error) and is typed (category, layer, weight): one text for
# the per-job read below and the many-jobs one (many_jobs/telemetry.py).
EVENT_STATE_SQL = """upper(coalesce(e.fields->>'state', e.message, '')) AS state_text,
           coalesce(e.fields->>'severity', e.message, '') ILIKE '%corrected%'
             AND coalesce(e.fields->>'severity', e.message, '') NOT ILIKE '%uncorrect%' AS corrected"""
# Which typed events count: a port that is Active, a corrected AER not repeated enough, are not causes.
EVENT_KEPT_SQL = """t.category IS NOT NULL
  AND NOT (t.kind = 'ib_port_state' AND t.state_text LIKE '%ACTIVE%' AND t.state_text NOT LIKE '%DOWN%')
  AND NOT (t.kind = 'aer' AND t.corrected AND t.repeats < $aer_min)"""
EVENT_TYPING_SQL = """CASE WHEN e.kind <> 'xid' THEN r.category
             WHEN list_contains($fell, e.code) THEN 'gpu.fell_off_bus'
             WHEN list_contains($mem, e.code) THEN 'gpu.memory'
             WHEN list_contains($nvl, e.code) THEN 'gpu.nvlink'
             WHEN list_contains($conseq, e.code) THEN NULL
             ELSE 'gpu.other_xid' END AS category,
        CASE WHEN e.kind <> 'xid' THEN r.layer ELSE 'gpu' END AS layer,
        CASE WHEN e.kind <> 'xid' THEN r.weight
             WHEN list_contains($app, e.code) THEN 0.3 ELSE 1.0 END AS weight"""
EVENTS_SQL = f"""
WITH e AS (
    SELECT e.*, {EVENT_STATE_SQL}
    FROM events e
    WHERE e.ts BETWEEN $start AND $end AND e.host IN ({{hosts}})
), typed AS (
    SELECT e.*,
        {EVENT_TYPING_SQL},
        count(*) OVER (PARTITION BY e.host, e.component, e.kind, e.corrected) AS repeats, r.recovery
    FROM e LEFT JOIN _event_rules r ON r.kind = e.kind
)
SELECT t.ts, t.host, t.component, coalesce(g.entity, t.component) AS entity, t.kind, t.code,
       t.message, s.path, t.line, t.layer, t.category, t.weight,
       CASE WHEN t.recovery IS NULL THEN t.ts ELSE coalesce(r.ts, $end) END AS end_ts
FROM typed t
ASOF LEFT JOIN (SELECT host, component, kind, ts FROM events
                WHERE ts BETWEEN $start AND $end AND host IN ({{hosts}})
                  AND kind IN (SELECT recovery FROM _event_rules)) r
       ON r.host = t.host AND r.component IS NOT DISTINCT FROM t.component AND r.kind = t.recovery AND r.ts >= t.ts
LEFT JOIN (SELECT DISTINCT host, entity, pci_bus_id FROM gpus) g
       ON g.host = t.host AND upper(g.pci_bus_id) = upper(t.component)
LEFT JOIN sources s ON s.source_id = t.source_id
WHERE {EVENT_KEPT_SQL}
ORDER BY t.ts
"""

# ordered to the line: the same list whether one job's incidents are read or many jobs' at once
INCIDENTS_SQL = """
SELECT i.job_id, i.attempt, coalesce(i.ts, i.logged_ts) AS ts, i.logged_ts, i.kind, i.rank, i.collective,
       i.ran_for_ms, i.message, i.fields->>'host' AS host, s.path, i.line,
       TRY_CAST(i.fields->>'exitcode' AS INTEGER) AS exit_code, i.fields->>'signal' AS signal,
       TRY_CAST(i.fields->>'root_cause' AS BOOLEAN) AS root_cause, i.fields->>'ended_by' AS ended_by, i.log_attempt
FROM job_incidents_reconciled i LEFT JOIN sources s ON s.source_id = i.source_id
WHERE i.job_id IN (SELECT unnest($jobs)) ORDER BY i.job_id, ts NULLS LAST, i.source_id, i.line, i.kind
"""


@dataclass(frozen=True)
class Event:
    ts: datetime
    host: str
    component: str | None
    entity: str | None  # gpuN for GPU events, else the component as logged
    kind: str
    code: int | None
    message: str | None
    path: str | None
    line: int | None
    layer: str
    category: str
    weight: float
    end: datetime  # the logged recovery (NFS OK, link up), else the event itself


@dataclass(frozen=True)
class Incident:
    attempt: int | None
    ts: datetime | None  # when it began (watchdog: printed time minus "ran for")
    logged_ts: datetime | None
    kind: str
    rank: int | None
    collective: str | None
    ran_for_ms: int | None
    message: str | None
    host: str | None
    path: str | None
    line: int | None
    # worker_failed (formats/training/torch_failures.py): the worker's exit code, its signal, whether torchrun's
    # ChildFailedError named it the root cause (first observed failure)
    exit_code: int | None = None
    signal: str | None = None
    root_cause: bool | None = None
    # job_end (formats/training/slurm_lines.py): what Slurm says ended the attempt (node_failure, requeue, ...)
    ended_by: str | None = None
    log_attempt: int | None = None  # the log's own segment (an in-place restart starts a new one in one attempt)


def typing_params() -> dict[str, object]:
    """EVENTS_SQL's parameters for EVENT_TYPING_SQL and the corrected-AER count (here and in the fleet's read)."""
    return {
        "fell": list(XID_FELL_OFF),
        "mem": list(XID_MEMORY),
        "nvl": list(XID_NVLINK),
        "conseq": list(XID_CONSEQUENCE),
        "app": list(XID_APP),
        "aer_min": AER_CORRECTED_MIN,
    }


def typed_events(conn: duckdb.DuckDBPyConnection, hosts: list[str], start: datetime, end: datetime) -> list[Event]:
    """Events on `hosts` in [start, end] that can be a cause, with category, layer and weight."""
    if not hosts:
        return []
    conn.execute(EVENT_RULES_DDL)
    insert_rows(conn, "_event_rules", [(k, *v, RECOVERY.get(k)) for k, v in EVENT_RULES.items()])
    params = {"start": start, "end": end, **typing_params()}
    params.update({f"h{i}": h for i, h in enumerate(hosts)})
    sql = EVENTS_SQL.format(hosts=", ".join(f"$h{i}" for i in range(len(hosts))))
    return [Event(*r) for r in conn.execute(sql, params).fetchall()]


def incidents(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[Incident]:
    """The job's incidents (NCCL timeouts, CUDA errors, exceptions, SIGTERM, OOM), in time order."""
    return incidents_for(conn, [job_id])[job_id]


def incidents_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, list[Incident]]:
    """incidents for many jobs in one query (a fleet's tax-report)."""
    out: dict[str, list[Incident]] = {j: [] for j in job_ids}
    for job, *row in conn.execute(INCIDENTS_SQL, {"jobs": list(job_ids)}).fetchall():
        out[job].append(Incident(*row))
    return out
