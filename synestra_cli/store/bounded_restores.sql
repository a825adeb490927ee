CREATE OR REPLACE VIEW checkpoints_reconciled AS
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
                         AND b.attempt = coalesce(m.attempt, c.attempt, 1);
