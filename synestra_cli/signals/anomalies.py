"""Per-entity anomaly windows for gauges and counter rates, against the entity's own history.

The job's telemetry (its hosts, the switch ports that serve them, its time windows, the metrics explain
has rules for) is read in two steps, so that the cost of a 1,000-host job is one aggregate pass, not
a million rows through window functions:

1. one summary row per series (`_series`: count, min, max, gauge quartiles), streamed by DuckDB's hash
   aggregate straight from the scan. A gauge is a candidate when its own extreme crosses the rule
   (the test below, exactly); a counter when it moved at all in the window (a counter that never
   moved has no rate to be anomalous). Almost every series of a healthy job stops here;
2. the samples of the candidate series only (kept as lists by the same aggregate: no second scan),
   into the temp table `_scope`, which every later query reads.

Both steps are signals/scope_samples.py's: `stage_scope` returns the handles of the samples and rules it
wrote (signals/staging.py), and `anomalies` here takes them and judges the samples.

Each entity's baseline is a low (or, for "down is bad" gauges, high) quantile of its own samples, so a
fault covering less than three quarters of the scope cannot hide itself; a sample is anomalous when
it crosses both the rule's absolute floor and the baseline by the rule's ratio and margin. Consecutive
anomalous samples form a window (gaps and islands), with at least two of them in a row inside one read
window (a discrete metric: one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from synestra_cli.signals.baselines import (
    BAD_SAMPLE_SQL,
    BASE_SQL,
    HEALTHIEST_SQL,
    MIN_BASELINE_SAMPLES,
    ONSET_SQL,
    PER_WINDOW_SQL,
    POOLED_SQL,
    limits_sql,
    pre_onset_sql,
)
from synestra_cli.signals.counters import distinct_rates_sql
from synestra_cli.signals.scope_samples import RULES, SCOPE
from synestra_cli.signals.scope_samples import build_scope as build_scope  # its callers' name (tests, risks)
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import (
    MIN_ANOMALY_SAMPLES,
    PEER_ORDINARY_DECADES,
)

# The tables of the anomaly SQL (signals/staging.py); the samples it judges are staged by signals/scope_samples.py.
WINDOWS = TempTable("_windows", ("w", "lo", "hi"))  # the read windows
IDLE = TempTable("_idle", ("lo", "hi"))  # the job's own idle spans
SIG = TempTable("_sig", ("ts", "prev_ts", "host", "entity", "metric", "x", "ok"))  # each sample's signal value

WINDOWS_DDL = "CREATE OR REPLACE TEMP TABLE {windows} (w BIGINT, lo TIMESTAMP, hi TIMESTAMP)"
# Each scoped sample's signal value: the rate for counters, the value for gauges (materialised once).
# A sample is comparable unless it was taken in one of the job's own idle spans (explain/inputs.py
# comparable: its saves and restores, each attempt's start-up and end around its iteration lines, the
# gaps between attempts). The GPUs of a job that hangs, restarts, waits between attempts or writes a
# checkpoint are idle and cool: a quartile over those samples put job 1003's memory temperature baseline
# at 74 C where the samples before the event read 81-84 (issue 34). The samples before and after the job
# are the hosts' own, as they were: a fault that began before the job's first iteration line is still
# measured against them. The spans are disjoint and sorted, so the latest one starting at or before the
# sample (an ASOF join) is the only one that can hold it.
COMPARABLE_SQL = "(i.hi IS NULL OR s.ts > i.hi)"
IDLE_DDL = "CREATE OR REPLACE TEMP TABLE {idle} AS SELECT unnest(?::TIMESTAMP[]) AS lo, unnest(?::TIMESTAMP[]) AS hi"
# `ok`: the sample is comparable (COMPARABLE_SQL): it may make the baseline.
SIGNAL_SQL = f"""
CREATE OR REPLACE TEMP TABLE {{sig}} AS
SELECT s.ts, s.prev_ts, s.host, s.entity, s.metric, CASE WHEN r.kind = 'counter' THEN s.rate ELSE s.value END AS x,
       {COMPARABLE_SQL} AS ok
FROM ({distinct_rates_sql("{scope}")}) s JOIN {{rules}} r USING (metric)
ASOF LEFT JOIN {{idle}} i ON s.ts >= i.lo
"""

# Per series: its baseline and threshold (signals/baselines.py); only series whose extreme crosses it go
# on to the windows. An anomaly window is a run of samples past the threshold with `min_samples` of them
# in a row inside one read window: the scope holds the last sample of one window beside the first of the
# next, but the samples between were not read, so those two alone are not known to be in a row (nor
# could the summaries' pair test bound them). A run that has its samples in a row goes on across the
# gap, as a fault still there after it.
ANOMALIES_SQL = f"""
WITH pooled AS (
    SELECT host, entity, metric, {POOLED_SQL}
    FROM {{sig}} WHERE x IS NOT NULL GROUP BY host, entity, metric
), per_window AS (
    SELECT s.host, s.entity, s.metric, w.w, {PER_WINDOW_SQL}
    FROM {{sig}} s JOIN {{windows}} w ON s.ts BETWEEN w.lo AND w.hi
    WHERE s.x IS NOT NULL AND s.ok GROUP BY s.host, s.entity, s.metric, w.w HAVING count(*) >= ?
), healthiest AS (
    SELECT host, entity, metric, {HEALTHIEST_SQL} FROM per_window GROUP BY host, entity, metric
), base AS (
    SELECT p.host, p.entity, p.metric, p.hi, p.lo, {BASE_SQL}
    FROM pooled p LEFT JOIN healthiest h
         ON h.host = p.host AND h.entity IS NOT DISTINCT FROM p.entity AND h.metric = p.metric
), cand0 AS (
    SELECT host, entity, metric, hi, lo, r.* EXCLUDE (metric),
           CASE WHEN r.direction = 'up' THEN q[1] ELSE q[2] END AS b,
           CASE WHEN r.direction = 'up' THEN p1 ELSE p2 END AS prov
    FROM base JOIN {{rules}} r USING (metric)
), limits0 AS (
    SELECT *, {limits_sql("cand0")}
), {pre_onset_sql("{sig}", ("host", "entity", "metric"))}, flagged AS (
    SELECT s.ts, s.prev_ts, s.x, l.*,
           {BAD_SAMPLE_SQL},
           row_number() OVER (PARTITION BY s.host, s.entity, s.metric ORDER BY s.ts, s.x) AS rn, w.w AS win
    FROM {{sig}} s JOIN limits l ON l.host = s.host AND l.entity IS NOT DISTINCT FROM s.entity AND l.metric = s.metric
    LEFT JOIN {{windows}} w ON s.ts BETWEEN w.lo AND w.hi
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY host, entity, metric ORDER BY rn) AS island
    FROM flagged WHERE bad
), pieces AS (
    SELECT *, count(*) OVER (PARTITION BY host, entity, metric, island, win) AS piece FROM islands
), windows AS (
    SELECT host, entity, metric, any_value(layer) AS layer, any_value(category) AS category,
           any_value(weight) AS weight, min(ts) AS first_bad, max(ts) AS last, any_value(b) AS b,
           median(x) AS after, CASE WHEN any_value(direction) = 'up' THEN max(x) ELSE min(x) END AS peak,
           count(*) AS n, max(piece) AS in_a_row, any_value(kind) AS kind, arg_min(prev_ts, ts) AS prev0,
           arg_min(x, ts) AS x0, any_value(threshold) AS threshold, bool_or(discrete) AS discrete,
           list(x ORDER BY ts)[2:] AS rest,  -- the window's own rate comes after its first sample
           any_value(prov) AS prov
    FROM pieces GROUP BY host, entity, metric, island
)
SELECT host, entity, metric, layer, category, weight,
       -- The change happened between the last normal sample and the first anomalous one. A counter
       -- dates it inside that interval: its first delta is the old rate up to the onset and the
       -- window's own rate after it (a scrape every 5 min would otherwise blur it by 2.5 min). A
       -- gauge, or a window of one sample: midway.
       {ONSET_SQL},
       last, b AS before, after, peak, n, kind, coalesce(prev0, first_bad) AS last_normal, threshold, first_bad,
       prov.f, prov.t, prov.n
FROM windows
WHERE in_a_row >= ? OR discrete
ORDER BY onset, host, entity, metric, first_bad  -- a total order: windows with one onset came either way
"""


@dataclass(frozen=True)
class Peers:
    """The same metric on the job's other entities of the same side (signals/peers.py): against these,
    not its own history, the series was found anomalous."""

    series: int  # the series of the metric and side compared, the suspect included
    median: float  # their median rate (per s)
    max: float  # the highest rate of the others
    ratio: float  # the series' rate / max(median, the metric's quiet level)
    found: bool = True  # True: the evidence itself; False: context for a window found against its own history


@dataclass(frozen=True)
class Anomaly:
    host: str
    entity: str | None
    metric: str
    layer: str
    category: str
    weight: float
    onset: datetime  # in the interval before the first anomalous sample (counters: dated by their rate)
    end: datetime  # last anomalous sample
    before: float  # the entity's own baseline (a rate per second for counters)
    after: float  # median inside the window
    peak: float
    samples: int
    is_rate: bool
    last_normal: datetime  # the sample before the window: the change happened after it
    threshold: float  # the level this entity had to cross to be anomalous
    first_bad: datetime  # the first anomalous sample: the change happened by then
    # the comparable samples `before` was taken over: the first's and last's times, and how many
    baseline_from: datetime | None = None
    baseline_to: datetime | None = None
    baseline_samples: int = 0
    # found against its peers (peers.found; before: their median), or its own history's window set beside them
    peers: Peers | None = None

    @property
    def ordinary(self) -> bool:
        """A window found against its own history on a series no busier than its peers over the hours read
        (less than a decade above their median or its metric's quiet level): a burst of the background."""
        return self.peers is not None and not self.peers.found and self.peers.ratio < 10**PEER_ORDINARY_DECADES

    @property
    def bounds(self) -> tuple[datetime, datetime]:
        """When the change happened: after the last normal sample, by the first anomalous one."""
        return self.last_normal, self.first_bad

    @property
    def magnitude(self) -> float:
        """How many times the anomaly threshold's margin over the baseline the window's median
        reached (>= about 1): a symbol error per scrape is ~2, a dying optic thousands."""
        margin = abs(self.threshold - self.before)
        return abs(self.after - self.before) / margin if margin > 0 else 1.0


@dataclass(frozen=True)
class Comparable:
    """When a job's samples are not comparable with the rest (COMPARABLE_SQL): its own idle spans (saves,
    restores, start-ups, hangs, requeues), sorted and disjoint."""

    idle: list[tuple[datetime, datetime]] = field(default_factory=list)


def disjoint(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    """Sorted, overlapping spans merged (an ASOF join finds a sample's span only among disjoint ones)."""
    out: list[tuple[datetime, datetime]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def load_comparable(conn: duckdb.DuckDBPyConnection, comparable: Comparable | None) -> TempTable:
    """The job's idle spans, for SIGNAL_SQL."""
    spans = (comparable or Comparable()).idle
    conn.execute(staged_sql(IDLE_DDL, idle=IDLE), [[lo for lo, _ in spans], [hi for _, hi in spans]])
    return IDLE


def _load_windows(conn: duckdb.DuckDBPyConnection, windows: list[tuple[datetime, datetime]] | None) -> TempTable:
    conn.execute(staged_sql(WINDOWS_DDL, windows=WINDOWS))
    if windows:
        conn.execute(
            f"INSERT INTO {WINDOWS} SELECT unnest(range(?)), unnest(?::TIMESTAMP[]), unnest(?::TIMESTAMP[])",
            [len(windows), [w[0] for w in windows], [w[1] for w in windows]],
        )
    return WINDOWS


def anomalies(
    conn: duckdb.DuckDBPyConnection,
    min_samples: int = MIN_ANOMALY_SAMPLES,
    windows: list[tuple[datetime, datetime]] | None = None,
    comparable: Comparable | None = None,
    samples: TempTable = SCOPE,
    rules: TempTable = RULES,
) -> list[Anomaly]:
    """Anomaly windows over `samples` judged by `rules` (stage_scope's ScopeRead), in onset order.
    `min_samples`: risks asks for single-sample windows too, and then wants them corroborated
    (fleet/scan.py). `windows`: the read windows of the scope, each a candidate baseline (None: one, all
    samples pooled). `comparable`: when the job's samples may make a baseline (None: all of them)."""
    idle = load_comparable(conn, comparable)
    conn.execute(staged_sql(SIGNAL_SQL, sig=SIG, scope=samples, rules=rules, idle=idle))
    read = _load_windows(conn, windows)
    sql = staged_sql(ANOMALIES_SQL, sig=SIG, windows=read, rules=rules)
    rows = conn.execute(sql, [MIN_BASELINE_SAMPLES, min_samples]).fetchall()
    return [anomaly_of(row) for row in rows]


def anomaly_of(row: tuple[Any, ...]) -> Anomaly:
    """An Anomaly from a row of ANOMALIES_SQL (or the fleet's, past its job column)."""
    h, e, m, ly, c, w, on, last, b, a, pk, n, kind, normal, thr, first, b_from, b_to, b_n = row
    return Anomaly(h, e, m, ly, c, w, on, last, b, a, pk, n, kind == "counter", normal, thr, first, b_from, b_to, b_n)
