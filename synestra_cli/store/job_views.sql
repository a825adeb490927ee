CREATE TABLE sacct_rows (
    job_id       VARCHAR NOT NULL,    -- 123, 123_4 (array task), 123_[5-9] (pending range); het 123+1 -> 123
    het          INTEGER,             -- het-job component, NULL for ordinary jobs
    step         VARCHAR,             -- NULL for the allocation row; batch | extern | 0 | 1 ...
    attempt      INTEGER,             -- of the allocation row printed before (sacct -D); NULL: never ran
    job_name     VARCHAR,
    user_name    VARCHAR,
    state        VARCHAR,             -- first word: CANCELLED
    state_detail VARCHAR,             -- the rest: "by 1234"
    exit_code    VARCHAR,
    start_ts     TIMESTAMP,
    end_ts       TIMESTAMP,
    elapsed_s    DOUBLE,
    nodelist     VARCHAR,             -- as printed
    nodes        VARCHAR[],           -- expanded
    gpus         INTEGER,
    source_id    INTEGER NOT NULL,
    line         BIGINT
);

CREATE VIEW sacct_attempts AS
WITH a AS (
    SELECT a.*, max(a.source_id) OVER (PARTITION BY a.job_id) AS latest
    FROM attempts a JOIN sources s USING (source_id) WHERE s.format = 'sacct'
)
SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes, source_id FROM a WHERE source_id = latest;

CREATE VIEW log_attempts AS
SELECT a.job_id, a.source_id, a.attempt AS log_attempt, a.start_ts, a.end_ts,
       count(*) OVER (PARTITION BY a.job_id, a.source_id) AS n_log
FROM attempts a JOIN sources s USING (source_id) WHERE s.format <> 'sacct';

CREATE VIEW attempt_map AS
WITH sa AS (
    SELECT *, count(*) OVER (PARTITION BY job_id) AS n_sacct FROM sacct_attempts
), timed AS (
    SELECT la.job_id, la.source_id, la.log_attempt, sa.attempt,
           epoch(least(coalesce(la.end_ts, la.start_ts), coalesce(sa.end_ts, TIMESTAMP '9999-12-31')))
             - epoch(greatest(la.start_ts, sa.start_ts)) AS overlap_s,
           abs(epoch(la.start_ts) - epoch(sa.start_ts)) AS distance_s
    FROM log_attempts la JOIN sa ON sa.job_id = la.job_id
    WHERE la.start_ts IS NOT NULL AND sa.start_ts IS NOT NULL
), best AS (
    SELECT job_id, source_id, log_attempt,
           arg_min(attempt, (overlap_s < 0, -overlap_s, distance_s)) AS attempt,
           CASE WHEN max(overlap_s) >= 0 THEN 'overlap' ELSE 'nearest' END AS matched_by
    FROM timed GROUP BY ALL
)
SELECT la.job_id, la.source_id, la.log_attempt,
       coalesce(b.attempt, CASE WHEN sa1.n_sacct IS NOT NULL
                                THEN greatest(1, la.log_attempt + sa1.n_sacct - la.n_log) END,
                la.log_attempt)::INTEGER AS attempt,
       coalesce(b.matched_by, CASE WHEN sa1.n_sacct IS NOT NULL THEN 'order' ELSE 'log' END) AS matched_by
FROM log_attempts la
LEFT JOIN best b USING (job_id, source_id, log_attempt)
LEFT JOIN (SELECT DISTINCT job_id, n_sacct FROM sa) sa1 USING (job_id);

CREATE VIEW jobs_reconciled AS
WITH j AS (
    SELECT j.*, s.format = 'sacct' AS from_sacct FROM jobs j JOIN sources s USING (source_id)
), n AS (
    SELECT jn.job_id, list_sort(list(DISTINCT jn.host) FILTER (WHERE s.format = 'sacct')) AS sacct_nodes,
           list_sort(list(DISTINCT jn.host)) AS any_nodes
    FROM job_nodes jn JOIN sources s USING (source_id) GROUP BY jn.job_id
)
SELECT j.job_id,
       first(name ORDER BY from_sacct DESC, source_id DESC) FILTER (WHERE name IS NOT NULL) AS name,
       first(user_name ORDER BY from_sacct DESC, source_id DESC) FILTER (WHERE user_name IS NOT NULL)
           AS user_name,
       first(gpus ORDER BY from_sacct DESC, source_id DESC) FILTER (WHERE gpus IS NOT NULL) AS gpus,
       first(state ORDER BY from_sacct DESC, source_id DESC) FILTER (WHERE state IS NOT NULL) AS state,
       first(coalesce(n.sacct_nodes, n.any_nodes)) AS nodes
FROM j LEFT JOIN n USING (job_id) GROUP BY j.job_id;

CREATE VIEW attempts_reconciled AS
WITH logspan AS (
    SELECT m.job_id, m.attempt, min(la.start_ts) AS log_start_ts, max(la.end_ts) AS log_end_ts,
           list_sort(list(DISTINCT m.matched_by)) AS matched_by
    FROM attempt_map m JOIN log_attempts la USING (job_id, source_id, log_attempt) GROUP BY ALL
), base AS (
    SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes, 'sacct' AS origin FROM sacct_attempts
    UNION ALL
    SELECT m.job_id, m.attempt, min(la.start_ts), max(la.end_ts), NULL, NULL, NULL, 'log'
    FROM attempt_map m JOIN log_attempts la USING (job_id, source_id, log_attempt)
    WHERE m.matched_by = 'log' GROUP BY ALL
)
SELECT b.job_id, b.attempt, b.start_ts, b.end_ts, b.state, b.exit_code, b.nodes, len(b.nodes) AS n_nodes,
       j.gpus, epoch(b.end_ts) - epoch(b.start_ts) AS duration_s, b.origin,
       l.log_start_ts, l.log_end_ts, l.matched_by
FROM base b LEFT JOIN logspan l USING (job_id, attempt) LEFT JOIN jobs_reconciled j USING (job_id);

-- Per log attempt segment without timestamps: the iteration range its steps cover.
CREATE VIEW untimed_segments AS
SELECT job_id, source_id, coalesce(attempt, 1) AS log_attempt,
       min(iteration) AS i_min, max(iteration) AS i_max, count(*) AS n
FROM steps WHERE ts IS NULL GROUP BY ALL;

-- Fraction of the attempt elapsed at an iteration: uniform progress from one logging interval
-- before the first logged iteration (at attempt start) to the last one (at attempt end).
CREATE MACRO _iter_origin(i_min, i_max, n) AS
    i_min - CASE WHEN n > 1 THEN (i_max - i_min) / (n - 1) ELSE 1 END;

CREATE MACRO _iter_frac(it, i_min, i_max, n) AS
    greatest(0.0, least(1.0, (it - _iter_origin(i_min, i_max, n)) / (i_max - _iter_origin(i_min, i_max, n))));

CREATE MACRO _estimate_ts(it, i_min, i_max, n, t0, t1) AS
    t0 + to_microseconds(CAST(_iter_frac(it, i_min, i_max, n) * (epoch_us(t1) - epoch_us(t0)) AS BIGINT));

CREATE VIEW steps_reconciled AS
SELECT s.job_id, coalesce(m.attempt, s.attempt) AS attempt, s.attempt AS log_attempt, s.iteration,
       coalesce(s.ts, _estimate_ts(s.iteration, u.i_min, u.i_max, u.n, a.start_ts, a.end_ts)) AS ts,
       CASE WHEN s.ts IS NULL AND a.start_ts IS NOT NULL AND a.end_ts IS NOT NULL AND u.n IS NOT NULL
            THEN 'estimated' ELSE s.ts_precision END AS ts_precision,
       s.step_time_s, s.tflops_per_gpu, s.tokens_per_s, s.samples_per_s, s.loss, s.source_id, s.line
FROM steps s
LEFT JOIN attempt_map m ON m.job_id = s.job_id AND m.source_id = s.source_id
                       AND m.log_attempt = coalesce(s.attempt, 1)
LEFT JOIN untimed_segments u ON s.ts IS NULL AND u.job_id = s.job_id AND u.source_id = s.source_id
                             AND u.log_attempt = coalesce(s.attempt, 1)
LEFT JOIN sacct_attempts a ON s.ts IS NULL AND a.job_id = s.job_id
                         AND a.attempt = coalesce(m.attempt, s.attempt, 1);

CREATE VIEW checkpoints_reconciled AS
SELECT c.job_id, coalesce(m.attempt, c.attempt) AS attempt, c.attempt AS log_attempt, c.kind, c.iteration,
       coalesce(c.start_ts, _estimate_ts(c.iteration, u.i_min, u.i_max, u.n, a.start_ts, a.end_ts))
           AS start_ts,
       c.end_ts,
       CASE WHEN c.start_ts IS NULL AND a.start_ts IS NOT NULL AND a.end_ts IS NOT NULL
                 AND u.n IS NOT NULL AND c.iteration IS NOT NULL
            THEN 'estimated' ELSE c.ts_precision END AS ts_precision,
       c.path, c.is_async, c.phase, c.blocking_s, c.source_id, c.line
FROM checkpoints c
LEFT JOIN attempt_map m ON m.job_id = c.job_id AND m.source_id = c.source_id
                       AND m.log_attempt = coalesce(c.attempt, 1)
LEFT JOIN untimed_segments u ON c.start_ts IS NULL AND u.job_id = c.job_id AND u.source_id = c.source_id
                             AND u.log_attempt = coalesce(c.attempt, 1)
LEFT JOIN sacct_attempts a ON c.start_ts IS NULL AND a.job_id = c.job_id
                         AND a.attempt = coalesce(m.attempt, c.attempt, 1);

CREATE VIEW job_incidents_reconciled AS
SELECT i.* EXCLUDE (attempt), coalesce(m.attempt, i.attempt) AS attempt, i.attempt AS log_attempt
FROM job_incidents i
LEFT JOIN attempt_map m ON m.job_id = i.job_id AND m.source_id = i.source_id
                       AND m.log_attempt = coalesce(i.attempt, 1);
