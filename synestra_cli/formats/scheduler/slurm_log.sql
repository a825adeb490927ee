-- slurmctld / slurmd logs: `[2023-08-28T16:55:46.905] <message>` (local time, as the daemon's LogTimeFormat
-- iso8601_ms prints it). Each message is typed by the daemon's own wording (src/slurmctld/node_mgr.c,
-- ping_nodes.c, job_mgr.c, power_save.c); the node list it names is expanded afterwards (Slurm hostlists).
CREATE OR REPLACE TEMP TABLE _slurm AS
WITH l AS (
    SELECT lineno, line,
           regexp_extract(line, '^\[(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?)\]\s?(.*)$', ['stamp', 'msg']) AS e
    FROM _slurm_lines
), m AS (
    SELECT lineno, line, e.msg AS msg, to_utc(try_strptime(leap_second(e.stamp), ['%Y-%m-%dT%H:%M:%S.%g', '%Y-%m-%dT%H:%M:%S', '%Y-%m-%dT%H:%M:%S.%f']), $tz)
           AS ts
    FROM l
), typed AS (
    SELECT *,
        CASE
            WHEN msg ~ '^error: Nodes \S+ not responding' THEN 'slurm_node_not_responding'
            WHEN msg ~ '^Node \S+ now responding' THEN 'slurm_node_responding'
            WHEN msg ~ '^update_node: node \S+ reason set to: ' THEN 'slurm_node_reason'
            WHEN msg ~ '^(update_node|drain_nodes): node \S+ state set to \S+' THEN 'slurm_node_state'
            WHEN msg ~ '^Node \S+ rebooted \d+ secs ago' THEN 'slurm_node_reboot'
            WHEN msg ~ '^(POWER: )?power_save: (waking|suspending) nodes \S+' OR msg ~ '^powering down node \S+'
                 OR msg ~ '^POWER: Node \S+ powered up' THEN 'slurm_power_save'
            WHEN msg ~ '^Killing JobId=\S+ on failed node \S+' OR msg ~ '^requeue job JobId=\S+ due to failure of node \S+'
                THEN 'slurm_node_fail'
            ELSE 'log' END AS kind,
        coalesce(nullif(regexp_extract(msg, '^error: Nodes (\S+) not responding', 1), ''),
                 nullif(regexp_extract(msg, '^Node ([^\s/]+)', 1), ''),
                 nullif(regexp_extract(msg, '^(?:update_node|drain_nodes): node (\S+)', 1), ''),
                 nullif(regexp_extract(msg, 'power_save: (?:waking|suspending) nodes (\S+)', 1), ''),
                 nullif(regexp_extract(msg, '^powering down node (\S+)', 1), ''),
                 nullif(regexp_extract(msg, '^POWER: Node ([^\s/]+)', 1), ''),
                 nullif(regexp_extract(msg, 'failed node (\S+)', 1), ''),
                 nullif(regexp_extract(msg, 'due to failure of node (\S+)', 1), '')) AS nodelist,
        nullif(regexp_extract(msg, 'JobId=(\d+(?:_\d+)?)', 1), '') AS job
    FROM m
)
SELECT lineno, line, msg, ts, kind, nodelist, job,
       CASE WHEN trim(line) = '' THEN NULL
            WHEN ts IS NULL THEN 'not a slurmctld / slurmd `[YYYY-MM-DDTHH:MM:SS.mmm] message` line' END AS reason
FROM typed;

-- Events: typed lines once per node they name; every other line as the daemon's own `log` line.
CREATE OR REPLACE TEMP TABLE _slurm_events AS
WITH n AS (
    SELECT s.*, unnest(coalesce(x.nodes, [NULL])) AS node
    FROM _slurm s LEFT JOIN _slurm_nodes x ON x.nodelist = s.nodelist AND s.kind <> 'log'
    WHERE s.reason IS NULL AND trim(s.line) <> ''
)
SELECT ts, CASE WHEN kind = 'log' OR node IS NULL THEN $host ELSE node END AS host, NULL::VARCHAR AS component, kind,
       NULL::INTEGER AS code,
       CASE WHEN msg ~ '^(fatal|FATAL)' THEN 'crit' WHEN msg ~ '^error:' OR kind = 'slurm_node_fail' THEN 'err'
            WHEN kind IN ('slurm_node_not_responding', 'slurm_node_reason') THEN 'warning' ELSE 'info' END AS severity,
       msg AS message,
       CASE kind
           WHEN 'log' THEN json_object('tag', 'slurm')
           WHEN 'slurm_node_not_responding' THEN json_object('set_down', contains(msg, 'setting DOWN'))
           WHEN 'slurm_node_reason' THEN json_object('reason', regexp_extract(msg, 'reason set to: (.*)$', 1))
           WHEN 'slurm_node_state' THEN json_object('state', regexp_extract(msg, 'state set to (\S+)', 1))
           WHEN 'slurm_node_reboot' THEN json_object('uptime_s', TRY_CAST(regexp_extract(msg, 'rebooted (\d+) secs', 1) AS INTEGER))
           WHEN 'slurm_power_save' THEN json_object('action',
                CASE WHEN contains(msg, 'waking') THEN 'resume' WHEN contains(msg, 'suspending') THEN 'suspend'
                     WHEN contains(msg, 'powered up') THEN 'powered_up' ELSE 'power_down' END)
           WHEN 'slurm_node_fail' THEN json_object('job', job)
           ELSE json_object() END AS fields,
       lineno AS line
FROM n;

-- The jobs' side: a requeue (and the node whose failure caused it), a node failure that killed a job, how the
-- batch script ended. `requeue job JobId=N due to failure of node X` is followed by `Requeuing JobId=N` at
-- the same instant: one requeue.
CREATE OR REPLACE TEMP TABLE _slurm_incidents AS
WITH j AS (
    SELECT *, CASE WHEN msg ~ '^requeue job JobId=\S+ due to failure of node' THEN 'requeue'
                   WHEN msg ~ '^_job_complete: requeue JobId=' THEN 'requeue'
                   WHEN msg ~ '^Requeuing JobId=' THEN 'requeue'
                   WHEN msg ~ '^Killing JobId=\S+ on failed node' THEN 'node_fail'
                   WHEN msg ~ '^_job_complete: JobId=\S+ (WEXITSTATUS|WTERMSIG|OOM)' THEN 'slurm_job_complete'
              END AS ikind
    FROM _slurm WHERE reason IS NULL AND job IS NOT NULL
), kept AS (
    SELECT * FROM j WHERE ikind IS NOT NULL
    QUALIFY ikind <> 'requeue' OR row_number() OVER (PARTITION BY job, ts, ikind ORDER BY (nodelist IS NULL), lineno) = 1
)
SELECT job, ts, ikind AS kind, msg, lineno,
       json_object('source', 'slurmctld', 'host', nodelist,
                   'reason', CASE WHEN msg ~ 'failure of node|node failure' THEN 'node failure' END,
                   'exit_status', TRY_CAST(regexp_extract(msg, 'WEXITSTATUS (\d+)', 1) AS INTEGER),
                   'signal', TRY_CAST(regexp_extract(msg, 'WTERMSIG (\d+)', 1) AS INTEGER),
                   'oom', contains(msg, 'OOM failure')) AS fields
FROM kept;
