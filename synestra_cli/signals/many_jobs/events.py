"""Each job's typed events in its own time range, for many jobs in one statement (a fleet's cold
tax-report, signals/many_jobs/telemetry.py): signals/events.py `typed_events` with the job as the first key, so
each job gets exactly the events it would read alone."""

from __future__ import annotations

from datetime import datetime

import duckdb

from synestra_cli.signals.events import EVENT_KEPT_SQL, EVENT_STATE_SQL, EVENT_TYPING_SQL, Event, typing_params
from synestra_cli.signals.thresholds import EVENT_RULES, RECOVERY
from synestra_cli.store.sql import insert_rows

EventRead = tuple[list[str], datetime, datetime]  # hosts (and switches), from, to
EVENT_TABLES = ("_fev", "_fevent_rules")


# signals/events.py EVENTS_SQL, per job: each job's events on its hosts in its own time range, the
# repeats counted and the recoveries found within it.
EVENT_RULES_DDL = """
CREATE OR REPLACE TEMP TABLE _fevent_rules (kind VARCHAR, layer VARCHAR, category VARCHAR, weight DOUBLE,
    recovery VARCHAR)
"""
EVENT_READS_DDL = """
CREATE OR REPLACE TEMP TABLE _fev AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($hosts::VARCHAR[]) AS host, unnest($lo::TIMESTAMP[]) AS lo,
       unnest($hi::TIMESTAMP[]) AS hi
"""
EVENTS_SQL = f"""
WITH e AS (
    SELECT j.job AS _job, j.hi AS _end, e.*, {EVENT_STATE_SQL}
    FROM events e JOIN _fev j ON j.host = e.host AND e.ts BETWEEN j.lo AND j.hi
    WHERE e.host IN (SELECT host FROM _fev)
), typed AS (
    SELECT e.*,
        {EVENT_TYPING_SQL},
        count(*) OVER (PARTITION BY e._job, e.host, e.component, e.kind, e.corrected) AS repeats, r.recovery
    FROM e LEFT JOIN _fevent_rules r ON r.kind = e.kind
)
SELECT t._job, t.ts, t.host, t.component, coalesce(g.entity, t.component) AS entity, t.kind, t.code,
       t.message, s.path, t.line, t.layer, t.category, t.weight,
       CASE WHEN t.recovery IS NULL THEN t.ts ELSE coalesce(r.ts, t._end) END AS end_ts
FROM typed t
ASOF LEFT JOIN (SELECT j.job, e.host, e.component, e.kind, e.ts
                FROM events e JOIN _fev j ON j.host = e.host AND e.ts BETWEEN j.lo AND j.hi
                WHERE e.host IN (SELECT host FROM _fev) AND e.kind IN (SELECT recovery FROM _fevent_rules)) r
       ON r.job = t._job AND r.host = t.host AND r.component IS NOT DISTINCT FROM t.component
          AND r.kind = t.recovery AND r.ts >= t.ts
LEFT JOIN (SELECT DISTINCT host, entity, pci_bus_id FROM gpus) g
       ON g.host = t.host AND upper(g.pci_bus_id) = upper(t.component)
LEFT JOIN sources s ON s.source_id = t.source_id
WHERE {EVENT_KEPT_SQL}
ORDER BY t._job, t.ts
"""


def fleet_events(conn: duckdb.DuckDBPyConnection, reads: dict[str, EventRead]) -> dict[str, list[Event]]:
    """Each job's typed events, as `typed_events` reads them for its hosts and time range alone."""
    conn.execute(EVENT_RULES_DDL)
    insert_rows(conn, "_fevent_rules", [(k, *v, RECOVERY.get(k)) for k, v in EVENT_RULES.items()])
    rows = [(j, h, lo, hi) for j, (hosts, lo, hi) in reads.items() for h in hosts]
    conn.execute(EVENT_READS_DDL, {k: [w[i] for w in rows] for i, k in enumerate(("jobs", "hosts", "lo", "hi"))})
    params = typing_params()
    out: dict[str, list[Event]] = {j: [] for j in reads}
    for j, *row in conn.execute(EVENTS_SQL, params).fetchall():
        out[j].append(Event(*row))
    return out
