"""Per-entity anomaly windows for gauges and counter rates, against the entity's own history.

The job's telemetry is first copied into a temp table `_scope` (its hosts, the switch ports that serve
them, its time window, the metrics explain has rules for): every later query reads only that. Each
entity's baseline is a low (or, for "down is bad" gauges, high) quantile of its own samples, so a
fault covering less than three quarters of the scope cannot hide itself; a sample is anomalous when
it crosses both the rule's absolute floor and the baseline by the rule's ratio and margin. Consecutive
anomalous samples form a window (gaps and islands).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.signals.counters import SCOPE_RATES_SQL
from synestra_cli.signals.scope import JobScope, insert_rows, placeholders, scalar
from synestra_cli.signals.thresholds import (
    CLOCK_EVENT_METRIC,
    CLOCK_EVENT_SIGNALS,
    DISCRETE_METRICS,
    METRIC_RULES,
    MIN_ANOMALY_SAMPLES,
)

RULES_DDL = """
CREATE OR REPLACE TEMP TABLE _rules (metric VARCHAR, kind VARCHAR, direction VARCHAR, floor DOUBLE,
    ratio DOUBLE, delta DOUBLE, layer VARCHAR, category VARCHAR, weight DOUBLE, discrete BOOLEAN)
"""
PORTS_DDL = "CREATE OR REPLACE TEMP TABLE _ports (host VARCHAR, entity VARCHAR)"

# Job hosts: every entity; switches: only the ports cabled to the job's hosts.
SCOPE_DDL = """
CREATE OR REPLACE TEMP TABLE _scope (ts TIMESTAMP, host VARCHAR, entity VARCHAR, metric VARCHAR, value DOUBLE)
"""
# All windows in one statement: a row group holds a host's whole day, series after series, so the host
# list is what lets DuckDB skip row groups (zonemaps), and a statement per window would read the same
# row groups once per window. Job hosts and switch ports go in two statements: an OR across them would
# hide the host list from the zonemaps.
SCOPE_HOSTS_SQL = """
INSERT INTO _scope SELECT ts, host, entity, metric, value FROM metrics
WHERE ({spans}) AND host IN ({hosts}) AND metric IN ({metrics})
"""
SCOPE_PORTS_SQL = """
INSERT INTO _scope SELECT ts, m.host, m.entity, metric, value
FROM metrics m SEMI JOIN _ports p ON p.host = m.host AND p.entity = m.entity
WHERE ({spans}) AND m.host IN ({switches}) AND m.entity IN ({ports}) AND metric IN ({metrics})
"""

# The clocks-event bitmask decoded into one 0/1 sample per signal bit (rules.CLOCK_EVENT_SIGNALS): a
# float export (136.0) reads like an integer one, at whatever rate it was sampled.
CLOCK_BITS_SQL = """
INSERT INTO _scope
SELECT s.ts, s.host, s.entity, d.metric,
       CASE WHEN s.b & d.bit <> 0 AND s.b & d.unless = 0 THEN 1.0 ELSE 0.0 END
FROM (SELECT ts, host, entity, TRY_CAST(round(value) AS BIGINT) AS b FROM _scope WHERE metric = ?) s
CROSS JOIN (VALUES {values}) d(metric, bit, unless)
WHERE s.b IS NOT NULL AND s.b >= 0
"""

# Each scoped sample's signal value: the rate for counters, the value for gauges (materialised once).
SIGNAL_SQL = f"""
CREATE OR REPLACE TEMP TABLE _sig AS
SELECT s.ts, s.prev_ts, s.host, s.entity, s.metric, CASE WHEN r.kind = 'counter' THEN s.rate ELSE s.value END AS x
FROM ({SCOPE_RATES_SQL}) s JOIN _rules r USING (metric)
"""

# Per series: its baseline and threshold; only series whose extreme crosses it go on to the windows.
ANOMALIES_SQL = """
WITH base AS (
    SELECT host, entity, metric, quantile_cont(x, [0.25, 0.75]) AS q, max(x) AS hi, min(x) AS lo
    FROM _sig WHERE x IS NOT NULL GROUP BY host, entity, metric
), cand AS (
    SELECT host, entity, metric, hi, lo, r.* EXCLUDE (metric),
           CASE WHEN r.direction = 'up' THEN q[1] ELSE q[2] END AS b
    FROM base JOIN _rules r USING (metric)
), limits AS (
    SELECT *, CASE WHEN direction = 'up' THEN greatest(floor, b * ratio + delta)
                   ELSE least(floor, b * ratio - delta) END AS threshold
    FROM cand
    WHERE CASE WHEN direction = 'up' THEN hi >= floor AND hi > b * ratio + delta
               ELSE lo <= floor AND lo < b * ratio - delta END
), flagged AS (
    SELECT s.ts, s.prev_ts, s.x, l.*,
           coalesce(CASE WHEN l.direction = 'up' THEN s.x >= l.floor AND s.x > l.b * l.ratio + l.delta
                         ELSE s.x <= l.floor AND s.x < l.b * l.ratio - l.delta END, false) AS bad,
           row_number() OVER (PARTITION BY s.host, s.entity, s.metric ORDER BY s.ts) AS rn
    FROM _sig s JOIN limits l ON l.host = s.host AND l.entity IS NOT DISTINCT FROM s.entity AND l.metric = s.metric
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY host, entity, metric ORDER BY ts) AS island
    FROM flagged WHERE bad
)
SELECT host, entity, metric, any_value(layer), any_value(category), any_value(weight),
       -- the change happened between the last normal sample and the first anomalous one: midway
       min(ts) - coalesce((min(ts) - arg_min(prev_ts, ts)) / 2, INTERVAL 0 SECOND) AS onset,
       max(ts) AS last, any_value(b) AS before, median(x) AS after,
       CASE WHEN any_value(direction) = 'up' THEN max(x) ELSE min(x) END AS peak, count(*) AS n,
       any_value(kind), coalesce(arg_min(prev_ts, ts), min(ts)) AS last_normal, any_value(threshold)
FROM islands GROUP BY host, entity, metric, island
HAVING count(*) >= ? OR bool_or(discrete)
ORDER BY onset
"""


@dataclass(frozen=True)
class Anomaly:
    host: str
    entity: str | None
    metric: str
    layer: str
    category: str
    weight: float
    onset: datetime  # midway between the last normal sample and the first anomalous one
    end: datetime  # last anomalous sample
    before: float  # the entity's own baseline (a rate per second for counters)
    after: float  # median inside the window
    peak: float
    samples: int
    is_rate: bool
    last_normal: datetime  # the sample before the window: the change happened after it
    threshold: float  # the level this entity had to cross to be anomalous

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        """When the change happened: after the last normal sample, by the first anomalous one."""
        first_bad = self.onset + (self.onset - self.last_normal)
        return self.last_normal, first_bad

    @property
    def magnitude(self) -> float:
        """How many times the anomaly threshold's margin over the baseline the window's median
        reached (>= about 1): a symbol error per scrape is ~2, a dying optic thousands."""
        margin = abs(self.threshold - self.before)
        return abs(self.after - self.before) / margin if margin > 0 else 1.0


def _load_rules(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(RULES_DDL)
    insert_rows(conn, "_rules", [(*r, r.metric in DISCRETE_METRICS) for r in METRIC_RULES])


def build_scope(conn: duckdb.DuckDBPyConnection, scope: JobScope, windows: list[tuple[datetime, datetime]]) -> int:
    """Copy the job's telemetry inside the (disjoint) windows into the temp table `_scope`; its rows."""
    _load_rules(conn)
    conn.execute(PORTS_DDL)
    ports = sorted({(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port})
    insert_rows(conn, "_ports", ports)
    switches = sorted({p[0] for p in ports} - set(scope.hosts))
    port_names = sorted({p[1] for p in ports})
    derived = {name for name, _, _ in CLOCK_EVENT_SIGNALS}
    metrics = [r.metric for r in METRIC_RULES if r.metric not in derived] + [CLOCK_EVENT_METRIC]
    spans = " OR ".join(["ts BETWEEN ? AND ?"] * len(windows))
    bounds = [t for window in windows for t in window]
    conn.execute(SCOPE_DDL)
    if not windows:
        return 0
    conn.execute(SCOPE_HOSTS_SQL.format(spans=spans, hosts=placeholders(len(scope.hosts)),
                                        metrics=placeholders(len(metrics))), [*bounds, *scope.hosts, *metrics])
    if switches:
        conn.execute(SCOPE_PORTS_SQL.format(spans=spans, switches=placeholders(len(switches)),
                                            ports=placeholders(len(port_names)), metrics=placeholders(len(metrics))),
                     [*bounds, *switches, *port_names, *metrics])
    values = ", ".join(["(?, ?, ?)"] * len(CLOCK_EVENT_SIGNALS))
    bits = [v for signal in CLOCK_EVENT_SIGNALS for v in signal]
    conn.execute(CLOCK_BITS_SQL.format(values=values), [CLOCK_EVENT_METRIC, *bits])
    return int(scalar(conn, "SELECT count(*) FROM _scope"))


def anomalies(conn: duckdb.DuckDBPyConnection, min_samples: int = MIN_ANOMALY_SAMPLES) -> list[Anomaly]:
    """Anomaly windows over `_scope` (build_scope first), in onset order. `min_samples`: risks asks
    for single-sample windows too, and then wants them corroborated (fleet/scan.py)."""
    conn.execute(SIGNAL_SQL)
    rows = conn.execute(ANOMALIES_SQL, [min_samples]).fetchall()
    return [
        Anomaly(h, e, m, ly, c, w, on, last, b, a, pk, n, kind == "counter", normal, thr)
        for h, e, m, ly, c, w, on, last, b, a, pk, n, kind, normal, thr in rows
    ]
