-- One rank's Flight Recorder dump: per process group (by its global name, not the rank-local pg_id), the
-- last collective the rank enqueued there (p2p ops have their own sequence and are left out).
CREATE OR REPLACE TEMP TABLE _fr_last AS
SELECT process_group[1] AS pg, arg_max(process_group[2], collective_seq_id) AS pg_desc,
       max(collective_seq_id) AS seq,
       arg_max(profiling_name, collective_seq_id) AS collective,
       arg_max(state, collective_seq_id) AS state,
       arg_max(time_created_ns, collective_seq_id) AS created_ns,
       arg_max(timeout_ms, collective_seq_id) AS timeout_ms,
       arg_max(record_id, collective_seq_id) AS record_id,
       max(collective_seq_id) FILTER (WHERE state = 'completed') AS last_completed
FROM fr_entries WHERE NOT coalesce(is_p2p, false) AND collective_seq_id IS NOT NULL AND process_group[1] IS NOT NULL
GROUP BY process_group[1];

INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT $job, NULL, make_timestamp(l.created_ns // 1000), NULL, 'exact', 'fr_last_collective', $rank, l.collective,
       l.seq, l.timeout_ms, NULL,
       'flight recorder: rank ' || $rank::VARCHAR || ' last enqueued ' || coalesce(l.collective, '?') || ' #'
           || l.seq::VARCHAR || ' (' || coalesce(l.state, '?') || ') in process group ' || l.pg
           || coalesce(' ' || l.pg_desc, ''),
       json_object('pg', l.pg, 'pg_desc', l.pg_desc, 'state', l.state, 'last_completed', l.last_completed,
                   'record_id', l.record_id,
                   'members', (SELECT list_transform(string_split(trim(g.ranks, '[] '), ','), lambda r: trim(r)::INTEGER)
                               FROM fr_groups g WHERE g.name = l.pg AND trim(g.ranks, '[] ') <> '')),
       $sid, NULL
FROM _fr_last l ORDER BY l.pg;

-- The dump itself: that this rank was heard from (an empty dump is a rank that recorded nothing), the world
-- it belongs to (the default group's members), and how much it holds.
INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, timeout_ms,
                           ran_for_ms, message, fields, source_id, line)
SELECT $job, NULL, (SELECT make_timestamp(max(time_created_ns) // 1000) FROM fr_entries), NULL,
       CASE WHEN (SELECT count(*) FROM fr_entries) > 0 THEN 'exact' ELSE 'none' END, 'fr_dump', $rank, NULL, NULL,
       NULL, NULL,
       'flight recorder dump of rank ' || $rank::VARCHAR || ': ' || (SELECT count(*) FROM fr_entries)::VARCHAR
           || ' entries (version ' || $version || ')',
       json_object('entries', (SELECT count(*) FROM fr_entries), 'version', $version,
                   'world_size', (SELECT max(len(string_split(trim(ranks, '[] '), ','))) FROM fr_groups
                                  WHERE trim(ranks, '[] ') <> ''),
                   'groups', (SELECT count(*) FROM fr_groups), 'file', $display),
       $sid, NULL;
