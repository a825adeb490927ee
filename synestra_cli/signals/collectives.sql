-- Ranks behind in a collective, per job: from the Flight Recorder dumps of all ranks (formats/training/flight_recorder.py)
-- and from the analysers' reports (formats/training/fr_trace.py); and the ranks NVRx's straggler detection named
-- (formats/training/nvrx.py: slow, so the ones the others wait for). In each process group the furthest collective any rank
-- enqueued is the front; if no rank that reached it saw it complete, the group is stuck there, and every member
-- whose dump is present but never enqueued it is behind (fr_trace's "missing ranks"). A rank whose dump is
-- empty recorded nothing: it is behind in every group it belongs to.
WITH inc AS (
    SELECT i.job_id, i.kind, i.rank, i.collective, i.seq, i.ts, i.fields, i.line, s.path
    FROM job_incidents_reconciled i LEFT JOIN sources s ON s.source_id = i.source_id
    WHERE i.job_id IN (SELECT unnest($jobs)) AND i.kind IN ('fr_dump', 'fr_last_collective', 'fr_missing_rank', 'straggler')
), dumps AS (
    SELECT job_id, rank, any_value(path) AS path, max(TRY_CAST(fields->>'world_size' AS INTEGER)) AS world
    FROM inc WHERE kind = 'fr_dump' GROUP BY job_id, rank
), last AS (
    SELECT job_id, rank, fields->>'pg' AS pg, fields->>'pg_desc' AS pg_desc, collective, seq, fields->>'state' AS state,
           ts, TRY_CAST(fields->'members' AS INTEGER[]) AS members
    FROM inc WHERE kind = 'fr_last_collective'
), front AS (
    SELECT l.job_id, l.pg, l.seq AS top, any_value(l.collective) AS collective, any_value(l.pg_desc) AS pg_desc,
           bool_or(l.state = 'completed') AS done, min(l.ts) AS ts, count(*) AS waiting,
           any_value(l.members) FILTER (WHERE l.members IS NOT NULL) AS members
    FROM last l
    JOIN (SELECT job_id, pg, max(seq) AS top FROM last GROUP BY job_id, pg) f
      ON f.job_id = l.job_id AND f.pg = l.pg AND f.top = l.seq
    GROUP BY l.job_id, l.pg, l.seq
), from_dumps AS (
    SELECT f.job_id, m.rank, f.pg, f.pg_desc, f.collective, f.top AS seq, f.waiting, f.ts, d.path,
           NULL::BIGINT AS line, 'flight_recorder' AS found_by
    FROM front f, unnest(f.members) AS m(rank)
    JOIN dumps d ON d.job_id = f.job_id AND d.rank = m.rank
    LEFT JOIN last l ON l.job_id = f.job_id AND l.pg = f.pg AND l.rank = m.rank
    WHERE NOT f.done AND coalesce(l.seq, -1) < f.top
), reported AS (
    SELECT job_id, rank, fields->>'pg', fields->>'pg_desc', collective, seq, NULL::BIGINT, ts, path, line,
           fields->>'analyser'
    FROM inc WHERE kind = 'fr_missing_rank' AND rank IS NOT NULL
    UNION ALL
    SELECT job_id, rank, NULL, NULL, NULL, NULL, NULL::BIGINT, ts, path, line, 'nvrx_straggler_detection'
    FROM inc WHERE kind = 'straggler' AND rank IS NOT NULL
), behind AS (
    SELECT * FROM from_dumps UNION ALL SELECT * FROM reported
), per_rank AS (
    -- one row per lagging rank: the group it was first found stuck in (earliest front), and how many groups
    SELECT job_id, rank, count(DISTINCT pg) AS groups,
           arg_min(struct_pack(pg := pg, pg_desc := pg_desc, collective := collective, seq := seq,
                               waiting := waiting, ts := ts, path := path, line := line, found_by := found_by),
                   (ts IS NULL, ts, pg)) AS first
    FROM behind GROUP BY job_id, rank
), logged_hosts AS (
    -- a rank's host as a log names it (torchrun's ChildFailedError entry, srun's task line)
    SELECT job_id, rank, min(fields->>'host') AS host
    FROM job_incidents_reconciled
    WHERE job_id IN (SELECT unnest($jobs)) AND rank IS NOT NULL AND fields->>'host' IS NOT NULL
      AND kind NOT LIKE 'fr\_%' ESCAPE '\'
    GROUP BY job_id, rank
), att AS (
    SELECT job_id, attempt, start_ts, end_ts, list_sort(nodes) AS nodes
    FROM attempts_reconciled WHERE job_id IN (SELECT unnest($jobs))
)
SELECT p.job_id, a.attempt, p.rank,
       coalesce(h.host, CASE WHEN w.world > 0 AND len(a.nodes) > 0 AND w.world % len(a.nodes) = 0
                             THEN a.nodes[p.rank // (w.world // len(a.nodes)) + 1] END) AS host,
       CASE WHEN h.host IS NOT NULL THEN 'logged'
            WHEN w.world > 0 AND len(a.nodes) > 0 AND w.world % len(a.nodes) = 0 THEN 'allocation' END AS host_basis,
       p.first.pg, p.first.pg_desc, p.first.collective, p.first.seq, p.first.waiting, p.groups, p.first.ts,
       p.first.path, p.first.line, p.first.found_by
FROM per_rank p
LEFT JOIN logged_hosts h ON h.job_id = p.job_id AND h.rank = p.rank
LEFT JOIN (SELECT job_id, max(world) AS world FROM dumps GROUP BY job_id) w ON w.job_id = p.job_id
LEFT JOIN att a ON a.job_id = p.job_id
     AND ((p.first.ts IS NOT NULL AND p.first.ts BETWEEN a.start_ts AND coalesce(a.end_ts, TIMESTAMP '9999-12-31'))
          OR (p.first.ts IS NULL AND a.attempt = (SELECT max(attempt) FROM att x WHERE x.job_id = p.job_id)))
ORDER BY p.job_id, p.groups DESC, p.rank
