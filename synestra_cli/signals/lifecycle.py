"""What a job's logs date of its life between failures: its log segments and their marks.

A segment is one process lifetime in a log: an attempt, or the part of one that torchrun's elastic agent
restarted in place (formats/training/joblog_rows.py cuts a log at each start-up banner, torchrun's
`Starting worker group`, load or step count going back;
the store maps each log attempt to a sacct attempt, so two segments of one sacct attempt are an in-place
restart). For each segment: its first and last dated lines, its first two dated iteration lines (the first
step's start is dated from them, explain/restarts.py) and the last iteration it reached. The marks are the
lines that date stages of a start (formats/training/megatron.py, torchtitan.py, torch_failures.py: initialised,
model built, training loop entered, training done, worker group started again).

Read for one job as for many (a fleet's explain): the same query, keyed by job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

SEGMENTS_SQL = """
WITH seg AS (
    SELECT m.job_id, m.attempt, la.log_attempt, min(la.start_ts) AS start_ts, max(la.end_ts) AS end_ts
    FROM attempt_map m JOIN log_attempts la USING (job_id, source_id, log_attempt)
    WHERE m.job_id IN (SELECT unnest($jobs)) GROUP BY ALL
), st AS (
    SELECT job_id, attempt, log_attempt, iteration, ts, step_time_s,
        row_number() OVER (PARTITION BY job_id, source_id, log_attempt ORDER BY line) AS k
    FROM steps_reconciled WHERE job_id IN (SELECT unnest($jobs)) AND ts_precision IN ('exact', 'estimated')
), last AS (
    SELECT job_id, attempt, log_attempt, max(iteration) AS last_it
    FROM steps_reconciled WHERE job_id IN (SELECT unnest($jobs)) GROUP BY ALL
)
SELECT seg.job_id, seg.attempt, seg.log_attempt, seg.start_ts, seg.end_ts,
    max(st.iteration) FILTER (WHERE k = 1), max(st.ts) FILTER (WHERE k = 1), max(st.step_time_s) FILTER (WHERE k = 1),
    max(st.iteration) FILTER (WHERE k = 2), max(st.ts) FILTER (WHERE k = 2), max(st.step_time_s) FILTER (WHERE k = 2),
    max(last.last_it)
FROM seg LEFT JOIN st USING (job_id, attempt, log_attempt) LEFT JOIN last USING (job_id, attempt, log_attempt)
GROUP BY ALL ORDER BY seg.job_id, seg.attempt, seg.start_ts NULLS LAST, seg.log_attempt
"""

MARKS_SQL = """
SELECT job_id, attempt, log_attempt, ts, kind, iteration FROM job_marks_reconciled
WHERE job_id IN (SELECT unnest($jobs)) AND ts_precision = 'exact'
ORDER BY job_id, ts, line
"""


@dataclass(frozen=True)
class Line:
    """An iteration line: its iteration, time and printed step time (seconds; None: not printed)."""

    iteration: int
    ts: datetime
    step_time_s: float | None


@dataclass(frozen=True)
class Segment:
    attempt: int
    log_attempt: int
    start: datetime | None  # its first dated line
    end: datetime | None  # its last dated line
    first: Line | None  # its first two dated iteration lines
    second: Line | None
    last_iteration: int | None  # the last iteration it printed, dated or not


@dataclass(frozen=True)
class Mark:
    attempt: int
    log_attempt: int | None
    ts: datetime
    kind: str  # initialized | built | loop_start | training_done | worker_start
    iteration: int | None


@dataclass(frozen=True)
class Lifecycle:
    segments: list[Segment]
    marks: list[Mark]


def _line(it: int | None, ts: datetime | None, st: float | None) -> Line | None:
    return Line(it, ts, st) if it is not None and ts is not None else None


def lifecycles_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, Lifecycle]:
    """Per job, its segments in attempt and time order and its dated marks in time order."""
    out: dict[str, Lifecycle] = {j: Lifecycle([], []) for j in job_ids}
    params = {"jobs": list(job_ids)}
    for job, att, la, s, e, i1, t1, st1, i2, t2, st2, last in conn.execute(SEGMENTS_SQL, params).fetchall():
        out[job].segments.append(Segment(att, la, s, e, _line(i1, t1, st1), _line(i2, t2, st2), last))
    for job, att, la, ts, kind, it in conn.execute(MARKS_SQL, params).fetchall():
        out[job].marks.append(Mark(att, la, ts, kind, it))
    return out
