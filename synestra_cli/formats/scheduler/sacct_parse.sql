INSERT INTO _sacct_parsed (lineno, line, reason, job_id, het, step, job_name, user_name, state, state_detail,
                           exit_code, start_ts, end_ts, elapsed_s, nodelist, gpus, allocated)
WITH f AS (
    SELECT lineno, line,
           CASE WHEN $fixed  -- fixed-width columns (the default layout): the dash line's spans
                THEN list_transform($starts, lambda s, i: trim(substr(line, s, $widths[i])))
                ELSE string_split(CASE WHEN $trailing AND suffix(line, $delim)
                                       THEN substr(line, 1, length(line) - 1) ELSE line END, $delim) END AS p,
           -- which fields sacct cut to their width (ending in '+'): only those whose cut matters
           CASE WHEN $fixed
                THEN list_transform($starts, lambda s, i: $cut_matters[i] AND length(substr(line, s, $widths[i])) = $widths[i]
                                                     AND suffix(substr(line, s, $widths[i]), '+'))
                ELSE []::BOOLEAN[] END AS cut
    FROM sacct_lines WHERE lineno > $header_line AND trim(line) <> '' AND line <> $header
), v AS (
    SELECT lineno, line, cut, len(p) AS nf, trim(coalesce(p[$c_jobid], p[$c_jobidraw])) AS jobid,
           regexp_extract(trim(coalesce(p[$c_jobid], p[$c_jobidraw])),
                          '^(\d+)(?:_(\d+|\[[0-9,%\-]+\]))?(?:\+(\d+))?(?:\.(\w+))?$',
                          ['base', 'task', 'het', 'step']) AS id,
           nullif(p[$c_name], '') AS job_name, nullif(p[$c_user], '') AS user_name,
           nullif(trim(p[$c_state]), '') AS state_text, nullif(p[$c_exit], '') AS exit_code,
           CASE WHEN p[$c_start] NOT IN ('', 'Unknown', 'None') THEN p[$c_start] END AS start_text,
           CASE WHEN p[$c_end] NOT IN ('', 'Unknown', 'None') THEN p[$c_end] END AS end_text,
           CASE WHEN p[$c_elapsed] NOT IN ('', 'INVALID', 'Unknown') THEN p[$c_elapsed] END AS elapsed_text,
           nullif(trim(p[$c_nodelist]), '') AS nodelist, p[$c_alloctres] AS alloctres,
           p[$c_allocgres] AS allocgres, p[$c_reqtres] AS reqtres,
           nullif(trim(p[$c_cluster]), '') AS cluster
    FROM f
), t0 AS (
    SELECT *, rtrim(split_part(state_text, ' ', 1), '+') AS state,  -- fixed width: `CANCELLED+` (by <uid>, cut)
           to_utc(try_strptime(leap_second(start_text), ['%Y-%m-%dT%H:%M:%S', '%Y-%m-%dT%H:%M:%S.%f']), $tz) AS start_utc,
           to_utc(try_strptime(leap_second(end_text), ['%Y-%m-%dT%H:%M:%S', '%Y-%m-%dT%H:%M:%S.%f']), $tz) AS end_utc,
           _sacct_seconds(elapsed_text) AS elapsed_s,
           coalesce(_sacct_tres_gpus(alloctres),
                    try_cast(regexp_extract(allocgres, '(?:^|,)gpu(?::[^:,()]+)?:(\d+)', 1) AS INTEGER),
                    _sacct_tres_gpus(reqtres), CASE WHEN alloctres <> '' THEN 0 END) AS gpus
    FROM v
), t AS (
    SELECT * REPLACE (CASE WHEN elapsed_s < $max_elapsed THEN elapsed_s END AS elapsed_s),
           elapsed_s >= $max_elapsed AS elapsed_absurd
    FROM t0
)
SELECT lineno, line,
       CASE WHEN nf <> $ncols THEN printf('expected %d fields, found %d', $ncols, nf)
            WHEN list_contains(cut, true) THEN 'value cut at its column width (`+`): ' || list_filter(
                $names, lambda n, i: cut[i])[1] || '; re-run sacct with -P, or widen it: --format=<Field>%40'
            WHEN id.base = '' THEN 'unreadable JobID ' || coalesce(jobid, '')
            WHEN start_text IS NOT NULL AND start_utc IS NULL THEN 'unreadable Start time ' || start_text
            WHEN end_text IS NOT NULL AND end_utc IS NULL THEN 'unreadable End time ' || end_text
            WHEN elapsed_absurd THEN 'Elapsed out of range (68 years or more) ' || elapsed_text
            WHEN elapsed_text IS NOT NULL AND elapsed_s IS NULL THEN 'unreadable Elapsed ' || elapsed_text
       END,
       -- jobs are keyed by cluster (synestra_cli/query/clusters.py): CLUSTER:ID when sacct names it
       coalesce(cluster || ':', '') || id.base || CASE WHEN id.task <> '' THEN '_' || id.task ELSE '' END,
       try_cast(nullif(id.het, '') AS INTEGER),
       nullif(id.step, ''), job_name, user_name, state,
       nullif(trim(substr(state_text, length(state) + 1)), ''), exit_code,
       coalesce(start_utc, end_utc - to_microseconds(CAST(elapsed_s * 1e6 AS BIGINT))),
       coalesce(end_utc, CASE WHEN state NOT IN ('RUNNING', 'PENDING', 'SUSPENDED', 'REQUEUED')
                              THEN start_utc + to_microseconds(CAST(elapsed_s * 1e6 AS BIGINT)) END),
       elapsed_s, nodelist, gpus,
       -- ran: not pending, Start not explicitly missing, nodes not "None assigned"
       coalesce(state <> 'PENDING', TRUE) AND NOT ($c_start > 0 AND start_utc IS NULL AND end_utc IS NULL)
           AND coalesce(lower(nodelist) <> 'none assigned', TRUE)
FROM t
