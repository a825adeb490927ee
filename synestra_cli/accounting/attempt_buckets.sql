-- Per segment (bucket_lines.sql): its span, the three instants that cut it (first step, last completed save, last
-- progress) and the time-based buckets (accounting/buckets.py, docs/accounting.md). A segment restarted in place
-- ends when torchrun's agent begins the next rendezvous (the old workers are stopped), else at its "Worker group
-- FAILED" line, else at its last dated line; the time until the next segment starts is start-up, not a requeue.
att0 AS (
    SELECT job_id, attempt, start_ts, end_ts, state,
           lead(start_ts) OVER (PARTITION BY job_id ORDER BY attempt) AS next_attempt_start,
           attempt = max(attempt) OVER (PARTITION BY job_id) AS last_attempt
    FROM attempts_reconciled
    WHERE job_id IN (SELECT job_id FROM sel) AND start_ts IS NOT NULL AND end_ts IS NOT NULL
),
segn AS (SELECT job_id, attempt, max(n_seg) AS n FROM segs0 GROUP BY ALL),
segt0 AS (  -- the segments of the log that cut the attempt most
    SELECT s.job_id, s.attempt, s.seg, min(s.start_ts) AS log_start, max(s.end_ts) AS log_end
    FROM segs0 s JOIN segn n ON n.job_id = s.job_id AND n.attempt = s.attempt AND s.n_seg = n.n
    GROUP BY ALL
),
wstart AS (
    SELECT job_id, attempt, ts FROM job_marks_reconciled
    WHERE kind = 'worker_start' AND job_id IN (SELECT job_id FROM sel) AND ts IS NOT NULL
),
segt AS (  -- a segment restarted in place begins when the agent starts its workers ("Starting worker group",
    -- printed before the new workers' first line), not at that line: the new workers' start-up is the segment's
    SELECT t.* REPLACE (coalesce((SELECT max(w.ts) FROM wstart w WHERE w.job_id = t.job_id AND w.attempt = t.attempt
                                    AND w.ts <= t.log_start AND w.ts > t.prev_start), t.log_start) AS log_start)
    FROM (SELECT *, lag(log_start) OVER (PARTITION BY job_id, attempt ORDER BY seg) AS prev_start FROM segt0) t
),
agent AS (
    SELECT i.job_id, i.attempt, coalesce(m.seg, 1) AS seg, max(coalesce(i.logged_ts, i.ts)) AS failed_at
    FROM job_incidents_reconciled i
    LEFT JOIN segmap m ON m.job_id = i.job_id AND m.source_id = i.source_id AND m.log_attempt = i.log_attempt
    WHERE i.kind = 'elastic_restart' AND i.job_id IN (SELECT job_id FROM sel) GROUP BY ALL
),
rdzv AS (
    SELECT k.job_id, k.attempt, coalesce(m.seg, 1) AS seg, k.ts
    FROM job_marks_reconciled k
    LEFT JOIN segmap m ON m.job_id = k.job_id AND m.source_id = k.source_id AND m.log_attempt = k.log_attempt
    WHERE k.kind = 'worker_rendezvous' AND k.job_id IN (SELECT job_id FROM sel) AND k.ts IS NOT NULL
),
segs AS (
    SELECT a.job_id, a.attempt, coalesce(t.seg, 1) AS seg, coalesce(t.seg, 1) = coalesce(n.n, 1) AS last_seg,
           CASE WHEN coalesce(t.seg, 1) = 1 THEN a.start_ts ELSE t.log_start END AS start_ts,
           CASE WHEN coalesce(t.seg, 1) = coalesce(n.n, 1) THEN a.end_ts
                ELSE coalesce((SELECT min(r.ts) FROM rdzv r WHERE r.job_id = a.job_id AND r.attempt = a.attempt
                                AND r.seg = t.seg AND r.ts >= g.failed_at), g.failed_at, t.log_end) END AS end_ts,
           CASE WHEN coalesce(t.seg, 1) = coalesce(n.n, 1) THEN a.state ELSE 'FAILED' END AS state,
           a.next_attempt_start, a.last_attempt
    FROM att0 a LEFT JOIN segn n USING (job_id, attempt) LEFT JOIN segt t USING (job_id, attempt)
    LEFT JOIN agent g ON g.job_id = a.job_id AND g.attempt = a.attempt AND g.seg = t.seg
),
att AS (
    SELECT job_id, attempt, seg, least(greatest(start_ts, lag(end_ts) OVER w), end_ts) AS start_ts, end_ts, state,
           CASE WHEN last_seg THEN next_attempt_start END AS next_start,
           CASE WHEN NOT last_seg THEN lead(start_ts) OVER w END AS next_seg_start,
           last_attempt AND last_seg AS is_last
    FROM segs WHERE start_ts IS NOT NULL AND end_ts IS NOT NULL
    WINDOW w AS (PARTITION BY job_id, attempt ORDER BY seg)
),
saves1 AS (  -- a save whose end nothing in its log dates (the last thing an attempt did): ended by the attempt's end
    SELECT c.* REPLACE (coalesce(c.end_ts, CASE WHEN c.start_ts IS NOT NULL AND NOT coalesce(c.is_async, false)
                                                THEN a.end_ts END) AS end_ts)
    FROM checkpoints_reconciled c LEFT JOIN att0 a USING (job_id, attempt)
    WHERE c.kind = 'save' AND c.job_id IN (SELECT job_id FROM sel)
),
saves0 AS (  -- an async save blocked training until its write was scheduled: its end is there, not at its finalization
    SELECT c.job_id, c.attempt, coalesce(m.seg, 1) AS seg, c.iteration, c.ts_precision, c.source_id, c.line,
           CASE WHEN c.is_async AND c.start_ts IS NOT NULL AND c.blocking_s IS NOT NULL
                THEN least(c.start_ts + to_microseconds(CAST(c.blocking_s * 1e6 AS BIGINT)), c.end_ts) ELSE c.end_ts END
               AS end_ts,
           coalesce(c.blocking_s, epoch(c.end_ts - c.start_ts)) AS blocking_s
    FROM saves1 c
    LEFT JOIN segmap m ON m.job_id = c.job_id AND m.source_id = c.source_id AND m.log_attempt = c.log_attempt
    WHERE c.end_ts IS NOT NULL
)
