-- fr_trace's report (and nvidia-resiliency-ext's CollectiveAnalyzer table): each mismatch block names the
-- collective some ranks never joined and the missing ranks. A block runs from its `Not all ranks joining
-- collective` line to the next one; its fields are read from the lines inside it.
CREATE OR REPLACE TEMP TABLE _frt AS
WITH l AS (
    SELECT lineno, line,
           regexp_extract(line, '^\s*Not all ranks joining collective(?: (\d+) at entry (\d+)|, sequence number: (\d+)'
                                || '| for group (\S+) collective (\S+))?', ['seq', 'entry', 'seq2', 'grp', 'coll']) AS h,
           regexp_matches(line, '^\s*Not all ranks joining collective') AS is_head,
           regexp_extract(line, '^\s*(\d+)\s*\|\s*(.*?)\s*\|\s*(\S+)\s*\|\s*(.*?)\s*\|\s*(\S+)\s*\|\s*([0-9][0-9, ]*)\s*$',
                          ['pg', 'desc', 'coll', 'size', 'dtype', 'missing']) AS t
    FROM _frt_lines
), b AS (
    SELECT *, count(*) FILTER (WHERE is_head) OVER (ORDER BY lineno ROWS UNBOUNDED PRECEDING) AS block FROM l
)
SELECT lineno, line, block, is_head, h, t,
       CASE WHEN trim(line) = '' OR is_head OR t.pg <> '' OR block > 0 THEN NULL
            WHEN regexp_matches(line, '^\s*(\$|#)|torchfrtrace|fr_trace') THEN NULL
            WHEN regexp_matches(line, '^\s*PGID\s*\|') OR regexp_matches(line, '^[\s|+=-]+$') THEN NULL
            ELSE 'not part of an fr_trace mismatch report' END AS reason
FROM b;

CREATE OR REPLACE TEMP TABLE _frt_missing AS
WITH blocks AS (
    SELECT block, min(lineno) AS line,
           any_value(line) FILTER (WHERE is_head) AS head,
           try_cast(coalesce(nullif(max(h.seq), ''), nullif(max(h.seq2), '')) AS BIGINT) AS seq,
           coalesce(nullif(max(h.grp), ''),
                    max(regexp_extract(line, '^\s*group info:\s*(\S+)', 1)) FILTER (WHERE line ~ '^\s*group info:'))
               AS grp,
           coalesce(nullif(max(h.coll), ''),
                    max(regexp_extract(line, '^\s*collective:\s*(\S+)', 1)) FILTER (WHERE line ~ '^\s*collective:'))
               AS collective,
           max(coalesce(nullif(regexp_extract(line, 'missing ranks:\s*\{([0-9, ]*)\}', 1), ''),
                        nullif(regexp_extract(line, 'Missing ranks are \{([0-9, ]*)\}', 1), ''))) AS missing,
           max(try_cast(regexp_extract(line, '^\s*expected ranks:\s*(\d+)', 1) AS INTEGER)) AS expected,
           max(regexp_extract(line, '^\s*collective state:\s*(\w+)', 1)) FILTER (WHERE line ~ '^\s*collective state:')
               AS state
    FROM _frt WHERE block > 0 GROUP BY block
), fr AS (
    SELECT line, head AS message, seq, split_part(grp, ':', 1) AS pg, nullif(split_part(grp, ':', 2), '') AS pg_desc,
           collective, missing, expected, state, 'fr_trace' AS analyser
    FROM blocks
    UNION ALL
    SELECT lineno, trim(line), NULL, t.pg, nullif(split_part(t.desc, ',', 1), ''), t.coll, t.missing, NULL, NULL,
           'nvrx_collective_analyzer'
    FROM _frt WHERE t.pg <> ''
)
SELECT line, message, seq, pg, pg_desc, collective, expected, state, analyser,
       trim(unnest(string_split(missing, ',')))::INTEGER AS rank
FROM fr WHERE missing IS NOT NULL AND trim(missing) <> '';

INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT $job, NULL, NULL, NULL, 'none', 'fr_missing_rank', rank, collective, seq, NULL, NULL, message,
       json_object('pg', pg, 'pg_desc', pg_desc, 'expected_ranks', expected, 'state', state, 'analyser', analyser),
       $sid, line
FROM _frt_missing ORDER BY line, rank;
