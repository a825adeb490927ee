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

from synestra_cli.signals.thresholds import MAD_K, MIN_SLOW_LINES, SLOW_FACTOR

# The baseline is the job's healthiest stretch: the lowest median over BASELINE_RUN consecutive lines
# (all lines when there are fewer). A slowdown covering even most of a job then cannot become its own
# baseline, as long as the job ran healthy for a few log intervals somewhere; a quantile or the median
# of the faster half fails once more than that share of the lines is slow. MAD over the healthy lines.
BASELINE_RUN = 5
# CTEs `base` (job_id, whole, attempt, n, med) and `rolled`, for the jobs in $jobs: shared by the
# baselines query and the windows query, so that both read one definition.
BASELINE_CTES = f"""
s AS (
    SELECT job_id, attempt, iteration, ts, step_time_s AS x FROM steps_reconciled
    WHERE job_id IN (SELECT unnest($jobs)) AND step_time_s IS NOT NULL AND step_time_s > 0
), scoped AS (
    SELECT job_id, true AS whole, NULL::INTEGER AS attempt, attempt AS ord_attempt, iteration, ts, x FROM s
    UNION ALL SELECT job_id, false, attempt, attempt, iteration, ts, x FROM s
), rolled AS (
    SELECT job_id, whole, attempt, x, median(x) OVER w AS m, count(*) OVER w AS k,
           count(*) OVER (PARTITION BY job_id, whole, attempt) AS n
    FROM scoped
    WINDOW w AS (PARTITION BY job_id, whole, attempt ORDER BY ord_attempt, iteration, ts
                 ROWS BETWEEN {BASELINE_RUN // 2} PRECEDING AND {BASELINE_RUN // 2} FOLLOWING)
), base AS (
    SELECT job_id, whole, attempt, any_value(n) AS n,
           coalesce(min(m) FILTER (WHERE k = {BASELINE_RUN}), median(x)) AS med
    FROM rolled GROUP BY job_id, whole, attempt
), based AS (
    SELECT b.job_id, b.whole, b.attempt, b.med, b.n,
           coalesce(median(abs(r.x - b.med)) FILTER (WHERE r.x <= b.med * $factor), 0) AS mad
    FROM base b JOIN rolled r ON r.job_id = b.job_id AND r.whole = b.whole
                             AND r.attempt IS NOT DISTINCT FROM b.attempt
    GROUP BY b.job_id, b.whole, b.attempt, b.med, b.n
)"""

BASELINE_SQL = (
    "WITH "
    + BASELINE_CTES
    + """
SELECT attempt, med, n, mad FROM based ORDER BY whole DESC, attempt
"""
)

# Gaps and islands over slow lines (per job and attempt, in iteration order) against the job-wide
# baseline, for every job in $jobs at once.
WINDOWS_SQL = (
    "WITH "
    + BASELINE_CTES
    + """,
timed AS (
    SELECT s.*, lag(ts) OVER (PARTITION BY job_id, attempt ORDER BY iteration) AS prev_ts
    FROM s WHERE ts IS NOT NULL
), flagged AS (
    SELECT t.*, b.med, (t.x > b.med * $factor AND t.x > b.med + $k * b.mad) AS slow,
           row_number() OVER (PARTITION BY t.job_id, t.attempt ORDER BY t.iteration) AS rn
    FROM timed t JOIN based b ON b.job_id = t.job_id AND b.whole
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY job_id, attempt ORDER BY iteration) AS island
    FROM flagged WHERE slow
)
SELECT job_id, attempt, coalesce(arg_min(prev_ts, iteration), min(ts)) AS onset, min(ts) AS first_slow,
       max(ts) AS last_slow, min(iteration) AS first_iteration, max(iteration) AS last_iteration,
       any_value(med) AS baseline_s, median(x) AS slow_step_s
FROM islands GROUP BY job_id, attempt, island HAVING count(*) >= $min_lines
ORDER BY job_id, onset
"""
)


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
    rows = conn.execute(BASELINE_SQL, {"jobs": [job_id], "factor": SLOW_FACTOR}).fetchall()
    return [Baseline(a, med, mad, n) for a, med, n, mad in rows if med is not None]


def degradation_windows(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[DegradationWindow]:
    """Runs of consecutive slow iteration lines, against the job-wide baseline, in time order."""
    return degradation_windows_for(conn, [job_id]).get(job_id, [])


def degradation_windows_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, list[DegradationWindow]]:
    """degradation_windows for many jobs in one query (tax-report --all)."""
    params = {"jobs": job_ids, "factor": SLOW_FACTOR, "k": MAD_K, "min_lines": MIN_SLOW_LINES}
    out: dict[str, list[DegradationWindow]] = {}
    for job, *row in conn.execute(WINDOWS_SQL, params).fetchall():
        out.setdefault(job, []).append(DegradationWindow(*row))
    return out


# Per attempt, the first and last iteration lines: the stretch in which the job's GPUs were computing.
TRAINING_SQL = """
SELECT job_id, attempt, min(ts), max(ts) FROM steps_reconciled
WHERE job_id IN (SELECT unnest($jobs::VARCHAR[])) AND ts IS NOT NULL
GROUP BY ALL ORDER BY job_id, attempt NULLS FIRST
"""


def training_spans_for(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str]
) -> dict[str, dict[int | None, tuple[datetime, datetime]]]:
    """Per job, per attempt: from its first iteration line to its last (the job computing)."""
    out: dict[str, dict[int | None, tuple[datetime, datetime]]] = {}
    for job, attempt, lo, hi in conn.execute(TRAINING_SQL, {"jobs": job_ids}).fetchall():
        out.setdefault(job, {})[attempt] = (lo, hi)
    return out
