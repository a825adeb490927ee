-- Migration 022_kubernetes: Kubernetes as a scheduler beside Slurm (formats/scheduler/kubernetes.py).
CREATE TABLE kube_runs (
    job_id     VARCHAR NOT NULL,  -- namespace/name of the PyTorchJob, JobSet, Job, MPIJob... (CLUSTER:ns/name)
    kind       VARCHAR,           -- what the name names: PyTorchJob | JobSet | Job | MPIJob | PodGroup | ...
    replica    VARCHAR,           -- master/0, worker/3, a JobSet's rjob/index/completion index, a Job's index
    generation INTEGER,           -- JobSet restart-attempt; NULL elsewhere
    pod        VARCHAR,
    pod_uid    VARCHAR,           -- the pod's uid (its name when the object has none)
    container  VARCHAR,           -- the pod's main container (the first in spec.containers)
    run        INTEGER NOT NULL,  -- 0-based start of that container: restartCount (state), - 1 (lastState)
    host       VARCHAR,           -- spec.nodeName, short
    bound_ts   TIMESTAMP,         -- PodScheduled: when the scheduler bound the pod to its node
    start_ts   TIMESTAMP,         -- the run's startedAt
    end_ts     TIMESTAMP,         -- its finishedAt; NULL while it runs
    reason     VARCHAR,           -- terminated reason: Completed | Error | OOMKilled | ContainerCannotRun ...
    disruption VARCHAR,           -- why the pod itself was stopped (its last run only): DisruptionTarget's
                                  -- reason (PreemptionByScheduler, DeletionByTaintManager, ...) or status.reason
    exit_code  INTEGER,
    signal     INTEGER,
    gpus       INTEGER,           -- nvidia.com/gpu limits of the pod's containers
    queue      VARCHAR,           -- Kueue's queue-name label, Volcano's queue
    source_id  INTEGER NOT NULL,
    line       BIGINT             -- the line its object (or the List holding it) begins on
);

CREATE VIEW kube_attempts AS
{attempts};

CREATE OR REPLACE VIEW sacct_attempts AS
WITH a AS (
    SELECT a.*, max(a.source_id) OVER (PARTITION BY a.job_id) AS latest
    FROM attempts a JOIN sources s USING (source_id) WHERE s.format = 'sacct'
)
SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes, source_id FROM a WHERE source_id = latest
UNION ALL
SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes, source_id FROM kube_attempts;

CREATE OR REPLACE VIEW log_attempts AS
SELECT a.job_id, a.source_id, a.attempt AS log_attempt, a.start_ts, a.end_ts,
       count(*) OVER (PARTITION BY a.job_id, a.source_id) AS n_log
FROM attempts a JOIN sources s USING (source_id) WHERE NOT list_contains({schedulers}, s.format);

CREATE OR REPLACE VIEW jobs_reconciled AS
WITH j AS (
    SELECT j.*, list_contains({schedulers}, s.format) AS from_sacct FROM jobs j JOIN sources s USING (source_id)
), n AS (
    SELECT jn.job_id,
           list_sort(list(DISTINCT jn.host) FILTER (WHERE list_contains({schedulers}, s.format))) AS sacct_nodes,
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
