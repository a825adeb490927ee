-- The attempts of Kubernetes jobs, from container runs (kube_runs rows of {runs}).
-- A run is one start of a pod's main container: its current state (run = restartCount) or its
-- lastState (restartCount - 1). The same run seen in several files or watch snapshots is read once:
-- a terminated reading beats a running one, then the latest file.
WITH r AS (
    SELECT * FROM {runs}
    QUALIFY row_number() OVER (PARTITION BY job_id, pod_uid, container, run
                               ORDER BY end_ts IS NULL, source_id DESC, line DESC) = 1
), pods AS (
    -- a replica (master-0, worker-3, a JobSet index) may be several pods in turn: recreated after a
    -- preemption, a node failure or a JobSet restart; each pod's runs follow the earlier pods' runs
    SELECT job_id, replica, pod_uid, min(generation) AS generation,
           min(coalesce(bound_ts, start_ts)) AS first_ts, max(run) + 1 AS runs, min(run) AS first_run
    FROM r GROUP BY ALL
), ordered AS (
    SELECT *, coalesce(sum(runs) OVER (PARTITION BY job_id, replica
                                       ORDER BY coalesce(generation, 0), first_ts, pod_uid
                                       ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
    FROM pods
), numbered AS (
    -- attempt k of the job is the k-th run of each replica; a JobSet restart-attempt g is at least attempt
    -- g + 1 even when the earlier generations' pods are gone from the snapshot
    SELECT r.*, greatest(o.before + r.run, coalesce(r.generation, 0)) + 1 AS attempt,
           -- the first run of a pod began when the scheduler bound it: the wait before is the queue's
           CASE WHEN r.run = o.first_run AND r.run = 0 THEN coalesce(r.bound_ts, r.start_ts) ELSE r.start_ts END
               AS began,
           CASE WHEN r.end_ts IS NULL THEN 'RUNNING'
                WHEN r.disruption IN ('Preempted', 'PreemptionByScheduler', 'PreemptionByKubeScheduler',
                                      'Evicted', 'EvictionByEvictionAPI', 'TerminationByKubelet')
                    THEN 'PREEMPTED'
                WHEN r.disruption IN ('DeletionByTaintManager', 'NodeLost', 'NodeAffinity', 'Terminated')
                    THEN 'NODE_FAIL'
                WHEN r.disruption = 'DeadlineExceeded' THEN 'TIMEOUT'
                WHEN r.reason = 'OOMKilled' THEN 'OUT_OF_MEMORY'
                WHEN r.exit_code = 0 THEN 'COMPLETED'
                ELSE 'FAILED' END AS run_state
    FROM r JOIN ordered o USING (job_id, replica, pod_uid)
), coded AS (
    SELECT *,
           -- sacct's "code:signal": a container killed by signal N exits 128 + N
           CASE WHEN run_state = 'PREEMPTED' THEN '0:15'
                WHEN run_state = 'RUNNING' THEN NULL
                WHEN coalesce(signal, 0) > 0 THEN '0:' || signal
                WHEN exit_code > 128 AND exit_code < 160 THEN '0:' || (exit_code - 128)
                ELSE coalesce(exit_code, 0) || ':0' END AS code
    FROM numbered
)
SELECT job_id, attempt::INTEGER AS attempt, min(began) AS start_ts,
       CASE WHEN bool_or(end_ts IS NULL) THEN NULL ELSE max(end_ts) END AS end_ts,
       -- the attempt ended as its first run to end abnormally did (the others were stopped after it)
       coalesce(arg_min(run_state, end_ts) FILTER (WHERE run_state NOT IN ('COMPLETED', 'RUNNING')),
                CASE WHEN bool_or(end_ts IS NULL) THEN 'RUNNING' ELSE 'COMPLETED' END) AS state,
       coalesce(arg_min(code, end_ts) FILTER (WHERE run_state NOT IN ('COMPLETED', 'RUNNING')),
                CASE WHEN bool_or(end_ts IS NULL) THEN NULL ELSE '0:0' END) AS exit_code,
       CASE WHEN count(host) > 0 THEN list_sort(list(DISTINCT host) FILTER (WHERE host IS NOT NULL)) END AS nodes,
       max(source_id)::INTEGER AS source_id
FROM coded GROUP BY job_id, attempt
