"""How many of a cold fleet report's gauge candidates a bound on their baseline could drop.

Runs `synestra tax-report` (its arguments after the script's name; the store must have no kept
explanations, so that the fleet read runs) with a hook after the fleet's raw read of the candidates'
samples (signals/fleet_telemetry.py `_read_by_source`), and prints to stderr, over the samples read:
the "up" gauge candidates; those whose own baseline (the healthiest read window's lower quartile, as
ANOMALIES_SQL computes it) no sample crosses; those with an anomaly window (two consecutive samples past
the threshold); and those a sub-hour bucket bound (per window, the buckets wholly inside it whose
minimum reaches `hi - delta`) proves anomaly-free. The report's own output is unchanged.
Figures and their reading: docs/performance.md ("Why a bound on the baseline cannot reach 5 s").

    python benchmarks/candidate_bounds.py tax-report --all --db COPY --format json > out.json
"""

from __future__ import annotations

import sys

import duckdb

from synestra_cli.cli.main import cli
from synestra_cli.signals import fleet_telemetry

GAUGES_SQL = """
CREATE OR REPLACE TEMP TABLE _g AS
SELECT s.sid, s.ts, s.value AS x, s.win, c.job, c.metric, r.floor, r.ratio, r.delta, r.discrete
FROM _fscope s JOIN _fcand c USING (sid) JOIN _frules r USING (metric)
WHERE r.kind = 'gauge' AND r.direction = 'up' AND isfinite(s.value)
"""
BASELINES_SQL = """
CREATE OR REPLACE TEMP TABLE _b AS
WITH pw AS (SELECT sid, win, quantile_cont(x, 0.25) AS q1, count(*) AS n FROM _g GROUP BY sid, win),
pooled AS (SELECT sid, quantile_cont(x, 0.25) AS q1, max(x) AS hi, any_value(ratio) AS ratio,
                  any_value(delta) AS delta, any_value(floor) AS floor FROM _g GROUP BY sid)
SELECT p.sid, coalesce(min(w.q1) FILTER (w.n >= 4), p.q1) AS b, (p.hi - p.delta) / p.ratio AS v, p.floor
FROM pooled p JOIN pw w USING (sid) GROUP BY p.sid, p.hi, p.q1, p.ratio, p.delta, p.floor
"""
WINDOWS_SQL = """
WITH f AS (
    SELECT g.sid, g.ts, g.x >= b.floor AND g.x > b.b * g.ratio + g.delta AS bad, g.discrete,
           row_number() OVER (PARTITION BY g.sid ORDER BY g.ts) AS rn
    FROM _g g JOIN _b b USING (sid) WHERE b.b < b.v
), i AS (SELECT sid, discrete, rn - row_number() OVER (PARTITION BY sid ORDER BY ts) AS isl FROM f WHERE bad)
SELECT count(DISTINCT sid) FROM (SELECT sid, isl, count(*) AS n, bool_or(discrete) AS d FROM i GROUP BY sid, isl)
WHERE n >= 2 OR d
"""
BUCKETS_SQL = """
WITH k AS (
    SELECT sid, win, time_bucket(INTERVAL {m} MINUTE, ts) AS bk, count(*) AS n, min(x) AS lo FROM _g GROUP BY ALL
), f AS (
    SELECT k.*, k.bk >= w.lo AND k.bk + INTERVAL {m} MINUTE <= w.hi AS whole
    FROM k JOIN _fcand c USING (sid) JOIN _fwin w ON w.job = c.job AND w.w = k.win
), per_win AS (
    SELECT f.sid, f.win, sum(n) FILTER (whole) AS nf,
           coalesce(sum(n) FILTER (whole AND lo < b.v), 0) + coalesce(sum(n) FILTER (NOT whole), 0) AS below
    FROM f JOIN _b b USING (sid) GROUP BY ALL
)
SELECT count(*) FILTER (proved) FROM (
    SELECT sid, bool_and(coalesce(below <= floor(0.25 * (nf - 1)), false)) AS proved FROM per_win GROUP BY sid)
"""


def _count(conn: duckdb.DuckDBPyConnection, sql: str) -> int:
    row = conn.execute(sql).fetchone()
    return int(row[0]) if row else 0


def measured(conn: duckdb.DuckDBPyConnection) -> None:
    conn.execute(GAUGES_SQL)
    conn.execute(BASELINES_SQL)
    print("candidates:", _count(conn, "SELECT count(*) FROM _fcand"), file=sys.stderr)
    gauges = conn.execute("SELECT metric, count(DISTINCT sid) FROM _g GROUP BY 1 ORDER BY 2 DESC").fetchall()
    print("up gauges:", gauges, file=sys.stderr)
    print("  no sample past the threshold:", _count(conn, "SELECT count(*) FROM _b WHERE b >= v"), file=sys.stderr)
    print("  with an anomaly window:", _count(conn, WINDOWS_SQL), file=sys.stderr)
    for minutes in (60, 15, 10, 5, 2):
        print(f"  proved by {minutes}-minute buckets:", _count(conn, BUCKETS_SQL.format(m=minutes)), file=sys.stderr)


def main() -> None:
    read = fleet_telemetry._read_by_source

    def hooked(conn, *args):
        samples = read(conn, *args)
        measured(conn)
        return samples

    fleet_telemetry._read_by_source = hooked
    cli(sys.argv[1:])


if __name__ == "__main__":
    main()
