"""One job's candidate series and their samples, staged for signals/anomalies.py.

The job's telemetry (its hosts, the switch ports that serve them, its time windows, the metrics explain
has rules for) is read in two steps, so that the cost of a 1,000-host job is one aggregate pass, not
a million rows through window functions: a summary per series (from the store's hourly summaries,
signals/candidates.py, or else from the samples: `_series`), then the samples of the candidate series
only, into the temp table SCOPE; `stage_scope` returns its handle with the rules' (signals/staging.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.signals.candidates import scope_from_summaries, summaries_cover
from synestra_cli.signals.scope import JobScope
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import (
    CLOCK_EVENT_METRIC,
    CLOCK_EVENT_SIGNALS,
    DISCRETE_METRICS,
    METRIC_RULES,
    MIN_ANOMALY_SAMPLES,
)
from synestra_cli.store.sql import insert_rows, placeholders

# The tables of one job's read (signals/staging.py): each step returns the handle of what it wrote.
RULES = TempTable(
    "_rules", ("metric", "kind", "direction", "floor", "ratio", "delta", "layer", "category", "weight", "discrete")
)
PORTS = TempTable("_ports", ("host", "entity"))  # the switch ports cabled to the job's hosts
SERIES = TempTable("_series", ("host", "entity", "metric", "n", "lo", "hi", "q", "tss", "vs"))
SCOPE = TempTable("_scope", ("ts", "host", "entity", "metric", "value"))  # the candidates' samples

RULES_DDL = """
CREATE OR REPLACE TEMP TABLE {rules} (metric VARCHAR, kind VARCHAR, direction VARCHAR, floor DOUBLE,
    ratio DOUBLE, delta DOUBLE, layer VARCHAR, category VARCHAR, weight DOUBLE, discrete BOOLEAN)
"""
PORTS_DDL = "CREATE OR REPLACE TEMP TABLE {ports} (host VARCHAR, entity VARCHAR)"

# All windows in one statement: a row group holds a host's whole day, series after series, so the host
# list is what lets DuckDB skip row groups (zonemaps), and a statement per window would read the same
# row groups once per window. Job hosts and switch ports go in two statements: an OR across them would
# hide the host list from the zonemaps. Job hosts: every entity; switches: only the ports cabled to them.
SERIES_DDL = """
CREATE OR REPLACE TEMP TABLE {series} (host VARCHAR, entity VARCHAR, metric VARCHAR, n BIGINT, lo DOUBLE,
    hi DOUBLE, q DOUBLE[], tss TIMESTAMP[], vs DOUBLE[])
"""
# One row per series: its summary, and its samples as two lists (so that the candidates' samples need
# no second scan; a list holds a series' few dozen samples of the windows).
_SUMMARY = """
SELECT m.host, m.entity, m.metric, count(*), min(value), max(value),
       quantile_cont(value, [0.25, 0.75]) FILTER (WHERE r.kind = 'gauge'), list(ts), list(value)
FROM metrics m LEFT JOIN {rules} r ON r.metric = m.metric {join}
WHERE ({spans}) AND m.host IN ({hosts}) {entities} AND m.metric IN ({metrics}) AND value IS NOT NULL
GROUP BY m.host, m.entity, m.metric
"""
SERIES_HOSTS_SQL = "INSERT INTO {series} " + _SUMMARY.format(
    rules="{rules}", join="", spans="{spans}", hosts="{hosts}", entities="", metrics="{metrics}"
)
SERIES_PORTS_SQL = "INSERT INTO {series} " + _SUMMARY.format(
    rules="{rules}",
    join="SEMI JOIN {cabled} p ON p.host = m.host AND p.entity = m.entity",
    spans="{spans}",
    hosts="{hosts}",
    entities="AND m.entity IN ({ports})",
    metrics="{metrics}",
)
SCOPE_DDL = """
CREATE OR REPLACE TEMP TABLE {scope} (ts TIMESTAMP, host VARCHAR, entity VARCHAR, metric VARCHAR, value DOUBLE)
"""
# The samples of the candidates only: a gauge whose range crosses its rule (its extreme against its
# other extreme: a superset of the anomaly test below, whose baseline is a quartile of the healthiest
# window, so no candidate is lost), a counter that moved (one that never did has no rate),
# and a clocks-event bitmask that changed (its bits are decoded below; a constant one has no anomaly,
# since each bit is judged against the GPU's own history). The bitmask has no rule of its own: LEFT JOIN.
SCOPE_SQL = """
INSERT INTO {scope} SELECT unnest(s.tss), s.host, s.entity, s.metric, unnest(s.vs)
FROM {series} s LEFT JOIN {rules} r USING (metric)
WHERE CASE WHEN s.metric = ? THEN s.hi > s.lo
           WHEN r.kind = 'counter' THEN s.hi > s.lo
           WHEN r.direction = 'up' THEN s.hi >= r.floor AND s.hi > s.lo * r.ratio + r.delta
           ELSE s.lo <= r.floor AND s.lo < s.hi * r.ratio - r.delta END
"""

# The clocks-event bitmask decoded into one 0/1 sample per signal bit (rules.CLOCK_EVENT_SIGNALS): a
# float export (136.0) reads like an integer one, at whatever rate it was sampled.
CLOCK_BITS_SQL = """
INSERT INTO {scope}
SELECT s.ts, s.host, s.entity, d.metric,
       CASE WHEN s.b & d.bit <> 0 AND s.b & d.unless = 0 THEN 1.0 ELSE 0.0 END
FROM (SELECT ts, host, entity, TRY_CAST(round(value) AS BIGINT) AS b FROM {scope} WHERE metric = ?) s
CROSS JOIN (VALUES {values}) d(metric, bit, unless)
WHERE s.b IS NOT NULL AND s.b >= 0
"""


def load_rules(conn: duckdb.DuckDBPyConnection) -> TempTable:
    """The rules table the anomaly SQL joins (signals/thresholds.py METRIC_RULES)."""
    conn.execute(staged_sql(RULES_DDL, rules=RULES))
    insert_rows(conn, RULES.name, [(*r, r.metric in DISCRETE_METRICS) for r in METRIC_RULES])
    return RULES


@dataclass(frozen=True)
class ScopeRead:
    """What `stage_scope` wrote: the candidates' samples and the rules they are judged by (`anomalies`
    reads both), and the series observed in the windows (> 0 when any sample falls in them)."""

    samples: TempTable
    rules: TempTable
    observed: int


def stage_scope(
    conn: duckdb.DuckDBPyConnection,
    scope: JobScope,
    windows: list[tuple[datetime, datetime]],
    min_samples: int = MIN_ANOMALY_SAMPLES,
    clock_events: bool = True,
) -> ScopeRead:
    """Decide which series of the job's telemetry inside the (sorted, disjoint) windows could hold an
    anomaly window of `min_samples` (as `anomalies` will be asked), from the hourly summaries or else
    from the samples (`_series`), and copy the raw samples of those candidates into SCOPE. `clock_events`
    False: the clocks-event bitmask is not read (the fleet's scan judges the rules' metrics only: fleet/scan.py)."""
    rules = load_rules(conn)
    ports = _load_ports(conn, scope)
    cabled = sorted({(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port})
    switches = sorted({p[0] for p in cabled} - set(scope.hosts))
    port_names = sorted({p[1] for p in cabled})
    derived = {name for name, _, _ in CLOCK_EVENT_SIGNALS}
    metrics = [r.metric for r in METRIC_RULES if r.metric not in derived] + [CLOCK_EVENT_METRIC] * clock_events
    conn.execute(staged_sql(SERIES_DDL, series=SERIES))
    samples = empty_scope(conn)
    if not windows:
        return ScopeRead(samples, rules, 0)
    observed = None
    if summaries_cover(conn, windows[0][0], windows[-1][1]):
        staged = (samples, rules, ports)
        observed = scope_from_summaries(conn, *staged, windows, scope.hosts, switches, port_names, metrics, min_samples)
    if observed is None:
        samples = empty_scope(conn)
        observed = _scope_from_samples(conn, samples, rules, ports, windows, scope.hosts, switches, port_names, metrics)
    values = ", ".join(["(?, ?, ?)"] * len(CLOCK_EVENT_SIGNALS))
    bits = [v for signal in CLOCK_EVENT_SIGNALS for v in signal]
    conn.execute(staged_sql(CLOCK_BITS_SQL, scope=samples).format(values=values), [CLOCK_EVENT_METRIC, *bits])
    return ScopeRead(samples, rules, observed)


def build_scope(
    conn: duckdb.DuckDBPyConnection,
    scope: JobScope,
    windows: list[tuple[datetime, datetime]],
    min_samples: int = MIN_ANOMALY_SAMPLES,
    clock_events: bool = True,
) -> int:
    """stage_scope's series observed, for a caller that reads SCOPE by its default handle."""
    return stage_scope(conn, scope, windows, min_samples, clock_events).observed


def empty_scope(conn: duckdb.DuckDBPyConnection) -> TempTable:
    conn.execute(staged_sql(SCOPE_DDL, scope=SCOPE))
    return SCOPE


def _load_ports(conn: duckdb.DuckDBPyConnection, scope: JobScope) -> TempTable:
    """The switch ports cabled to the job's hosts."""
    conn.execute(staged_sql(PORTS_DDL, ports=PORTS))
    cabled = sorted({(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port})
    # two list parameters, not one per value: a 1,024-host job has 8,192 ports
    conn.execute(
        f"INSERT INTO {PORTS} SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
        [[p[0] for p in cabled], [p[1] for p in cabled]],
    )
    return PORTS


def _scope_from_samples(
    conn: duckdb.DuckDBPyConnection,
    samples: TempTable,
    rules: TempTable,
    ports: TempTable,
    windows: list[tuple[datetime, datetime]],
    hosts: list[str],
    switches: list[str],
    port_names: list[str],
    metrics: list[str],
) -> int:
    """Without summaries (a store opened read-only before migration 012, or a source not yet
    summarised): every series summarised from its samples in one scan, then the candidates kept."""
    spans = " OR ".join(["ts BETWEEN ? AND ?"] * len(windows))
    bounds = [t for window in windows for t in window]
    conn.execute(
        staged_sql(SERIES_HOSTS_SQL, series=SERIES, rules=rules).format(
            spans=spans, hosts=placeholders(len(hosts)), metrics=placeholders(len(metrics))
        ),
        [*bounds, *hosts, *metrics],
    )
    if switches:
        conn.execute(
            staged_sql(SERIES_PORTS_SQL, series=SERIES, rules=rules, cabled=ports).format(
                spans=spans,
                hosts=placeholders(len(switches)),
                ports=placeholders(len(port_names)),
                metrics=placeholders(len(metrics)),
            ),
            [*bounds, *switches, *port_names, *metrics],
        )
    conn.execute(staged_sql(SCOPE_SQL, scope=samples, series=SERIES, rules=rules), [CLOCK_EVENT_METRIC])
    return SERIES.rows(conn)
