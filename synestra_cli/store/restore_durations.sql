-- Migration 023: a restore whose duration the log states (checkpoints.blocking_s: Megatron's load-checkpoint
-- timer, torchtitan's "Finished loading the checkpoint in N seconds") and whose start no line dates lasted
-- that long, ending where its lines say it ended: bounded only by the sacct attempt's start (no dated line
-- before it in its log), it began `blocking_s` before its end, not at the attempt's start (the start-up
-- before the load is not the load). Otherwise as migration 008 (bounded_restores.sql).
CREATE OR REPLACE VIEW checkpoints_reconciled AS
WITH r AS (
    SELECT c.job_id, coalesce(m.attempt, c.attempt) AS attempt, c.attempt AS log_attempt, c.kind, c.iteration,
           CASE WHEN b.start_ts IS NULL
                    THEN coalesce(c.start_ts, _estimate_ts(c.iteration, u.i_min, u.i_max, u.n, a.start_ts, a.end_ts))
                WHEN c.ts_precision = 'inferred' THEN b.start_ts
                ELSE greatest(c.start_ts, b.start_ts) END AS start_ts,
           CASE WHEN b.end_ts IS NULL THEN c.end_ts ELSE least(c.end_ts, b.end_ts) END AS end_ts,
           CASE WHEN b.start_ts IS NOT NULL THEN 'bounded'
                WHEN c.start_ts IS NULL AND a.start_ts IS NOT NULL AND a.end_ts IS NOT NULL
                     AND u.n IS NOT NULL AND c.iteration IS NOT NULL
                THEN 'estimated' ELSE c.ts_precision END AS ts_precision,
           c.path, c.is_async, c.phase, c.blocking_s, c.source_id, c.line
    FROM checkpoints c
    LEFT JOIN attempt_map m ON m.job_id = c.job_id AND m.source_id = c.source_id
                           AND m.log_attempt = coalesce(c.attempt, 1)
    LEFT JOIN untimed_segments u ON c.start_ts IS NULL AND u.job_id = c.job_id AND u.source_id = c.source_id
                                 AND u.log_attempt = coalesce(c.attempt, 1)
    LEFT JOIN sacct_attempts a ON c.start_ts IS NULL AND a.job_id = c.job_id
                             AND a.attempt = coalesce(m.attempt, c.attempt, 1)
    LEFT JOIN sacct_attempts b ON c.kind = 'restore' AND c.ts_precision IN ('bounded', 'inferred')
                             AND c.start_ts IS NOT NULL AND b.job_id = c.job_id
                             AND b.attempt = coalesce(m.attempt, c.attempt, 1)
)
SELECT * REPLACE (
    CASE WHEN kind = 'restore' AND ts_precision = 'bounded' AND blocking_s IS NOT NULL AND end_ts IS NOT NULL
         THEN greatest(start_ts, end_ts - to_microseconds(CAST(blocking_s * 1e6 AS BIGINT)))
         ELSE start_ts END AS start_ts)
FROM r;
