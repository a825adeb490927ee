"""Step 3 of the fleet's read (signals/fleet_telemetry.py): every job's rates and anomaly windows against
each series' healthiest read window of that job, in one statement: signals/anomalies.py's SQL per series,
with the job added, over the candidates' samples (`samples`) and the handles of signals/fleet_tables.py and
signals/fleet_candidates.py."""

from __future__ import annotations

import duckdb

from synestra_cli.signals.anomalies import Anomaly, anomaly_of
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
from synestra_cli.signals.fleet_candidates import FleetCandidates, clock_bits
from synestra_cli.signals.fleet_tables import FleetTables
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import CLOCK_EVENT_METRIC, MIN_ANOMALY_SAMPLES

SIG = TempTable("_fsig", ("sid", "ts", "prev_ts", "x", "win", "rn", "ok"))  # each sample's signal value

# signals/anomalies.py CLOCK_BITS_SQL, per job.
CLOCK_BITS_SQL = """
INSERT INTO {scope}
SELECT s.sid + d.k, s.ts, CASE WHEN s.b & d.bit <> 0 AND s.b & d.unless = 0 THEN 1.0 ELSE 0.0 END, s.win
FROM (SELECT sid, ts, TRY_CAST(round(value) AS BIGINT) AS b, win FROM {scope}
      WHERE sid IN (SELECT sid FROM {cand} WHERE metric = ?)) s
CROSS JOIN (VALUES {values}) d(k, metric, bit, unless)
WHERE s.b IS NOT NULL AND s.b >= 0 AND s.sid + d.k IN (SELECT sid FROM {series})
"""
# signals/counters.py _RATES and signals/anomalies.py SIGNAL_SQL, per series; with each sample's number
# in its series (`rn`, for ANOMALIES_SQL's runs), taken in this sort rather than a second one of the
# flagged series' samples (1.9 -> 1.0 s on the campus's 10.9 M).
SIGNAL_SQL = """
CREATE OR REPLACE TEMP TABLE {sig} AS
SELECT s.sid, s.ts, s.prev_ts, CASE WHEN r.kind = 'counter' THEN s.rate ELSE s.value END AS x, s.win, s.rn,
       (i.hi IS NULL OR s.ts > i.hi) AS ok
FROM (
    SELECT sid, ts, value, prev_ts, win, rn,
           CASE WHEN prev IS NULL OR ts = prev_ts THEN NULL
                WHEN value < prev THEN value ELSE value - prev END / (epoch(ts) - epoch(prev_ts)) AS rate
    FROM (
        SELECT sid, ts, value, win, lag(value) OVER w AS prev, lag(ts) OVER w AS prev_ts, row_number() OVER w AS rn
        -- a sample read twice is one (signals/counters.py SCOPE_RATES_SQL); value breaks a tie in time
        FROM (SELECT DISTINCT sid, ts, value, win FROM {scope}) WHERE isfinite(value)
        WINDOW w AS (PARTITION BY sid ORDER BY ts, value)
    )
) s JOIN {series} f USING (sid) JOIN {rules} r ON r.metric = f.metric
ASOF LEFT JOIN {idle} i ON i.job = f.job AND s.ts >= i.lo
"""
# signals/anomalies.py ANOMALIES_SQL, per series: its baseline from the healthiest of its own job's
# read windows (`win`: the window each sample was read in, so no second join to the windows). The
# samples go through the window functions and the grouping with their numbers only, the series' names
# and rule joined to each run afterwards (the same rows, 5.4 -> 2.6 CPU s on the campus's 5x10^6).
ANOMALIES_SQL = f"""
WITH pooled AS (
    SELECT sid, {POOLED_SQL}
    FROM {{sig}} WHERE x IS NOT NULL GROUP BY sid
), per_window AS (
    SELECT sid, win AS w, {PER_WINDOW_SQL}
    FROM {{sig}} WHERE x IS NOT NULL AND ok GROUP BY sid, win HAVING count(*) >= ?
), healthiest AS (
    SELECT sid, {HEALTHIEST_SQL} FROM per_window GROUP BY sid
), base AS (
    SELECT p.sid, p.hi, p.lo, {BASE_SQL}
    FROM pooled p LEFT JOIN healthiest h USING (sid)
), cand0 AS (
    SELECT sid, f.job, f.host, f.entity, hi, lo, r.*, CASE WHEN r.direction = 'up' THEN q[1] ELSE q[2] END AS b,
           CASE WHEN r.direction = 'up' THEN p1 ELSE p2 END AS prov
    FROM base JOIN {{series}} f USING (sid) JOIN {{rules}} r ON r.metric = f.metric
), limits0 AS (
    SELECT *, {limits_sql("cand0")}
), {pre_onset_sql("{sig}", ("sid",))}, flagged AS (
    SELECT s.sid, s.ts, s.prev_ts, s.x,
           {BAD_SAMPLE_SQL}, s.rn, s.win
    FROM {{sig}} s JOIN limits l USING (sid)
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY sid ORDER BY rn) AS island
    FROM flagged WHERE bad
), pieces AS (
    SELECT *, count(*) OVER (PARTITION BY sid, island, win) AS piece FROM islands
), runs AS (
    SELECT sid, min(ts) AS first_bad, max(ts) AS last, median(x) AS after, max(x) AS x_hi, min(x) AS x_lo,
           count(*) AS n, max(piece) AS in_a_row, arg_min(prev_ts, ts) AS prev0, arg_min(x, ts) AS x0,
           list(x ORDER BY ts)[2:] AS rest
    FROM pieces GROUP BY sid, island
), windows AS (
    SELECT r.*, l.job, l.host, l.entity, l.metric, l.layer, l.category, l.weight, l.b, l.kind, l.threshold,
           l.discrete, l.prov, CASE WHEN l.direction = 'up' THEN r.x_hi ELSE r.x_lo END AS peak
    FROM runs r JOIN limits l USING (sid)
)
SELECT job, host, entity, metric, layer, category, weight,
       {ONSET_SQL},
       last, b AS before, after, peak, n, kind, coalesce(prev0, first_bad) AS last_normal, threshold, first_bad,
       prov.f, prov.t, prov.n
FROM windows
WHERE in_a_row >= ? OR discrete
ORDER BY job, onset, host, entity, metric, first_bad  -- the order of signals/anomalies.py, a total one
"""


def decode_clock_bits(conn: duckdb.DuckDBPyConnection, samples: TempTable, cand: FleetCandidates) -> None:
    """The clocks-event bitmask candidates' samples decoded into their bits' series, in `samples`."""
    values, bits = clock_bits()
    sql = staged_sql(CLOCK_BITS_SQL, scope=samples, cand=cand.cand, series=cand.series).format(values=values)
    conn.execute(sql, [CLOCK_EVENT_METRIC, *bits])


def fleet_anomalies(
    conn: duckdb.DuckDBPyConnection, tables: FleetTables, cand: FleetCandidates, samples: TempTable
) -> dict[str, list[Anomaly]]:
    """Each job's anomaly windows over its candidates' `samples`, in onset order."""
    staged = {"series": cand.series, "rules": tables.rules}
    conn.execute(staged_sql(SIGNAL_SQL, sig=SIG, scope=samples, idle=tables.idle, **staged))
    found: dict[str, list[Anomaly]] = {}
    sql = staged_sql(ANOMALIES_SQL, sig=SIG, **staged)
    for j, *row in conn.execute(sql, [MIN_BASELINE_SAMPLES, MIN_ANOMALY_SAMPLES]).fetchall():
        found.setdefault(j, []).append(anomaly_of(tuple(row)))
    return found
