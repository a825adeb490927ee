-- Pods (_kube_items of kind Pod) -> the job each belongs to, its replica, and its main container's runs.
CREATE OR REPLACE TEMP TABLE _kube_pods AS
WITH p AS (
    SELECT line, item_no, item, item->'metadata' AS md, coalesce(item->'metadata'->'labels', '{{}}') AS lb,
           coalesce(item->'metadata'->'annotations', '{{}}') AS an,
           list_filter(CAST(coalesce(item->'metadata'->'ownerReferences', '[]') AS JSON[]),
                       lambda o: coalesce(o->>'controller', 'true') = 'true')[1] AS owner,
           CAST(coalesce(item->'status'->'conditions', '[]') AS JSON[]) AS conds
    FROM _kube_items WHERE kind = 'Pod'
), named AS (
    SELECT *, (md->>'namespace') AS ns, (md->>'name') AS pod, coalesce(md->>'uid', (md->>'name')) AS pod_uid,
        -- the job the pod belongs to, the most specific name first: a JobSet's Jobs and an MPIJob's launcher
        -- Job carry a batch job-name too
        CASE WHEN coalesce(lb->>'jobset.sigs.k8s.io/jobset-name', (an->>'jobset.sigs.k8s.io/jobset-name')) IS NOT NULL
                  THEN 'JobSet'
             WHEN (lb->>'training.kubeflow.org/job-name') IS NOT NULL
                  THEN CASE WHEN (lb->>'training.kubeflow.org/operator-name') = 'mpi-operator' THEN 'MPIJob'
                            WHEN (owner->>'kind') NOT IN ('Job', 'Pod') THEN (owner->>'kind')
                            ELSE 'TrainingJob' END
             WHEN (lb->>'pytorch-job-name') IS NOT NULL THEN 'PyTorchJob'
             WHEN (lb->>'tf-job-name') IS NOT NULL THEN 'TFJob'
             WHEN (lb->>'mpi-job-name') IS NOT NULL THEN 'MPIJob'
             WHEN (lb->>'group-name') = 'kubeflow.org' AND (lb->>'job-name') IS NOT NULL
                  THEN coalesce(owner->>'kind', 'TrainingJob')
             WHEN (lb->>'volcano.sh/job-name') IS NOT NULL THEN 'VolcanoJob'
             WHEN coalesce(lb->>'scheduling.x-k8s.io/pod-group', (lb->>'pod-group.scheduling.sigs.k8s.io'),
                           (lb->>'kueue.x-k8s.io/pod-group-name')) IS NOT NULL THEN 'PodGroup'
             WHEN coalesce(lb->>'batch.kubernetes.io/job-name', (lb->>'job-name')) IS NOT NULL
                  OR (owner->>'kind') = 'Job' THEN 'Job'
        END AS job_kind,
        coalesce(lb->>'jobset.sigs.k8s.io/jobset-name', (an->>'jobset.sigs.k8s.io/jobset-name'),
                 (lb->>'training.kubeflow.org/job-name'), (lb->>'pytorch-job-name'), (lb->>'tf-job-name'),
                 (lb->>'mpi-job-name'),
                 CASE WHEN (lb->>'group-name') = 'kubeflow.org' THEN (lb->>'job-name') END,
                 (lb->>'volcano.sh/job-name'), (lb->>'scheduling.x-k8s.io/pod-group'),
                 (lb->>'pod-group.scheduling.sigs.k8s.io'), (lb->>'kueue.x-k8s.io/pod-group-name'),
                 (lb->>'batch.kubernetes.io/job-name'), (lb->>'job-name'),
                 CASE WHEN (owner->>'kind') = 'Job' THEN (owner->>'name') END) AS job_name,
        coalesce(lb->>'batch.kubernetes.io/job-completion-index', (an->>'batch.kubernetes.io/job-completion-index'))
            AS completion_index
    FROM p
)
SELECT line, item_no, item, pod, pod_uid, job_kind, job_name,
       -- ns/name: the namespace keeps two teams' "llama-8b" apart, as a cluster keeps two Slurm job 4242 apart
       coalesce(ns, 'default') || '/' || job_name AS job_id,
       CASE job_kind
            WHEN 'JobSet' THEN concat_ws('/', coalesce(lb->>'jobset.sigs.k8s.io/replicatedjob-name',
                                                       (an->>'jobset.sigs.k8s.io/replicatedjob-name')),
                                         coalesce(lb->>'jobset.sigs.k8s.io/job-index',
                                                  (an->>'jobset.sigs.k8s.io/job-index')),
                                         coalesce(completion_index, (md->>'generateName'), pod))
            WHEN 'Job' THEN coalesce(completion_index, (md->>'generateName'), pod)
            ELSE coalesce(lower(coalesce(lb->>'training.kubeflow.org/replica-type', (lb->>'replica-type'),
                                         (lb->>'pytorch-replica-type'), (lb->>'tf-replica-type'),
                                         (lb->>'training.kubeflow.org/job-role')))
                          || '/' || coalesce(lb->>'training.kubeflow.org/replica-index', (lb->>'replica-index'),
                                             (lb->>'pytorch-replica-index'), (lb->>'tf-replica-index')),
                          pod) END AS replica,
       try_cast(coalesce(lb->>'jobset.sigs.k8s.io/restart-attempt', (an->>'jobset.sigs.k8s.io/restart-attempt'))
                AS INTEGER) AS generation,
       {short_host} AS host,
       _kube_ts(list_filter(conds, lambda c: (c->>'type') = 'PodScheduled' AND (c->>'status') = 'True')[1]
                ->>'lastTransitionTime') AS bound_ts,
       coalesce(list_filter(conds, lambda c: (c->>'type') = 'DisruptionTarget' AND (c->>'status') = 'True')[1]->>'reason',
                (item->'status'->>'reason')) AS disruption,
       coalesce(item->'spec'->'containers'->0->>'name',
                (item->'status'->'containerStatuses'->0->>'name')) AS main_container,
       list_sum(list_transform(
           json_extract_string(item, '$.spec.containers[*].resources.limits."nvidia.com/gpu"'),
           lambda g: try_cast(g AS INTEGER)))::INTEGER AS gpus,
       coalesce(lb->>'kueue.x-k8s.io/queue-name', (an->>'scheduling.volcano.sh/queue-name')) AS queue,
       CAST(coalesce(item->'status'->'containerStatuses', '[]') AS JSON[]) AS statuses
FROM named
WHERE job_name IS NOT NULL;

-- Each pod's main container: its current run (state, run = restartCount) and the one before (lastState).
CREATE OR REPLACE TEMP TABLE _kube_runs AS
WITH s AS (
    SELECT p.*, unnest(statuses) AS cs FROM _kube_pods p
), main AS (
    SELECT *, coalesce(try_cast(cs->>'restartCount' AS INTEGER), 0) AS restarts FROM s
    WHERE (cs->>'name') = main_container
), runs AS (
    SELECT *, restarts AS run, cs->'state' AS st, disruption AS pod_disruption FROM main
    WHERE (cs->'state'->'running') IS NOT NULL OR (cs->'state'->'terminated') IS NOT NULL
    UNION ALL
    SELECT *, restarts - 1, cs->'lastState', NULL FROM main
    WHERE (cs->'lastState'->'terminated') IS NOT NULL AND restarts > 0
)
SELECT job_id, job_kind AS kind, replica, generation, pod, pod_uid, main_container AS container, run::INTEGER AS run,
       host, bound_ts,
       _kube_ts(coalesce(st->'running'->>'startedAt', (st->'terminated'->>'startedAt'))) AS start_ts,
       _kube_ts(st->'terminated'->>'finishedAt') AS end_ts,
       (st->'terminated'->>'reason') AS reason, pod_disruption AS disruption,
       try_cast(st->'terminated'->>'exitCode' AS INTEGER) AS exit_code,
       try_cast(st->'terminated'->>'signal' AS INTEGER) AS signal, gpus, queue, line
FROM runs;
