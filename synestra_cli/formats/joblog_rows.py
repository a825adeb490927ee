"""From a job log's facts (joblog.jl_facts) to store rows: attempts, steps, checkpoints, incidents.

Attempts appended to one file (Slurm `--open-mode=append`, requeue) are told apart by three
markers: a start-up banner, a checkpoint load, and an iteration count that goes back (a step whose
iteration is not above the previous step's). Such a marker opens a new attempt only if training
activity (a step or a save) or a fatal failure happened since the previous marker: a restart prints a banner, then
a load, then steps, and that cluster is one boundary, not three. Attempt numbers are 1..n in log
order; state and exit code are left NULL for the sacct reconciliation to fill.
"""

from __future__ import annotations

from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.formats.hosts import record_full_names_sql
from synestra_cli.store.sql import drop_temp, scalar

# torchrun --tee without --local-ranks-filter prints every rank's step lines: the steps of the
# lowest rank that prints them are the job's (Megatron prints from the last rank only).
ONE_RANK_STEPS_SQL = """
DELETE FROM jl_facts WHERE fact = 'step'
    AND coalesce(rank, -1) <> (SELECT min(coalesce(rank, -1)) FROM jl_facts WHERE fact = 'step')
"""

ACTIVITY = "('step', 'save_start', 'save_sched', 'save_end', 'save_block')"
# A failure that ends the process also closes its attempt, even one that died before its first step.
FATAL = "('nccl_timeout', 'nccl_error', 'cuda_error', 'python_exception', 'sigterm', 'oom', 'worker_failed')"

BOUNDS_SQL = f"""
CREATE OR REPLACE TEMP TABLE jl_bounds AS
WITH f AS (
    SELECT pos, fact, fact IN {ACTIVITY} OR (fact = 'incident' AND kind IN {FATAL}) AS is_act,
        fact = 'step' AND iteration <= lag(iteration) OVER (PARTITION BY fact = 'step' ORDER BY pos) AS went_back
    FROM jl_facts
    WHERE fact IN {ACTIVITY} OR fact IN ('banner', 'load_start', 'load_end')
       OR (fact = 'incident' AND kind IN {FATAL})
), g AS (
    SELECT *, coalesce(went_back, false) OR fact IN ('banner', 'load_start', 'load_end') AS is_marker,
        sum(is_act::INT) OVER (ORDER BY pos, fact ROWS UNBOUNDED PRECEDING) AS act_through
    FROM f
), m AS (
    SELECT pos, act_through - is_act::INT AS act_before,
        coalesce(lag(act_through) OVER (ORDER BY pos, fact), 0) AS act_at_prev_marker
    FROM g WHERE is_marker
)
SELECT DISTINCT pos FROM m WHERE act_before > act_at_prev_marker
"""

# Each line's attempt, and the nearest lines with their own time around it in that attempt: an
# undated line happened between them (the bounds of an undated restore).
ATTEMPT_OF_LINE_SQL = """
CREATE OR REPLACE TEMP TABLE jl_la AS
WITH a AS (
    SELECT l.pos, l.lineno, l.ts_exact,
        1 + count(b.pos) OVER (ORDER BY l.pos ROWS UNBOUNDED PRECEDING) AS attempt
    FROM jl_lines l LEFT JOIN jl_bounds b USING (pos)
)
SELECT *,
    last_value(ts_exact IGNORE NULLS) OVER (PARTITION BY attempt ORDER BY pos ROWS UNBOUNDED PRECEDING)
        AS dated_before,
    first_value(ts_exact IGNORE NULLS) OVER (PARTITION BY attempt ORDER BY pos
                                              ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS dated_after
FROM a
"""

# Checkpoint facts without their own iteration (torchtitan's "Saving the checkpoint", NeMo's
# "Scheduled async checkpoint save", Megatron's timer block) belong to the last step or save
# before them in the same attempt; loads likewise to the last load.
FACTS_A_SQL = """
CREATE OR REPLACE TEMP TABLE jl_fa AS
SELECT f.*, la.attempt, la.dated_before, la.dated_after,
    coalesce(f.iteration, last_value(f.iteration IGNORE NULLS) OVER (
        PARTITION BY la.attempt, f.fact LIKE 'load%' ORDER BY f.pos ROWS UNBOUNDED PRECEDING)) AS it
FROM jl_facts f JOIN jl_la la USING (pos)
"""

INSERT_JOB_SQL = """
INSERT INTO jobs (job_id, name, gpus, source_id)
SELECT $job, max(job_name), max(gpus), $sid FROM jl_facts
"""

INSERT_ATTEMPTS_SQL = """
INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id)
SELECT $job, attempt, min(ts_exact), max(ts_exact), $sid FROM jl_la GROUP BY attempt ORDER BY attempt
"""

INSERT_STEPS_SQL = """
INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, step_time_s, tflops_per_gpu, tokens_per_s,
                   samples_per_s, loss, source_id, line)
SELECT $job, attempt, iteration, ts, ts_precision, step_time_s, tflops_per_gpu, tokens_per_s, samples_per_s,
       loss, $sid, lineno
FROM jl_fa WHERE fact = 'step' AND iteration IS NOT NULL ORDER BY pos
"""

# One row per (attempt, kind, iteration): its phases' lines merged. end_ts is the end of the last
# phase reached (finalized, else scheduled); blocking_s is what the log states (timer block, "in N
# seconds", "Save duration"), else the time from start to scheduled (async) or to end (sync) when
# both times are the lines' own (inferred times would make up a duration). A restore printed
# undated (Megatron's "loading checkpoint ..." lines) is bounded instead: it began after the dated
# line before its start line and ended by the dated line after its end line, in its attempt
# ('bounded'); without a dated line before it, the sacct start bounds it (checkpoints_reconciled).
INSERT_CHECKPOINTS_SQL = """
INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, end_ts, ts_precision, path, is_async, phase,
                         blocking_s, source_id, line)
WITH c AS (
    SELECT attempt, ck_kind AS kind, it AS iteration,
        min(CASE WHEN bounded THEN coalesce(dated_before, ts) ELSE ts END)
            FILTER (WHERE fact IN ('save_start', 'load_start')) AS start_ts,
        min(ts) FILTER (WHERE fact = 'save_sched') AS sched_ts,
        max(CASE WHEN bounded THEN coalesce(dated_after, ts) ELSE ts END)
            FILTER (WHERE fact IN ('save_end', 'load_end')) AS done_ts,
        CASE WHEN bool_or(ts_precision = 'none') THEN 'none'
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
    GROUP BY attempt, ck_kind, it
)
SELECT $job, attempt, kind, iteration, start_ts, coalesce(done_ts, sched_ts), ts_precision, path,
    CASE WHEN kind = 'save' THEN is_async END,
    CASE WHEN kind = 'save' AND is_async THEN CASE WHEN done_ts IS NOT NULL THEN 'finalized' ELSE 'scheduled' END END,
    coalesce(stated_blocking_s, CASE WHEN ts_precision = 'exact' THEN
        epoch(CASE WHEN kind = 'save' AND is_async THEN sched_ts ELSE done_ts END - start_ts) END),
    $sid, line
FROM c ORDER BY line
"""

INSERT_INCIDENTS_SQL = """
INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT $job, attempt, ts, coalesce(logged_ts, ts), ts_precision, kind, rank, collective, seq, timeout_ms,
       ran_for_ms, message, fields, $sid, lineno
FROM jl_fa WHERE fact = 'incident' ORDER BY pos
"""

REJECT_COUNT_SQL = "SELECT count(*) FROM jl_facts WHERE fact = 'reject'"
REJECT_SAMPLES_SQL = """
SELECT f.lineno, f.message, l.body FROM jl_facts f JOIN jl_lines l USING (pos)
WHERE f.fact = 'reject' ORDER BY f.pos LIMIT 20
"""


TEMP_TABLES = ("jl_seg", "jl_t", "jl_full", "jl_g", "jl_lines", "jl_facts", "jl_bounds", "jl_la", "jl_fa")
INSERTS = [INSERT_JOB_SQL, INSERT_ATTEMPTS_SQL, INSERT_STEPS_SQL, INSERT_CHECKPOINTS_SQL, INSERT_INCIDENTS_SQL]
# The FQDN a ChildFailedError names: the incident's host is the short name, the full one kept in host_names.
FULL_NAMES_SQL = record_full_names_sql(
    "(SELECT fields->>'fqdn' AS fqdn FROM job_incidents WHERE source_id = $sid)", "fqdn"
)


def write_rows(ctx: LoadContext, job_id: str, result: LoadResult) -> None:
    conn = ctx.conn
    conn.execute(ONE_RANK_STEPS_SQL)
    conn.execute(BOUNDS_SQL)
    conn.execute(ATTEMPT_OF_LINE_SQL)
    conn.execute(FACTS_A_SQL)
    params = {"job": job_id, "sid": ctx.source_id}
    for sql in INSERTS:
        result.rows += scalar(conn, sql, params)
    conn.execute(FULL_NAMES_SQL, {"sid": ctx.source_id})
    result.rejects_from(conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    drop_temp(conn, TEMP_TABLES, views=["jl_mllog"])
