"""From a job log's facts (joblog.jl_facts) to store rows: attempts, steps, checkpoints, incidents.

Attempts appended to one file (Slurm `--open-mode=append`, requeue) are told apart by three
markers: a start-up banner, a checkpoint load, and an iteration count that goes back (a step whose
iteration is not above the previous step's). Such a marker opens a new attempt only if training
activity (a step or a save) or a fatal failure happened since the previous marker: a restart prints a banner, then
a load, then steps, and that cluster is one boundary, not three. Attempt numbers are 1..n in log
order; state and exit code are left NULL for the sacct reconciliation to fill.

Many logs at once (joblog.load_job_logs): each table keyed by the file's source id (`sid`), every
window partitioned by it, every aggregate grouped by it; `pos` is unique over the group.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb

from synestra_cli.formats.base import MAX_REJECT_SAMPLES
from synestra_cli.formats.hosts import record_full_names_sql
from synestra_cli.formats.training import joblog_times
from synestra_cli.store.sql import drop_temp

if TYPE_CHECKING:
    from synestra_cli.formats.training.joblog_file import LogFile

# torchrun --tee without --local-ranks-filter prints every rank's step lines: the steps of the
# lowest rank that prints them are the job's (Megatron prints from the last rank only), in each log.
ONE_RANK_STEPS_SQL = """
DELETE FROM jl_facts WHERE fact = 'step'
    AND coalesce(rank, -1) <> (SELECT min(coalesce(s.rank, -1)) FROM jl_facts s
                               WHERE s.fact = 'step' AND s.sid = jl_facts.sid)
"""

# One save is announced by several lines, sometimes of two frameworks numbering the same steps differently:
# NeMo 2's `Global Checkpoint Save : ... Iteration: 9` (Megatron-core's, zero-based like its progress lines) and
# Lightning's `Epoch 0, global step 9|10: ... saving model to`, NeMo's `Async checkpoint save for step 10 ...
# finalized`. A line marked `loose` takes the iteration of the save line of the other framework next to it (within
# SNAP_LINES lines, one iteration apart at most): one save, numbered as the trainer's own lines number it.
SNAP_LINES = 200
SNAP_SQL = f"""
UPDATE jl_facts SET iteration = s.snapped
FROM (
    SELECT f.sid, f.pos, arg_min(g.iteration, abs(g.pos - f.pos)) AS snapped
    FROM jl_facts f JOIN jl_facts g ON g.sid = f.sid AND abs(g.pos - f.pos) <= {SNAP_LINES}
         AND g.iteration BETWEEN f.iteration - 1 AND f.iteration + 1
    WHERE f.loose AND f.fact LIKE 'save%' AND g.fact LIKE 'save%' AND NOT coalesce(g.loose, false)
    GROUP BY f.sid, f.pos
) s
WHERE jl_facts.sid = s.sid AND jl_facts.pos = s.pos
"""

ACTIVITY = "('step', 'save_start', 'save_sched', 'save_end', 'save_block')"
# torchrun's agent starting a worker group (`[default] Starting worker group`, torch_failures.AGENT_MARKS_SQL) is a
# marker of its own: new workers that die before any trainer banner still make their own segment.
AGENT_START = "(fact = 'mark' AND kind = 'worker_start')"
# A failure that ends the process also closes its attempt, even one that died before its first step.
FATAL = (
    "('nccl_timeout', 'nccl_error', 'cuda_error', 'python_exception', 'sigterm', 'oom', 'worker_failed', 'job_end',"
    " 'task_exit')"
)

BOUNDS_SQL = f"""
CREATE OR REPLACE TEMP TABLE jl_bounds AS
WITH f AS (
    SELECT sid, pos, fact, kind, fact IN {ACTIVITY} OR (fact = 'incident' AND kind IN {FATAL}) AS is_act,
        fact = 'step' AND iteration <= lag(iteration) OVER (PARTITION BY sid, fact = 'step' ORDER BY pos) AS went_back
    FROM jl_facts
    WHERE fact IN {ACTIVITY} OR fact IN ('banner', 'load_start', 'load_end') OR {AGENT_START}
       OR (fact = 'incident' AND kind IN {FATAL})
), g AS (
    SELECT *, coalesce(went_back, false) OR fact IN ('banner', 'load_start', 'load_end') OR {AGENT_START} AS is_marker,
        sum(is_act::INT) OVER (PARTITION BY sid ORDER BY pos, fact ROWS UNBOUNDED PRECEDING) AS act_through
    FROM f
), m AS (
    SELECT sid, pos, act_through - is_act::INT AS act_before,
        coalesce(lag(act_through) OVER (PARTITION BY sid ORDER BY pos, fact), 0) AS act_at_prev_marker
    FROM g WHERE is_marker
)
SELECT DISTINCT sid, pos FROM m WHERE act_before > act_at_prev_marker
"""

# Each line's attempt, and the nearest lines with their own time around it in that attempt: an
# undated line happened between them (the bounds of an undated restore).
ATTEMPT_OF_LINE_SQL = """
CREATE OR REPLACE TEMP TABLE jl_la AS
WITH a AS (
    SELECT l.sid, l.pos, l.lineno, l.ts_exact,
        1 + count(b.pos) OVER (PARTITION BY l.sid ORDER BY l.pos ROWS UNBOUNDED PRECEDING) AS attempt
    FROM jl_lines l LEFT JOIN jl_bounds b USING (sid, pos)
)
SELECT *,
    last_value(ts_exact IGNORE NULLS) OVER (PARTITION BY sid, attempt ORDER BY pos ROWS UNBOUNDED PRECEDING)
        AS dated_before,
    first_value(ts_exact IGNORE NULLS) OVER (PARTITION BY sid, attempt ORDER BY pos
                                              ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS dated_after
FROM a
"""

# Checkpoint facts without their own iteration (torchtitan's "Saving the checkpoint", NeMo's
# "Scheduled async checkpoint save", Megatron's timer block) belong to the last step or save
# before them in the same attempt; loads likewise to the last load. A save line that opens a save
# without naming its step (NeMo's "Preemption detected, saving checkpoint", torchtitan's "Saving the
# checkpoint." before "Saving a full checkpoint at last step, step N.") takes the step of the save line
# after it when no step line comes between them.
FACTS_A_SQL = """
CREATE OR REPLACE TEMP TABLE jl_fa AS
WITH f AS (
    SELECT f.*, la.attempt, la.dated_before, la.dated_after,
        last_value(f.iteration IGNORE NULLS) OVER (
            PARTITION BY f.sid, la.attempt, f.fact LIKE 'load%' ORDER BY f.pos ROWS UNBOUNDED PRECEDING) AS it_before,
        first_value(CASE WHEN f.fact LIKE 'save%' AND f.iteration IS NOT NULL THEN f.iteration END IGNORE NULLS) OVER w
            AS next_save_it,
        first_value(CASE WHEN f.fact LIKE 'save%' AND f.iteration IS NOT NULL THEN f.pos END IGNORE NULLS) OVER w
            AS next_save_pos,
        first_value(CASE WHEN f.fact = 'step' THEN f.pos END IGNORE NULLS) OVER w AS next_step_pos
    FROM jl_facts f JOIN jl_la la USING (sid, pos)
    WINDOW w AS (PARTITION BY f.sid, la.attempt ORDER BY f.pos ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
)
SELECT * EXCLUDE (it_before, next_save_it, next_save_pos, next_step_pos),
    coalesce(iteration,
             CASE WHEN fact = 'save_start' AND next_save_pos < coalesce(next_step_pos, next_save_pos + 1)
                  THEN next_save_it END,
             it_before) AS it
FROM f
"""

# Each log's job (jl_jobs: joblog.resolve_job_ids), a row even for a log without any fact.
INSERT_JOB_SQL = """
INSERT INTO jobs (job_id, name, gpus, source_id)
SELECT j.job, max(f.job_name), max(f.gpus), j.sid FROM jl_jobs j LEFT JOIN jl_facts f USING (sid)
GROUP BY j.sid, j.job ORDER BY j.sid
"""

INSERT_ATTEMPTS_SQL = """
INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id)
SELECT j.job, attempt, min(ts_exact), max(ts_exact), sid FROM jl_la JOIN jl_jobs j USING (sid)
GROUP BY sid, j.job, attempt ORDER BY sid, attempt
"""

INSERT_STEPS_SQL = """
INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, step_time_s, tflops_per_gpu, tokens_per_s,
                   samples_per_s, loss, source_id, line)
SELECT j.job, attempt, iteration, ts, ts_precision, step_time_s, tflops_per_gpu, tokens_per_s, samples_per_s,
       loss, sid, lineno
FROM jl_fa JOIN jl_jobs j USING (sid) WHERE fact = 'step' AND iteration IS NOT NULL ORDER BY pos
"""

# One row per (attempt, kind, iteration): its phases' lines merged. end_ts is the end of the last
# phase reached (finalized, else scheduled); blocking_s is what the log states (timer block, "in N
# seconds", "Save duration"), else the time from start to scheduled (async) or to end (sync) when
# both times are the lines' own (inferred times would make up a duration). A restore printed
# undated (Megatron's "loading checkpoint ..." lines) is bounded instead: it began after the dated
# line before its start line and ended by the dated line after its end line, in its attempt
# ('bounded'); without a dated line before it, the sacct start bounds it (checkpoints_reconciled). A restore's
# blocking_s is the load's stated duration (Megatron's load-checkpoint timer, torchtitan's "in N seconds").
INSERT_CHECKPOINTS_SQL = """
INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, end_ts, ts_precision, path, is_async, phase,
                         blocking_s, source_id, line)
WITH c AS (
    SELECT sid, attempt, ck_kind AS kind, it AS iteration,
        -- a line with its own time beats one its neighbours date (NeMo's dated load line, Lightning's undated ones)
        coalesce(min(ts) FILTER (WHERE fact IN ('save_start', 'load_start') AND ts_precision = 'exact'),
                 min(CASE WHEN bounded THEN coalesce(dated_before, ts) ELSE ts END)
                     FILTER (WHERE fact IN ('save_start', 'load_start'))) AS start_ts,
        -- the trainer's own "scheduled" lines (torchtitan's checkpoint process receives the request later)
        coalesce(max(ts) FILTER (WHERE fact = 'save_sched' AND kind IS DISTINCT FROM 'process'),
                 max(ts) FILTER (WHERE fact = 'save_sched')) AS sched_ts,
        coalesce(max(ts) FILTER (WHERE fact IN ('save_end', 'load_end') AND ts_precision = 'exact'),
                 max(CASE WHEN bounded THEN coalesce(dated_after, ts) ELSE ts END)
                     FILTER (WHERE fact IN ('save_end', 'load_end'))) AS done_ts,
        CASE WHEN bool_or(ts_precision = 'exact') FILTER (WHERE fact IN ('save_start', 'load_start'))
                  AND bool_or(ts_precision = 'exact') FILTER (WHERE fact IN ('save_end', 'load_end', 'save_sched'))
                  THEN 'exact'
             WHEN bool_or(ts_precision = 'none') THEN 'none'
             WHEN bool_or(bounded) THEN CASE WHEN bool_or(bounded AND dated_before IS NULL)
                                                  FILTER (WHERE fact = 'load_start') THEN 'inferred'
                                             ELSE 'bounded' END
             WHEN bool_or(ts_precision = 'inferred') FILTER (WHERE fact <> 'save_block') THEN 'inferred'
             ELSE 'exact' END AS ts_precision,
        arg_min(path, pos) FILTER (WHERE path IS NOT NULL) AS path,
        coalesce(bool_or(is_async), false) AS is_async,
        max(blocking_s) AS stated_blocking_s, min(lineno) AS line
    FROM (SELECT *, CASE WHEN fact LIKE 'load%' THEN 'restore' ELSE 'save' END AS ck_kind,
                 fact LIKE 'load%' AND ts_precision = 'inferred' AS bounded
          FROM jl_fa WHERE fact LIKE 'save%' OR fact LIKE 'load%')
    GROUP BY sid, attempt, ck_kind, it
)
SELECT j.job, attempt, kind, iteration,
    -- an undated load whose duration the log states (Megatron's load-checkpoint timer) ended by the dated
    -- line after it (`[after model, optimizer, ... are built]`, printed as the load returns) and took that long
    CASE WHEN kind = 'restore' AND ts_precision = 'bounded' AND stated_blocking_s IS NOT NULL AND done_ts IS NOT NULL
         THEN greatest(start_ts, done_ts - to_microseconds(CAST(stated_blocking_s * 1e6 AS BIGINT)))
         ELSE start_ts END,
    coalesce(done_ts, sched_ts), ts_precision, path,
    CASE WHEN kind = 'save' THEN is_async END,
    CASE WHEN kind = 'save' AND is_async THEN CASE WHEN done_ts IS NOT NULL THEN 'finalized' ELSE 'scheduled' END END,
    -- an async save blocks from its first line to its last part scheduled (NeMo writes a top-k and a -last
    -- checkpoint, each with its own "Save duration" of the sharded write alone)
    CASE WHEN kind = 'save' AND is_async AND ts_precision = 'exact' AND sched_ts IS NOT NULL
         THEN epoch(sched_ts - start_ts)
         ELSE coalesce(stated_blocking_s, CASE WHEN ts_precision = 'exact' THEN epoch(done_ts - start_ts) END) END,
    sid, line
FROM c JOIN jl_jobs j USING (sid) ORDER BY sid, line
"""

INSERT_INCIDENTS_SQL = """
INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT j.job, attempt, ts, coalesce(logged_ts, ts), ts_precision, kind, rank, collective, seq, timeout_ms,
       ran_for_ms, message, fields, sid, lineno
FROM jl_fa JOIN jl_jobs j USING (sid) WHERE fact = 'incident' ORDER BY pos
"""

INSERT_MARKS_SQL = """
INSERT INTO job_marks (job_id, attempt, ts, ts_precision, kind, iteration, message, source_id, line)
SELECT j.job, attempt, ts, ts_precision, kind, iteration, message, sid, lineno
FROM jl_fa JOIN jl_jobs j USING (sid) WHERE fact = 'mark' ORDER BY pos
"""

# The rows each log wrote (the group's sources only: the stage holds other files' rows too).
ROWS_SQL = " UNION ALL ".join(
    f"SELECT source_id, count(*) AS n FROM {t} WHERE list_contains($sids, source_id) GROUP BY source_id"
    for t in ("jobs", "attempts", "steps", "checkpoints", "job_incidents", "job_marks")
)
ROWS_SQL = f"SELECT source_id, sum(n)::BIGINT FROM ({ROWS_SQL}) GROUP BY source_id"
REJECT_COUNT_SQL = "SELECT sid, count(*) FROM jl_facts WHERE fact = 'reject' GROUP BY sid"
REJECT_SAMPLES_SQL = f"""
SELECT f.sid, f.lineno, f.message, l.body FROM jl_facts f JOIN jl_lines l USING (sid, pos)
WHERE f.fact = 'reject'
QUALIFY row_number() OVER (PARTITION BY f.sid ORDER BY f.pos) <= {MAX_REJECT_SAMPLES}
ORDER BY f.pos
"""


TEMP_TABLES = ("jl_files", "jl_jobs", "jl_g", "jl_lines", "jl_facts", "jl_bounds", "jl_la", "jl_fa")
INSERTS = [
    INSERT_JOB_SQL,
    INSERT_ATTEMPTS_SQL,
    INSERT_STEPS_SQL,
    INSERT_CHECKPOINTS_SQL,
    INSERT_INCIDENTS_SQL,
    INSERT_MARKS_SQL,
]
# The FQDN a ChildFailedError names: the incident's host is the short name, the full one kept in host_names.
FULL_NAMES_SQL = record_full_names_sql(
    "(SELECT fields->>'fqdn' AS fqdn, source_id FROM job_incidents WHERE list_contains($sids, source_id))",
    "fqdn",
    sid="source_id",
)


def write_rows(conn: duckdb.DuckDBPyConnection, files: Sequence[LogFile]) -> None:
    """The store's rows of every log of the group, each with its source id; each file's rows and rejects
    counted into its result."""
    conn.execute(ONE_RANK_STEPS_SQL)
    conn.execute(SNAP_SQL)
    conn.execute(BOUNDS_SQL)
    conn.execute(ATTEMPT_OF_LINE_SQL)
    conn.execute(FACTS_A_SQL)
    joblog_times.date_steps(conn)
    for sql in INSERTS:
        conn.execute(sql)
    sids = {"sids": [f.sid for f in files]}
    joblog_times.date_save_ends(conn, sids)
    conn.execute(FULL_NAMES_SQL, sids)
    by_sid = {f.sid: f.result for f in files}
    for sid, n in conn.execute(ROWS_SQL, sids).fetchall():
        by_sid[sid].rows += n
    sampled: Counter[int] = Counter()
    for sid, line, reason, text in conn.execute(REJECT_SAMPLES_SQL).fetchall():
        by_sid[sid].reject(line, reason, text)
        sampled[sid] += 1
    for sid, counted in conn.execute(REJECT_COUNT_SQL).fetchall():
        by_sid[sid].rejected += counted - sampled[sid]
    drop_temp(conn, TEMP_TABLES, views=["jl_mllog"])
