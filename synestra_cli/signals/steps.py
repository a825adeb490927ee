"""Step-time signals: a robust baseline per job and attempt, and degradation windows.

Megatron prints one iteration line per log interval with the step time averaged over it, so a slow
line means "some steps since the previous line were slow": a window's onset is bounded below by the
previous (healthy) line. The baseline is the job's healthiest stretch of a few lines (BASELINE_SQL), so
that a slowdown covering even most of a job cannot become its own baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.explain.rules import MAD_K, MIN_SLOW_LINES, SLOW_FACTOR

# The baseline is the job's healthiest stretch: the lowest median over BASELINE_RUN consecutive lines
# (all lines when there are fewer). A slowdown covering even most of a job then cannot become its own
# baseline, as long as the job ran healthy for a few log intervals somewhere; a quantile or the median
# of the faster half fails once more than that share of the lines is slow. MAD over the healthy lines.
BASELINE_RUN = 5
BASELINE_SQL = f"""
WITH s AS (
    SELECT attempt, iteration, ts, step_time_s AS x FROM steps_reconciled
    WHERE job_id = $job AND step_time_s IS NOT NULL AND step_time_s > 0
), scoped AS (
    SELECT true AS whole, NULL::INTEGER AS attempt, a AS ord_attempt, iteration, ts, x
    FROM (SELECT attempt AS a, * EXCLUDE (attempt) FROM s)
    UNION ALL SELECT false, attempt, attempt, iteration, ts, x FROM s
), rolled AS (
    SELECT whole, attempt, x, median(x) OVER w AS m, count(*) OVER w AS k,
           count(*) OVER (PARTITION BY whole, attempt) AS n
    FROM scoped
    WINDOW w AS (PARTITION BY whole, attempt ORDER BY ord_attempt, iteration, ts
                 ROWS BETWEEN {BASELINE_RUN // 2} PRECEDING AND {BASELINE_RUN // 2} FOLLOWING)
), base AS (
    SELECT whole, attempt, any_value(n) AS n,
           coalesce(min(m) FILTER (WHERE k = {BASELINE_RUN}), median(x)) AS med
    FROM rolled GROUP BY whole, attempt
)
SELECT b.attempt, b.med, b.n, median(abs(r.x - b.med)) FILTER (WHERE r.x <= b.med * $factor) AS mad
FROM base b JOIN rolled r ON r.whole = b.whole AND r.attempt IS NOT DISTINCT FROM b.attempt
GROUP BY b.whole, b.attempt, b.med, b.n ORDER BY b.whole DESC, b.attempt
"""

# ml-goodput-measurement's ideal step time: mean of the steps at or below median + 3 MAD (issue 6).
IDEAL_SQL = """
WITH s AS (SELECT step_time_s AS x FROM steps_reconciled WHERE job_id = ? AND step_time_s > 0),
m AS (SELECT median(x) AS med FROM s),
d AS (SELECT median(abs(x - med)) AS mad FROM s, m)
SELECT avg(x) FROM s, m, d WHERE x <= med + ? * mad
"""

# Gaps and islands over slow lines (per attempt, in iteration order) against the job's baseline.
WINDOWS_SQL = """
WITH s AS (
    SELECT attempt, iteration, ts, step_time_s AS x,
           lag(ts) OVER (PARTITION BY attempt ORDER BY iteration) AS prev_ts
    FROM steps_reconciled WHERE job_id = $job AND step_time_s > 0 AND ts IS NOT NULL
), flagged AS (
    SELECT *, (x > $med * $factor AND x > $med + $k * $mad) AS slow,
           row_number() OVER (PARTITION BY attempt ORDER BY iteration) AS rn
    FROM s
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY attempt ORDER BY iteration) AS island
    FROM flagged WHERE slow
)
SELECT attempt, coalesce(arg_min(prev_ts, iteration), min(ts)) AS onset, min(ts) AS first_slow,
       max(ts) AS last_slow, min(iteration) AS first_iteration, max(iteration) AS last_iteration,
       median(x) AS slow_step_s, count(*) AS lines
FROM islands GROUP BY attempt, island HAVING count(*) >= $min_lines
ORDER BY onset
"""


@dataclass(frozen=True)
class Baseline:
    attempt: int | None  # None: the whole job
    median_s: float
    mad_s: float
    lines: int


@dataclass(frozen=True)
class DegradationWindow:
    attempt: int | None
    onset: datetime  # the last healthy line before the slow ones (earliest possible start)
    first_slow: datetime  # the first slow line
    end: datetime  # the last slow line
    first_iteration: int
    last_iteration: int
    baseline_s: float
    slow_step_s: float  # median printed step time inside the window

    @property
    def factor(self) -> float:
        return self.slow_step_s / self.baseline_s if self.baseline_s else float("nan")


def baselines(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[Baseline]:
    """Healthiest-stretch baseline and MAD, for the whole job (first) and for each attempt."""
    rows = conn.execute(BASELINE_SQL, {"job": job_id, "factor": SLOW_FACTOR}).fetchall()
    return [Baseline(a, med, mad or 0.0, n) for a, med, n, mad in rows if med is not None]


def ideal_step_time(conn: duckdb.DuckDBPyConnection, job_id: str) -> float | None:
    """Mean step time of the job's steps at or below median + 3 MAD, in seconds (None: no steps)."""
    rows = conn.execute(IDEAL_SQL, [job_id, MAD_K]).fetchall()  # drained: DuckDB 2 blocks new work otherwise
    return rows[0][0] if rows else None


def degradation_windows(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[DegradationWindow]:
    """Runs of consecutive slow iteration lines, against the job-wide baseline, in time order."""
    base = next((b for b in baselines(conn, job_id) if b.attempt is None), None)
    if base is None:
        return []
    params = {
        "job": job_id,
        "med": base.median_s,
        "mad": base.mad_s,
        "factor": SLOW_FACTOR,
        "k": MAD_K,
        "min_lines": MIN_SLOW_LINES,
    }
    rows = conn.execute(WINDOWS_SQL, params).fetchall()
    return [
        DegradationWindow(a, onset, first, last, i0, i1, base.median_s, slow)
        for a, onset, first, last, i0, i1, slow, _n in rows
    ]
