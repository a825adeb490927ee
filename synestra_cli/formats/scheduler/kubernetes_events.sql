-- Events (core/v1 and events.k8s.io/v1) and node conditions (_kube_items) -> the events table.
-- `kind` types what explain reads as a cause (signals/thresholds.py EVENT_RULES); every other event is
-- kept as `k8s_event` (a log line: nothing read is dropped).
CREATE OR REPLACE TEMP TABLE _kube_events AS
WITH e AS (
    SELECT line, item_no, item, coalesce(item->'involvedObject', item->'regarding') AS obj,
           (item->>'reason') AS reason, coalesce(item->>'message', (item->>'note')) AS message,
           coalesce(item->'source'->>'component', (item->>'reportingComponent'), (item->>'reportingController'),
                    (item->'deprecatedSource'->>'component')) AS via,
           coalesce(nullif(item->'source'->>'host', ''), nullif(item->'deprecatedSource'->>'host', ''),
                    CASE WHEN (item->>'reportingController') = 'kubelet'
                              OR (item->>'reportingComponent') = 'kubelet'
                         THEN nullif(item->>'reportingInstance', '') END) AS src_host,
           -- an aggregated event (count > 1) spans its first to its last occurrence: the first is the onset
           coalesce(_kube_ts(item->>'eventTime'), _kube_ts(item->>'firstTimestamp'),
                    _kube_ts(item->>'deprecatedFirstTimestamp'), _kube_ts(item->>'lastTimestamp'),
                    _kube_ts(item->'series'->>'lastObservedTime'),
                    _kube_ts(item->'metadata'->>'creationTimestamp')) AS first_ts,
           coalesce(_kube_ts(item->'series'->>'lastObservedTime'), _kube_ts(item->>'lastTimestamp'),
                    _kube_ts(item->>'deprecatedLastTimestamp'), _kube_ts(item->>'eventTime')) AS last_ts,
           coalesce(try_cast(item->'series'->>'count' AS INTEGER), try_cast(item->>'count' AS INTEGER),
                    try_cast(item->>'deprecatedCount' AS INTEGER), 1) AS n
    FROM _kube_items WHERE kind = 'Event'
), placed AS (
    SELECT *,
           CASE WHEN (obj->>'kind') = 'Node' THEN (obj->>'name')
                ELSE coalesce(src_host, nullif(regexp_extract(message, ' on node (\S+?)\.?$', 1), ''),
                              nullif(regexp_extract(message, '^Successfully assigned \S+ to (\S+)$', 1), ''))
           END AS node
    FROM e
)
SELECT first_ts AS ts, {short_host_node} AS host, NULL::VARCHAR AS component,
       {event_kind} AS kind,
       try_cast(regexp_extract(reason, '^NvidiaXID(\d+)(?:Error|Warning)$', 1) AS INTEGER) AS code,
       CASE (item->>'type') WHEN 'Warning' THEN 'warning' WHEN 'Normal' THEN 'info' END AS severity,
       concat_ws(' ', reason, (obj->>'kind') || '/' || (obj->>'name') || ':', message) AS message,
       json_object('reason', reason, 'type', (item->>'type'), 'count', n, 'last_ts', last_ts,
                   'object_kind', (obj->>'kind'), 'object', (obj->>'name'), 'namespace', (obj->>'namespace'),
                   'field_path', (obj->>'fieldPath'), 'source', via, 'node', node) AS fields,
       line, item_no
FROM placed WHERE first_ts IS NOT NULL
UNION ALL
-- A node's conditions: each as of its last transition (a problem condition then began). Healthy ones are
-- kept untyped, as `k8s_condition`.
SELECT _kube_ts(c->>'lastTransitionTime'), {short_host_cond}, NULL,
       {condition_kind},
       try_cast(regexp_extract(c->>'reason', '^NvidiaXID(\d+)(?:Error|Warning)$', 1) AS INTEGER),
       CASE WHEN {condition_kind} <> 'k8s_condition' THEN 'warning' ELSE 'info' END,
       concat_ws(' ', 'node condition', (c->>'type'), (c->>'status') || ':', (c->>'reason') || ':', (c->>'message')),
       json_object('condition', (c->>'type'), 'status', (c->>'status'), 'reason', (c->>'reason'),
                   'heartbeat', _kube_ts(c->>'lastHeartbeatTime'), 'node', (item->'metadata'->>'name')),
       line, item_no
FROM (SELECT line, item_no, item, unnest(CAST(coalesce(item->'status'->'conditions', '[]') AS JSON[])) AS c
      FROM _kube_items WHERE kind = 'Node')
WHERE _kube_ts(c->>'lastTransitionTime') IS NOT NULL;

-- The job objects themselves (a PyTorchJob's, JobSet's, Job's status): the job's name and state.
CREATE OR REPLACE TEMP TABLE _kube_jobs AS
WITH j AS (
    SELECT line, item, kind, coalesce(item->'metadata'->>'namespace', 'default') || '/' || (item->'metadata'->>'name')
               AS job_id, (item->'metadata'->>'name') AS name,
           list_filter(CAST(coalesce(item->'status'->'conditions', '[]') AS JSON[]),
                       lambda c: (c->>'status') = 'True') AS true_conds
    FROM _kube_items
    WHERE kind IN ({job_kinds}) AND (item->'metadata'->>'name') IS NOT NULL
)
SELECT job_id, name, kind, line,
       -- the job's state, in sacct's words, from its last condition that holds
       CASE list_reverse(list_transform(true_conds, lambda c: (c->>'type')))[1]
            WHEN 'Succeeded' THEN 'COMPLETED' WHEN 'Complete' THEN 'COMPLETED' WHEN 'Completed' THEN 'COMPLETED'
            WHEN 'Failed' THEN 'FAILED' WHEN 'Running' THEN 'RUNNING' WHEN 'Restarting' THEN 'RUNNING'
            WHEN 'Suspended' THEN 'PENDING' WHEN 'Created' THEN 'PENDING' WHEN 'StartupPolicyInProgress' THEN 'RUNNING'
       END AS state
FROM j;
