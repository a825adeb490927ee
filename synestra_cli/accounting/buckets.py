"""The checkpoint tax: each job's wall time partitioned into non-overlapping buckets.

Computed in one SQL pass over every selected job (docs/accounting.md gives the formulas):

    wall = first attempt start -> last attempt end
         = productive + checkpoint_save + checkpoint_restore + startup + lost_work + hang + requeue
           + degraded_throughput + other

Per attempt, the timeline is cut at three instants read from the job's own logs:
``t_first`` (the first training step begins), ``resume`` (the end of the last save completed in the
attempt) and ``t_last`` (the last training progress). A failed attempt's (resume, t_last] is lost work
and (t_last, end] is hang; a finished attempt has neither. ``other`` is the remainder, so the buckets
sum to the wall time exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import duckdb

from synestra_cli.signals.thresholds import MAD_K
from synestra_cli.store.sql import sql_file, temp_table

BUCKETS = (
    "productive",
    "checkpoint_save",
    "checkpoint_restore",
    "startup",
    "lost_work",
    "hang",
    "requeue",
    "degraded_throughput",
    "other",
)
# Buckets that make the checkpoint tax (startup only of attempts after the first: a restart's cost).
TAX_BUCKETS = ("checkpoint_save", "checkpoint_restore", "lost_work", "hang", "requeue")

# Attempt states after which the job resumes from its last checkpoint (work since it is lost).
CLEAN_END_STATES = ("COMPLETED", "RUNNING")
# The job log's own lines that say its workers died (not a warning, a straggler or a collective trace).
CRASH_KINDS = (
    "cuda_error",
    "oom",
    "nccl_error",
    "python_exception",
    "worker_failed",
    "elastic_restart",
    "sigterm",
    "task_exit",
    "job_end",
)

# Shared by both queries below (bucket_lines.sql): the log segments, restores and iteration lines per segment.
LINES_CTES = sql_file(__package__, "bucket_lines.sql")

# A save whose lines carry no time of their own (ts_precision 'inferred': the nearest dated line's) ran
# after the last dated iteration line before it in its log, once the iterations since that line were done
# at its pace (Megatron saves at the end of its iteration, and prints a line only every --log-interval),
# for its stated blocking time; and it ended by the next dated line after it in the same log: an
# iteration line, or an incident such as the exit-signal handler's `[exiting program after receiving
# SIGTERM.] datetime:`, which is printed only when the save is done. Without this a preempted attempt's
# last iterations and its save were charged as hang (exit-signal preemptions, issue 11).
UNDATED_SAVES_CTES = """
dated AS (
    SELECT source_id, line, iteration, ts, step_time_s FROM steps_reconciled
    WHERE job_id IN (SELECT job_id FROM sel) AND ts_precision = 'exact' AND line IS NOT NULL
    UNION ALL
    SELECT source_id, line, NULL, ts, NULL FROM job_incidents_reconciled
    WHERE job_id IN (SELECT job_id FROM sel) AND ts_precision = 'exact' AND ts IS NOT NULL AND line IS NOT NULL
),
anchored AS (
    SELECT s.*, CASE WHEN s.ts_precision = 'inferred' AND d.iteration <= s.iteration
                     THEN d.ts + to_microseconds(CAST((s.iteration - d.iteration) * coalesce(d.step_time_s, 0) * 1e6
                                                      AS BIGINT)) END AS est_start0
    FROM saves0 s ASOF LEFT JOIN (SELECT * FROM dated WHERE iteration IS NOT NULL) d
         ON d.source_id = s.source_id AND s.line > d.line
),
undated AS (
    SELECT a.* EXCLUDE (est_start0), n.ts AS bound,
           CASE WHEN a.est_start0 IS NOT NULL THEN least(a.est_start0, n.ts) END AS est_start
    FROM anchored a ASOF LEFT JOIN dated n ON n.source_id = a.source_id AND n.line > a.line
)"""

ATTEMPT_BUCKETS_SQL = (
    "WITH "
    + LINES_CTES
    + ",\n"
    + sql_file(__package__, "attempt_buckets.sql")
    + ",\n"
    + UNDATED_SAVES_CTES
    + """,
saves AS (
    SELECT u.job_id, u.attempt, u.seg, u.iteration, u.blocking_s,
           CASE WHEN u.ts_precision = 'inferred' AND u.est_start IS NOT NULL
                THEN least(u.est_start + to_microseconds(CAST(coalesce(u.blocking_s, 0) * 1e6 AS BIGINT)),
                           coalesce(u.bound, a.end_ts), coalesce(a.end_ts, u.bound))
                ELSE u.end_ts END AS end_ts
    FROM undated u LEFT JOIN att a USING (job_id, attempt, seg)
),
save_totals AS (
    SELECT job_id, attempt, seg, sum(blocking_s ORDER BY iteration, end_ts) AS save_s, max(end_ts) AS resume,
           max(iteration) AS saved_iteration
    FROM saves GROUP BY ALL
),
progress AS (
    SELECT job_id, attempt, seg,
           arg_min(ts - to_microseconds(CAST(n * pace * 1e6 AS BIGINT)), iteration) AS t_first,
           max(ts) AS t_last_step, max(iteration) AS last_iteration
    FROM lines GROUP BY ALL
),
hangs AS (  -- a watchdog incident dates the hung collective (log time minus "ran for"); a crash dates a segment
    -- that never trained: its start-up ends there, the workers' stop after it is hang
    SELECT i.job_id, i.attempt, coalesce(m.seg, 1) AS seg,
           min(i.ts) FILTER (WHERE i.kind = 'nccl_timeout') AS hang_start,
           min(coalesce(i.ts, i.logged_ts)) FILTER (WHERE list_contains($crashes, i.kind)) AS crashed_at
    FROM job_incidents_reconciled i
    LEFT JOIN segmap m ON m.job_id = i.job_id AND m.source_id = i.source_id AND m.log_attempt = i.log_attempt
    WHERE i.job_id IN (SELECT job_id FROM sel) GROUP BY ALL
),
cut0 AS (
    SELECT a.*, coalesce(r.restore_s, 0) AS restore_s, coalesce(v.save_s, 0) AS save_s,
           v.saved_iteration, p.last_iteration, v.resume, p.t_last_step, h.hang_start,
           a.state IS NULL OR NOT list_contains($clean, split_part(a.state, ' ', 1)) AS failed,
           -- an attempt that died before its first step "starts training" when it hung
           least(greatest(coalesce(p.t_first, h.hang_start, CASE WHEN a.state IS NULL OR NOT list_contains(
                                   $clean, split_part(a.state, ' ', 1)) THEN h.crashed_at END, a.end_ts),
                          coalesce(r.restore_end, a.start_ts),
                          a.start_ts), a.end_ts) AS t_first
    FROM att a
    LEFT JOIN restores r USING (job_id, attempt, seg) LEFT JOIN save_totals v USING (job_id, attempt, seg)
    LEFT JOIN progress p USING (job_id, attempt, seg) LEFT JOIN hangs h USING (job_id, attempt, seg)
),
cut AS (  -- t_last never precedes t_first: the intervals stay disjoint
    SELECT *, least(greatest(t_first, coalesce(t_last_step, t_first), coalesce(resume, t_first),
                             coalesce(hang_start, t_first)), end_ts) AS t_last
    FROM cut0
)
SELECT job_id, attempt, seg, start_ts, end_ts, state, failed, is_last, t_first, t_last,
       coalesce(greatest(resume, t_first), t_first) AS resume_ts,
       saved_iteration, last_iteration, restore_s, save_s,
       greatest(epoch(t_first - start_ts) - restore_s, 0) AS startup_s,
       -- an in-place restart's stop of the old workers and new rendezvous is start-up (torchrun's), not a requeue;
       -- kept apart: it is outside the segment, and the cost of its failure, not of its own start
       coalesce(greatest(epoch(next_seg_start - end_ts), 0), 0) AS restart_gap_s,
       CASE WHEN failed THEN greatest(epoch(t_last - coalesce(greatest(resume, t_first), t_first)), 0) ELSE 0 END
           AS lost_work_s,
       CASE WHEN failed THEN greatest(epoch(end_ts - t_last), 0) ELSE 0 END AS hang_s,
       coalesce(greatest(epoch(next_start - end_ts), 0), 0) AS requeue_s
FROM cut ORDER BY job_id, attempt, seg
"""
)

# ml-goodput-measurement's ideal step time (mean of the steps at or below median + 3 MAD), over the
# lines outside degradation windows: when a slowdown covers much of a job, the raw formula admits
# the slow steps, and productive time would count what degraded_throughput charges.
IDEAL_SQL = """
WITH s AS (
    SELECT st.job_id, st.step_time_s AS x FROM steps_reconciled st
    WHERE st.job_id IN (SELECT job_id FROM sel) AND st.step_time_s > 0
      AND NOT EXISTS (SELECT 1 FROM windows w
                      WHERE w.job_id = st.job_id AND st.ts > w.start_ts AND st.ts <= w.end_ts)
), m AS (SELECT job_id, median(x) AS med FROM s GROUP BY job_id),
d AS (SELECT job_id, median(abs(x - med)) AS mad FROM s JOIN m USING (job_id) GROUP BY job_id)
-- ordered aggregates: the same store gives the same figures to the last digit, whatever the threads
SELECT job_id, avg(x ORDER BY x) FROM s JOIN m USING (job_id) JOIN d USING (job_id)
WHERE x <= med + $k * mad GROUP BY job_id
"""

# Degraded throughput: inside explain's degradation windows, the printed step time above the ideal,
# for lines outside the lost-work segment (lost work already charges that time).
DEGRADED_SQL = (
    """
WITH """
    + LINES_CTES
    + """
SELECT w.job_id, w.window_id, sum(greatest(l.pace - i.ideal_s, 0) * l.n ORDER BY l.ts) AS degraded_s
FROM lines l
JOIN ideal i USING (job_id)
JOIN windows w ON w.job_id = l.job_id AND l.ts BETWEEN w.start_ts AND w.end_ts
JOIN cuts c ON c.job_id = l.job_id AND c.attempt = l.attempt AND c.seg = l.seg
WHERE l.n > 0 AND (NOT c.failed OR l.ts <= c.resume_ts)
GROUP BY ALL ORDER BY ALL
"""
)


@dataclass(frozen=True)
class DegradedWindow:
    start: datetime
    end: datetime
    seconds: float  # step time above the ideal inside the window (the hidden tax)


@dataclass
class JobBuckets:
    job_id: str
    gpus: int
    wall_s: float
    ideal_step_s: float | None
    counted_iterations: int
    buckets_s: dict[str, float]
    attempts: list[dict] = field(default_factory=list)
    first_attempt_startup_s: float = 0.0
    degraded_windows: list[DegradedWindow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # where the logs' times had to be clamped

    @property
    def checkpoint_tax_s(self) -> float:
        restarts_startup = self.buckets_s["startup"] - self.first_attempt_startup_s
        return sum(self.buckets_s[b] for b in TAX_BUCKETS) + restarts_startup

    def ratio(self, seconds: float) -> float:
        return seconds / self.wall_s if self.wall_s > 0 else 0.0


def _register_jobs(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> None:
    temp_table(conn, "sel", {"job_id": ("VARCHAR", list(job_ids))})


def attempt_cuts(conn: duckdb.DuckDBPyConnection, job_ids: list[str], ideal: dict[str, float]) -> list[dict]:
    """Per attempt: the cut instants and the time-based buckets, for every job in job_ids."""
    _register_jobs(conn, job_ids)
    _register_ideal(conn, ideal)
    cur = conn.execute(ATTEMPT_BUCKETS_SQL, {"clean": list(CLEAN_END_STATES), "crashes": list(CRASH_KINDS)})
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _register_ideal(conn: duckdb.DuckDBPyConnection, ideal: dict[str, float]) -> None:
    temp_table(conn, "ideal", {"job_id": ("VARCHAR", list(ideal)), "ideal_s": ("DOUBLE", list(ideal.values()))})


def register_windows(conn: duckdb.DuckDBPyConnection, windows: list[tuple[str, datetime, datetime]]) -> None:
    temp_table(
        conn,
        "windows",
        {
            "job_id": ("VARCHAR", [w[0] for w in windows]),
            "window_id": ("BIGINT", list(range(len(windows)))),
            "start_ts": ("TIMESTAMP", [w[1] for w in windows]),
            "end_ts": ("TIMESTAMP", [w[2] for w in windows]),
        },
    )


def ideal_step_times(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: list[tuple[str, datetime, datetime]]
) -> dict[str, float]:
    """Ideal step time per job (seconds), from the iteration lines outside its degradation windows."""
    _register_jobs(conn, job_ids)
    register_windows(conn, windows)
    return {job: x for job, x in conn.execute(IDEAL_SQL, {"k": MAD_K}).fetchall() if x is not None}


def degraded_windows(
    conn: duckdb.DuckDBPyConnection,
    cuts: list[dict],
    ideal: dict[str, float],
    windows: list[tuple[str, datetime, datetime]],
) -> dict[str, list[DegradedWindow]]:
    """Per job, each degradation window with the seconds of step time above the ideal inside it."""
    if not windows or not ideal:
        return {}
    _register_ideal(conn, ideal)
    register_windows(conn, windows)
    temp_table(
        conn,
        "cuts",
        {
            "job_id": ("VARCHAR", [c["job_id"] for c in cuts]),
            "attempt": ("INTEGER", [c["attempt"] for c in cuts]),
            "seg": ("BIGINT", [c["seg"] for c in cuts]),
            "failed": ("BOOLEAN", [c["failed"] for c in cuts]),
            "resume_ts": ("TIMESTAMP", [c["resume_ts"] for c in cuts]),
        },
    )
    out: dict[str, list[DegradedWindow]] = {}
    for job, wid, secs in conn.execute(DEGRADED_SQL).fetchall():
        out.setdefault(job, []).append(DegradedWindow(windows[wid][1], windows[wid][2], secs or 0.0))
    return out


# Per attempt, the buckets measured inside it; none can exceed the attempt itself.
ATTEMPT_BUCKETS = {
    "save_s": "checkpoint_save",
    "restore_s": "checkpoint_restore",
    "startup_s": "startup",
    "lost_work_s": "lost_work",
    "hang_s": "hang",
}


def _clamped(cuts: list[dict], notes: list[str]) -> dict[str, float]:
    """Sum the attempts' measured buckets, each clamped to [0, its attempt's duration]: a save that
    'lasted' longer than the attempt it ran in has a wrong clock on one of its lines."""
    b = dict.fromkeys(BUCKETS, 0.0)
    for c in cuts:
        duration = max((c["end_ts"] - c["start_ts"]).total_seconds(), 0.0)
        for key, bucket in ATTEMPT_BUCKETS.items():
            raw = c[key] or 0.0
            value = min(max(raw, 0.0), duration)
            if raw > duration + 1.0:
                notes.append(
                    f"attempt {c['attempt']}: {bucket} {raw:,.0f} s is longer than the attempt "
                    f"({duration:,.0f} s), a wrong clock on a log line: counted as {value:,.0f} s"
                )
            b[bucket] += value
        b["requeue"] += max(c["requeue_s"] or 0.0, 0.0)
        b["startup"] += max(c["restart_gap_s"] or 0.0, 0.0)
    return b


def assemble(
    job_id: str,
    gpus: int,
    cuts: list[dict],
    ideal_s: float | None,
    degraded: list[DegradedWindow],
    first_iteration: int,
) -> JobBuckets:
    """Sum one job's attempts into buckets; productive and other close the partition. Every bucket is
    >= 0 and they sum to the wall time exactly, whatever the logs' clocks say."""
    wall = max((max(c["end_ts"] for c in cuts) - min(c["start_ts"] for c in cuts)).total_seconds(), 0.0)
    notes: list[str] = []
    b = _clamped(cuts, notes)
    last = cuts[-1]
    # A finished job's model is its last iteration; the final save may name one past the last printed line.
    reached = max(last["last_iteration"] or 0, last["saved_iteration"] or 0)
    final_iteration = (last["saved_iteration"] if last["failed"] else reached) or first_iteration
    counted = max(final_iteration - first_iteration, 0)
    b["degraded_throughput"] = max(sum(w.seconds for w in degraded), 0.0)
    b["productive"] = max((ideal_s or 0.0) * counted, 0.0)
    # The time-based buckets are disjoint intervals of the wall time; productive and degraded are
    # estimates from step times. If the logs over-explain the wall (clock skew, overlapping lines),
    # trim the estimates, so that every bucket stays >= 0 and the sum is the wall time exactly.
    for estimate in ("productive", "degraded_throughput"):
        excess = sum(b.values()) - wall
        if excess > 0:
            b[estimate] = max(b[estimate] - excess, 0.0)
    excess = sum(b.values()) - wall
    scale = 1.0
    if excess > 1e-6:  # still over (attempts that overlap, clamped clocks): scale the measured buckets
        scale = wall / sum(b.values())
        notes.append(
            f"the logs' times exceed the wall time by {excess:,.0f} s (overlapping attempts or a wrong "
            "clock): every bucket scaled to fit"
        )
        b = {k: v * scale for k, v in b.items()}
    b["other"] = max(wall - sum(v for k, v in b.items() if k != "other"), 0.0)
    first = cuts[0]
    first_startup = (
        min(max(first["startup_s"] or 0.0, 0.0), max((first["end_ts"] - first["start_ts"]).total_seconds(), 0.0))
        * scale
    )
    return JobBuckets(job_id, gpus, wall, ideal_s, counted, b, cuts, min(first_startup, b["startup"]), degraded, notes)
