"""Slurm's own lines inside a job's log: how an attempt ended, as slurmstepd and srun say it.

Wording from Slurm's source (src/slurmd/slurmstepd/req.c, src/srun/launch.c, src/srun/allocate.c):
  slurmstepd: error: *** JOB 4242 ON gpu-001 CANCELLED AT 2025-03-01T10:40:00 DUE TO PREEMPTION ***
      (also DUE TO TIME LIMIT, DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS, DUE TO JOB REQUEUE,
       DUE TO TASK FAILURE, `DUE to SIGNAL Terminated`, or no reason: a plain scancel; `STEP 4242.0`
       for a job step; newer daemons write `slurmstepd-<node>: error:`)
  slurmstepd: error: *** JOB 4242 ON gpu-001 FAILED (non-zero exit code or other failure mode) ***
  srun: error: Node failure on gpu-003                (salloc: error: ... in an interactive allocation)
  srun: error: gpu-003: task 12: Terminated          (a signal's strsignal(), `Killed`, `Aborted` ...)
  srun: error: gpu-003: tasks 8-15: Exited with exit code 1
  srun: error: Orion-01-01: task 4: Out Of Memory
  slurmstepd: error: Detected 1 oom-kill event(s) in StepId=191.batch cgroup.
These lines are evidence of how the attempt ended, not its cause (docs/explain.md): only a PREEMPTION
line is a `sigterm` (the scheduler took the nodes back); every other cancel or failure line is a
`job_end` incident whose `ended_by` says what Slurm saw (node_failure, requeue, task_failure, time_limit,
signal, cancelled, failed), and srun's task reports are `task_exit` incidents naming the node and task.
What failed on that node is found by the other signals. The job id in a slurmstepd line names the job
of a log that says nothing else (formats/training/joblog.py JOB_ID_SQL).
"""

from __future__ import annotations

from synestra_cli.formats.hosts import short_host_sql

# `*** JOB 4242 ON gpu-001 CANCELLED AT <iso>[ DUE TO|to <reason>] ***` or `... FAILED (...) ***`.
# Slurm 14 and older: `*** JOB 6398 CANCELLED AT 2015-09-04T16:40:47 *** on a1a-u2-c10-b1` (the node after).
STEPD_RE = (
    r"\*\*\* (JOB|STEP) (\d+)(?:\.(\w+))? (?:ON (\S+) )?"
    r"(?:CANCELLED AT \S+(?: DUE [Tt][Oo] (.+?))?|(FAILED) \(non-zero exit code or other failure mode\)) \*\*\*"
    r"(?: on (\S+))?"
)
NODE = "nullif(coalesce(nullif(m.node, ''), m.after), '')"
ENDED_BY = """CASE WHEN m.failed <> '' THEN 'failed'
    WHEN m.reason = '' THEN 'cancelled'
    WHEN starts_with(m.reason, 'PREEMPTION') THEN 'preemption'
    WHEN starts_with(m.reason, 'NODE FAILURE') THEN 'node_failure'
    WHEN starts_with(m.reason, 'JOB REQUEUE') THEN 'requeue'
    WHEN starts_with(m.reason, 'TASK FAILURE') THEN 'task_failure'
    WHEN starts_with(m.reason, 'TIME LIMIT') THEN 'time_limit'
    WHEN starts_with(m.reason, 'SIGNAL') THEN 'signal'
    ELSE lower(m.reason) END"""

STEPD_SQL = rf"""
WITH s AS (
    SELECT *, regexp_extract(body, '{STEPD_RE}', ['what', 'job', 'step', 'node', 'reason', 'failed', 'after']) AS m
    FROM jl_lines
    WHERE contains(body, '*** ') AND (contains(body, ' CANCELLED AT ') OR contains(body, ' FAILED (non-zero'))
), e AS (
    SELECT *, {ENDED_BY} AS ended_by FROM s WHERE m.job <> ''
)
SELECT sid, pos, lineno, 'incident' AS fact, CASE WHEN ended_by = 'preemption' THEN 'sigterm' ELSE 'job_end' END
        AS kind, ts, ts_precision, rank, trim(body) AS message,
    -- the node is where the reporting slurmstepd runs (the batch host for JOB), not the node that failed
    json_object('source', 'slurm', 'node', {short_host_sql(NODE)}, 'reason', nullif(m.reason, ''),
                'ended_by', ended_by, 'job_id', m.job, 'step', nullif(m.step, ''),
                'entity', lower(m.what)) AS fields
FROM e
"""

# strsignal()'s words, as srun prints a task's end, for the signals a worker dies of.
SIGNAL_OF_TEXT = """CASE split_part(m.what, ' (', 1) WHEN 'Terminated' THEN 'SIGTERM' WHEN 'Killed' THEN 'SIGKILL'
    WHEN 'Aborted' THEN 'SIGABRT' WHEN 'Segmentation fault' THEN 'SIGSEGV' WHEN 'Bus error' THEN 'SIGBUS'
    WHEN 'Interrupt' THEN 'SIGINT' END"""

# srun's reports: a node the controller declared failed, and each task's end as srun saw it.
SRUN_SQL = rf"""
SELECT sid, pos, lineno, 'incident' AS fact, 'job_end' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'srun', 'host', {short_host_sql("m")}, 'ended_by', 'node_failure') AS fields
FROM (SELECT *, regexp_extract(body, '(?:srun|salloc): error: Node failure on (\S+)', 1) AS m
      FROM jl_lines WHERE contains(body, ': error: Node failure on '))
WHERE m <> ''
UNION ALL BY NAME
SELECT sid, pos, lineno, 'incident' AS fact, 'task_exit' AS kind, ts, ts_precision,
    TRY_CAST(m.task AS INTEGER) AS rank, trim(body) AS message,
    json_object('source', 'srun', 'host', {short_host_sql("m.host")}, 'task', TRY_CAST(m.task AS INTEGER),
                'tasks', m.tasks, 'exitcode', TRY_CAST(nullif(m.code, '') AS INTEGER),
                'signal', {SIGNAL_OF_TEXT},
                'signal_text', CASE WHEN m.code = '' THEN m.what END, 'ended_by', 'task_exit') AS fields
FROM (SELECT *, regexp_extract(body, 'srun: error: (\S+): tasks? ((\d+)[-,\d]*): '
                                     '(Exited with exit code (\d+)|[A-Z][a-z]+(?: [a-z]+)*(?: \(core dumped\))?)\s*$',
                               ['host', 'tasks', 'task', 'what', 'code']) AS m
      FROM jl_lines WHERE contains(body, 'srun: error: ') AND contains(body, ': task'))
WHERE m.task <> '' AND m.what <> 'Out Of Memory'
"""

OOM_SQL = rf"""
SELECT sid, pos, lineno, 'incident' AS fact, 'oom' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'slurm', 'oom_kill_events', TRY_CAST(nullif(m.n, '') AS INTEGER),
                'job_id', nullif(m.job, ''), 'step', nullif(m.step, '')) AS fields
FROM (SELECT *, regexp_extract(body, 'Detected (\d+) oom.kill events?(?:\(s\))? in (?:StepId=|step )(\d+)(?:\.(\w+))?',
                               ['n', 'job', 'step']) AS m
      FROM jl_lines WHERE contains(body, 'Detected ') AND regexp_matches(body, 'Detected \d+ oom.kill event'))
UNION ALL BY NAME
-- srun names the task (the global rank) and the node the OOM killer hit
SELECT sid, pos, lineno, 'incident' AS fact, 'oom' AS kind, ts, ts_precision, TRY_CAST(m.task AS INTEGER) AS rank,
    trim(body) AS message,
    json_object('source', 'srun', 'host', {short_host_sql("m.host")},
                'task', TRY_CAST(m.task AS INTEGER)) AS fields
FROM (SELECT *, regexp_extract(body, 'srun: error: (\S+): tasks? (\d+)(?:[-,\d]*)?: Out Of Memory',
                               ['host', 'task']) AS m
      FROM jl_lines WHERE contains(body, ': Out Of Memory') AND contains(body, 'srun: error: '))
WHERE m.task <> ''
"""

FACTS = [STEPD_SQL, SRUN_SQL, OOM_SQL]
