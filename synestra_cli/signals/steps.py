"""Step-time signals: a robust baseline per job and attempt, and degradation windows.

Megatron prints one iteration line per log interval with the step time averaged over it, so a slow
line means "some steps since the previous line were slow": a window's onset is bounded below by the
previous (healthy) line. Baselines are median / MAD over the faster half of the lines, so that a
slowdown covering even most of a job (up to about two thirds) cannot become its own baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.explain.rules import MAD_K, MIN_SLOW_LINES, SLOW_FACTOR

# Median and MAD of the faster half of the printed step times, per attempt (NULL = the whole job).
BASELINE_SQL = """
WITH s AS (
    SELECT attempt, step_time_s AS x FROM steps_reconciled
    WHERE job_id = ? AND step_time_s IS NOT NULL AND step_time_s > 0
), scoped AS (
    SELECT true AS whole, NULL::INTEGER AS attempt, x FROM s
    UNION ALL SELECT false, attempt, x FROM s
), fast AS (
    SELECT * FROM (
        SELECT whole, attempt, x, count(*) OVER w AS n, row_number() OVER (w ORDER BY x) AS r
        FROM scoped WINDOW w AS (PARTITION BY whole, attempt)
    ) WHERE r <= (n + 1) // 2
), base AS (
    SELECT whole, attempt, any_value(n) AS n, median(x) AS med FROM fast GROUP BY whole, attempt
)
SELECT b.attempt, b.med, b.n, median(abs(f.x - b.med)) AS mad
FROM base b JOIN fast f ON f.whole = b.whole AND f.attempt IS NOT DISTINCT FROM b.attempt
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
    """Median / MAD step time of the faster half, for the whole job (first) and for each attempt."""
    rows = conn.execute(BASELINE_SQL, [job_id]).fetchall()
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
