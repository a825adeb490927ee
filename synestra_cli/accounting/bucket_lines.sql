-- Shared by the attempt buckets and the degraded windows (accounting/buckets.py): the log segments, restores per
-- segment, and each iteration line with the iterations it covers (since the previous line of its segment, or the
-- restored iteration) and its pace. A segment is one process lifetime: an attempt, or each part of one that
-- torchrun's elastic agent restarted in place (two log attempts of one source mapped to one sacct attempt).
-- The first line after a start averages in the warm-up (compilation, first batches): its iterations run at the
-- next line's pace (the ideal when there is none), so the warm-up is start-up, as ml-goodput-measurement's
-- PROGRAM_STARTUP, and a job that starts degraded still charges that first interval to degraded_throughput.
segs0 AS (
    SELECT m.job_id, m.attempt, m.source_id, m.log_attempt, la.start_ts, la.end_ts,
        row_number() OVER (PARTITION BY m.job_id, m.attempt, m.source_id
                           ORDER BY la.start_ts NULLS LAST, m.log_attempt) AS seg,
        count(*) OVER (PARTITION BY m.job_id, m.attempt, m.source_id) AS n_seg
    FROM attempt_map m JOIN log_attempts la USING (job_id, source_id, log_attempt)
    WHERE m.job_id IN (SELECT job_id FROM sel)
),
segmap AS (SELECT job_id, source_id, log_attempt, seg FROM segs0),
restores AS (
    SELECT c.job_id, c.attempt, coalesce(m.seg, 1) AS seg,
           sum(coalesce(c.blocking_s, epoch(c.end_ts - c.start_ts))) AS restore_s,
           max(c.end_ts) AS restore_end, max(c.iteration) AS restore_iteration
    FROM checkpoints_reconciled c
    LEFT JOIN segmap m ON m.job_id = c.job_id AND m.source_id = c.source_id AND m.log_attempt = c.log_attempt
    WHERE c.kind = 'restore' AND c.job_id IN (SELECT job_id FROM sel)
      AND c.start_ts IS NOT NULL AND c.end_ts IS NOT NULL
    GROUP BY ALL
),
lines AS (
    SELECT s.job_id, s.attempt, s.seg, s.iteration, s.ts,
           s.iteration - coalesce(lag(s.iteration) OVER w, r.restore_iteration, 0) AS n,
           CASE WHEN lag(s.iteration) OVER w IS NULL THEN coalesce(lead(s.step_time_s) OVER w, i.ideal_s, s.step_time_s)
                ELSE s.step_time_s END AS pace
    FROM (SELECT st.*, coalesce(m.seg, 1) AS seg FROM steps_reconciled st
          LEFT JOIN segmap m ON m.job_id = st.job_id AND m.source_id = st.source_id AND m.log_attempt = st.log_attempt
          WHERE st.job_id IN (SELECT job_id FROM sel)) s
    LEFT JOIN restores r USING (job_id, attempt, seg) LEFT JOIN ideal i USING (job_id)
    WHERE s.ts IS NOT NULL AND s.step_time_s > 0
    WINDOW w AS (PARTITION BY s.job_id, s.attempt, s.seg ORDER BY s.iteration, s.ts)
)
