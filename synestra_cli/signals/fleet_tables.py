"""What the fleet's read (signals/fleet_telemetry.py) is asked, loaded as the temp tables its statements
join: each job's read windows and hull, idle spans, hosts and the switch ports cabled to them, and the
rules. `load_tables` returns their handles (signals/staging.py); every later step takes them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.signals.anomalies import Comparable
from synestra_cli.signals.fleet_events import EventRead
from synestra_cli.signals.scope import JobScope
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import DISCRETE_METRICS, METRIC_RULES
from synestra_cli.store.sql import insert_rows

Window = tuple[datetime, datetime]

RULES = TempTable(
    "_frules", ("metric", "kind", "direction", "floor", "ratio", "delta", "layer", "category", "weight", "discrete")
)
JOBS = TempTable("_fjobs", ("job", "lo", "hi", "wins"))  # each job's hull, and its windows as a list
WINDOWS = TempTable("_fwin", ("job", "w", "lo", "hi"))
IDLE = TempTable("_fidle", ("job", "lo", "hi"))  # each job's idle spans (signals/anomalies.py COMPARABLE_SQL)
HOSTS = TempTable("_fhosts", ("job", "host"))
PORTS = TempTable("_fports", ("job", "host", "entity"))  # the switch ports cabled to each job's hosts

RULES_DDL = """
CREATE OR REPLACE TEMP TABLE {rules} (metric VARCHAR, kind VARCHAR, direction VARCHAR, floor DOUBLE,
    ratio DOUBLE, delta DOUBLE, layer VARCHAR, category VARCHAR, weight DOUBLE, discrete BOOLEAN)
"""
# Per job: its hull (first window's start to last window's end); its windows; its hosts (every entity)
# and the switch ports cabled to them.
JOBS_DDL = """
CREATE OR REPLACE TEMP TABLE {jobs} AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($lo::TIMESTAMP[]) AS lo, unnest($hi::TIMESTAMP[]) AS hi
"""
WINDOWS_DDL = """
CREATE OR REPLACE TEMP TABLE {windows} AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($w::BIGINT[]) AS w, unnest($lo::TIMESTAMP[]) AS lo,
       unnest($hi::TIMESTAMP[]) AS hi
"""
# Each job's windows as a list on its row (signals/fleet_candidates.py tests a summary row against them
# without a join).
WINDOW_LISTS_SQL = """
CREATE OR REPLACE TEMP TABLE {jobs} AS
SELECT j.*, (SELECT list({'lo': w.lo, 'hi': w.hi} ORDER BY w.w) FROM {windows} w WHERE w.job = j.job) AS wins
FROM {jobs} j
"""
HOSTS_DDL = """
CREATE OR REPLACE TEMP TABLE {hosts} AS SELECT unnest($jobs::VARCHAR[]) AS job, unnest($hosts::VARCHAR[]) AS host
"""
PORTS_DDL = """
CREATE OR REPLACE TEMP TABLE {ports} AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($hosts::VARCHAR[]) AS host, unnest($entities::VARCHAR[]) AS entity
"""
# Each job's idle spans (signals/anomalies.py COMPARABLE_SQL), sorted and disjoint per job.
SPANS_DDL = """
CREATE OR REPLACE TEMP TABLE {idle} AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($lo::TIMESTAMP[]) AS lo, unnest($hi::TIMESTAMP[]) AS hi
"""


@dataclass(frozen=True)
class JobRead:
    """What explain reads of one job's telemetry: its scope in its read windows, its events."""

    scope: JobScope
    windows: list[Window]  # sorted, disjoint
    event_read: EventRead  # hosts (and switches), from, to
    comparable: Comparable | None = None  # when its samples may make a baseline (None: all of them)


@dataclass(frozen=True)
class FleetTables:
    """The handles `load_tables` returns."""

    rules: TempTable
    jobs: TempTable
    windows: TempTable
    idle: TempTable
    hosts: TempTable
    ports: TempTable

    def all(self) -> tuple[TempTable, ...]:
        return (self.rules, self.jobs, self.windows, self.idle, self.hosts, self.ports)


def load_tables(conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]) -> FleetTables:
    """The jobs, their windows, idle spans, hosts and switch ports, and the rules, into their temp tables."""
    conn.execute(staged_sql(RULES_DDL, rules=RULES))
    insert_rows(conn, RULES.name, [(*r, r.metric in DISCRETE_METRICS) for r in METRIC_RULES])
    jobs = list(reads)
    wins = [(j, i, lo, hi) for j in jobs for i, (lo, hi) in enumerate(reads[j].windows)]
    hosts = [(j, h) for j in jobs for h in reads[j].scope.hosts]
    ports = []
    for j in jobs:
        scope = reads[j].scope
        cabled = {(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port}
        ports += [(j, sw, port) for sw, port in sorted(cabled) if sw not in set(scope.hosts)]
    hull = {"jobs": jobs, "lo": [reads[j].windows[0][0] for j in jobs], "hi": [reads[j].windows[-1][1] for j in jobs]}
    conn.execute(staged_sql(JOBS_DDL, jobs=JOBS), hull)
    windows = {k: [w[i] for w in wins] for i, k in enumerate(("jobs", "w", "lo", "hi"))}
    conn.execute(staged_sql(WINDOWS_DDL, windows=WINDOWS), windows)
    conn.execute(staged_sql(WINDOW_LISTS_SQL, jobs=JOBS, windows=WINDOWS))
    idle = [(j, lo, hi) for j in jobs for lo, hi in (reads[j].comparable or Comparable()).idle]
    conn.execute(
        staged_sql(SPANS_DDL, idle=IDLE), {k: [x[i] for x in idle] for i, k in enumerate(("jobs", "lo", "hi"))}
    )
    conn.execute(staged_sql(HOSTS_DDL, hosts=HOSTS), {"jobs": [h[0] for h in hosts], "hosts": [h[1] for h in hosts]})
    cabled_by_job = {"jobs": [p[0] for p in ports], "hosts": [p[1] for p in ports], "entities": [p[2] for p in ports]}
    conn.execute(staged_sql(PORTS_DDL, ports=PORTS), cabled_by_job)
    return FleetTables(RULES, JOBS, WINDOWS, IDLE, HOSTS, PORTS)
