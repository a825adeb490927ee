"""Kubernetes objects and events as kubectl prints them: jobs, their attempts and nodes, node conditions.

One format for what `kubectl get pods,pytorchjobs,jobsets,nodes,events -o json` (or `-o yaml`, `-w -o json`,
`cluster-info dump`) prints, any mix of kinds in one file (kube_docs.py reads the documents):

- Pods -> `kube_runs`: each start of a pod's main container (its state and lastState) with its node,
  times, exit code, signal and reason, and why the pod was stopped (DisruptionTarget, status.reason); the
  job it belongs to from the labels of the Training Operator (`training.kubeflow.org/job-name`, the older
  `pytorch-job-name` / `job-name` + `group-name: kubeflow.org`), JobSet (`jobset.sigs.k8s.io/jobset-name`,
  its restart-attempt), Volcano, pod groups, Kueue, or a batch Job. Job ids are `namespace/name`.
  Attempts are numbered over every Kubernetes file of the store (store/kube_views.py); this file's own
  reading goes to `attempts`, `jobs` and `job_nodes` as sacct's does.
- Events -> `events`: core/v1 (`firstTimestamp`, `lastTimestamp`, `count`) and events.k8s.io/v1
  (`eventTime`, `series`, `deprecated*`), typed where they name a node's fault (NodeNotReady, the
  node-problem-detector's KernelOops / OOMKilling / ..., a GPU health plugin's Xid), else `k8s_event`.
- Nodes -> `events`: each condition as of its last transition (`node_not_ready`, `node_problem`, `xid`...).
- PyTorchJob, JobSet, Job, MPIJob... objects -> `jobs`: the job's state from its conditions.
"""

from __future__ import annotations

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.hosts import record_full_names_sql, short_host_sql
from synestra_cli.formats.scheduler.kube_docs import ITEMS_SQL, read_documents
from synestra_cli.formats.scheduler.kube_sniff import sniff
from synestra_cli.store.kube_views import attempts_query
from synestra_cli.store.sql import drop_temp, registered, scalar, sql_file

# Kubernetes times: RFC 3339 (`2024-11-17T10:19:41Z`), MicroTime (`...41.000000Z`); Go's zero time is unset.
TS_MACRO = """CREATE OR REPLACE TEMP MACRO _kube_ts(t) AS
CASE WHEN t IS NULL OR starts_with(t, '0001-01-01') THEN NULL
     ELSE try_cast(try_cast(leap_second(t) AS TIMESTAMPTZ) AS TIMESTAMP) END"""

JOB_KINDS = ("PyTorchJob", "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "TrainJob", "JobSet", "Job")
# The node-problem-detector's reasons for a kernel or node fault (config/kernel-monitor.json,
# readonly-monitor.json) and the conditions it and the EKS node monitoring agent set; TaskHung stays a
# log (a task blocked on a slow filesystem is the filesystem's symptom, not the node's fault).
NPD_REASONS = (
    "KernelOops",
    "Ext4Error",
    "IOError",
    "XfsHasShutdown",
    "MemoryReadError",
    "DockerHung",
    "CperHardwareErrorFatal",
    "CperHardwareErrorRecoverable",
    "FilesystemIsReadOnly",
    "KernelHasDeadlock",
)
PROBLEM_CONDITIONS = (
    "KernelDeadlock",
    "ReadonlyFilesystem",
    "XfsShutdown",
    "CperHardwareErrorFatal",
    "CorruptDockerOverlay2",
    "FrequentKubeletRestart",
    "FrequentDockerRestart",
    "FrequentContainerdRestart",
    "FrequentUnregisterNetDevice",
)
UNREADY_CONDITIONS = ("KernelReady", "StorageReady", "NetworkingReady", "ContainerRuntimeReady")


def _in(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _gpu_kind(reason: str) -> str:
    """WHEN clauses: a GPU health plugin's reason (the EKS node monitoring agent's NvidiaXID<code>Error...) as an
    event kind (`reason` is an SQL expression of this module, never user text)."""
    return (
        f"WHEN regexp_matches({reason}, '^NvidiaXID\\d+(?:Error|Warning)$') THEN 'xid' "
        f"WHEN {reason} = 'NvidiaDoubleBitError' THEN 'gpu_dbe' WHEN {reason} = 'NvidiaNVLinkError' THEN 'gpu_nvlink' "
    )


EVENT_KIND = (
    "CASE WHEN reason = 'NodeNotReady' AND (obj->>'kind') = 'Node' THEN 'node_not_ready' "
    "WHEN reason = 'OOMKilling' THEN 'oom_kill' "
    f"WHEN reason IN ({_in(NPD_REASONS)}) THEN 'node_problem' " + _gpu_kind("reason") + "ELSE 'k8s_event' END"
)
CONDITION_KIND = (
    "CASE WHEN (c->>'type') = 'Ready' AND (c->>'status') <> 'True' THEN 'node_not_ready' "
    f"WHEN (c->>'status') = 'True' AND (c->>'type') IN ({_in(PROBLEM_CONDITIONS)}) THEN 'node_problem' "
    f"WHEN (c->>'status') = 'False' AND (c->>'type') IN ({_in(UNREADY_CONDITIONS)}) THEN 'node_problem' "
    "WHEN (c->>'type') = 'AcceleratedHardwareReady' AND (c->>'status') <> 'True' THEN "
    + "CASE "
    + _gpu_kind("(c->>'reason')")
    + "ELSE 'node_problem' END ELSE 'k8s_condition' END"
)

PODS_SQL = sql_file(__package__, "kubernetes_pods.sql").format(short_host=short_host_sql("(item->'spec'->>'nodeName')"))
EVENTS_SQL = sql_file(__package__, "kubernetes_events.sql").format(
    short_host_node=short_host_sql("node"),
    short_host_cond=short_host_sql("(item->'metadata'->>'name')"),
    event_kind=EVENT_KIND,
    condition_kind=CONDITION_KIND,
    job_kinds=_in(JOB_KINDS),
)

INSERT_RUNS_SQL = """
INSERT INTO kube_runs (job_id, kind, replica, generation, pod, pod_uid, container, run, host, bound_ts, start_ts,
                       end_ts, reason, disruption, exit_code, signal, gpus, queue, source_id, line)
SELECT job_id, kind, replica, generation, pod, pod_uid, container, run, host, bound_ts, start_ts, end_ts, reason,
       disruption, exit_code, signal, gpus, queue, $sid, line
FROM _kube_runs ORDER BY host, job_id, start_ts
"""
INSERT_EVENTS_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
SELECT ts, host, component, kind, code, severity, message, fields, $sid, line FROM _kube_events
ORDER BY host, ts, line, item_no
"""
INSERT_ATTEMPTS_SQL = f"""
INSERT INTO attempts (job_id, attempt, start_ts, end_ts, state, exit_code, nodes, source_id)
SELECT job_id, attempt, start_ts, end_ts, state, exit_code, nodes, $sid
FROM ({attempts_query("(SELECT * FROM kube_runs WHERE source_id = $sid)")}) ORDER BY job_id, attempt
"""
INSERT_JOB_NODES_SQL = """
INSERT INTO job_nodes (job_id, attempt, host, source_id)
SELECT job_id, attempt, unnest(nodes), $sid FROM attempts WHERE source_id = $sid AND nodes IS NOT NULL
ORDER BY job_id, attempt
"""
# A job's row: its objects' state when the file holds them, its pods' GPUs (one pod per replica, the latest).
INSERT_JOBS_SQL = """
INSERT INTO jobs (job_id, name, gpus, state, source_id)
WITH pods AS (
    SELECT job_id, any_value(job_name) AS name,
           sum(gpus) FILTER (WHERE latest)::INTEGER AS gpus
    FROM (SELECT job_id, job_name, gpus,
                 row_number() OVER (PARTITION BY job_id, replica ORDER BY generation DESC NULLS LAST,
                                    line DESC, item_no DESC) = 1 AS latest
          FROM _kube_pods) GROUP BY job_id
), objs AS (SELECT job_id, any_value(name) AS name, arg_max(state, line) AS state FROM _kube_jobs GROUP BY job_id),
att AS (SELECT job_id, arg_max(state, attempt) AS state FROM attempts WHERE source_id = $sid GROUP BY job_id)
SELECT job_id, coalesce(o.name, p.name), p.gpus, coalesce(o.state, att.state), $sid
FROM pods p FULL JOIN objs o USING (job_id) LEFT JOIN att USING (job_id) ORDER BY job_id
"""
FULL_NAMES_SQL = record_full_names_sql(
    "(SELECT (item->'spec'->>'nodeName') AS n FROM _kube_items WHERE kind = 'Pod' UNION ALL "
    "SELECT (item->'metadata'->>'name') FROM _kube_items WHERE kind = 'Node')",
    "n",
)
COUNT_SQL = """
SELECT (SELECT count(*) FROM kube_runs WHERE source_id = $sid) + (SELECT count(*) FROM events WHERE source_id = $sid)
     + (SELECT count(*) FROM jobs WHERE source_id = $sid) + (SELECT count(*) FROM attempts WHERE source_id = $sid)
     + (SELECT count(*) FROM job_nodes WHERE source_id = $sid)
"""
OTHER_KINDS_SQL = f"""
SELECT coalesce(kind, '(no kind)'), count(*) FROM _kube_items
WHERE coalesce(kind, '') NOT IN ('Pod', 'Event', 'Node', {_in(JOB_KINDS)}) GROUP BY ALL ORDER BY 2 DESC, 1
"""
NON_JOB_PODS_SQL = "SELECT (SELECT count(*) FROM _kube_items WHERE kind = 'Pod') - (SELECT count(*) FROM _kube_pods)"
TEMP_TABLES = ("_kube_items", "_kube_pods", "_kube_runs", "_kube_events", "_kube_jobs")


def _notes(ctx: LoadContext, result: LoadResult) -> None:
    others = ctx.conn.execute(OTHER_KINDS_SQL).fetchall()
    if others:
        listed = ", ".join(f"{n} {kind}" for kind, n in others[:6])
        result.notes.append(f"{ctx.display}: objects of no job, event or node kept out: {listed}")
    idle = scalar(ctx.conn, NON_JOB_PODS_SQL)
    if idle:
        result.notes.append(f"{ctx.display}: {idle} pod(s) of no training job or batch Job (no job label): not jobs")


def load(ctx: LoadContext) -> LoadResult:
    text = ctx.read_text()
    docs = read_documents(text, ctx.display)
    result = LoadResult()
    if docs.rest_line is not None:
        lines = docs.rest.count("\n") + 1
        result.reject(docs.rest_line, "text after the last JSON document (not kubectl output)", docs.rest[:200])
        result.rejected += lines - 1
    conn, sid = ctx.conn, {"sid": ctx.source_id}
    conn.execute(TS_MACRO)
    with registered(conn, "kube_docs_arrow", docs.table()):
        conn.execute(ITEMS_SQL)
    conn.execute(PODS_SQL)
    conn.execute(EVENTS_SQL)
    for sql in (INSERT_RUNS_SQL, INSERT_EVENTS_SQL, INSERT_ATTEMPTS_SQL, INSERT_JOB_NODES_SQL, INSERT_JOBS_SQL):
        conn.execute(sql, sid)
    conn.execute(FULL_NAMES_SQL, sid)
    _notes(ctx, result)
    result.rows = scalar(conn, COUNT_SQL, sid)
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "kubernetes",
    "kubectl get pods/pytorchjobs/jobsets/nodes/events -o json|yaml, -w, cluster-info dump (jobs, attempts, "
    "node conditions, events)",
    sniff,
    load,
    writes=frozenset({"kube_runs", "events", "attempts", "jobs", "job_nodes", "host_names"}),
    top=0.95,
    priority=0,
)
