"""Slurm's own lines in a job's output when an attempt ends early: slurmstepd's notices and srun's.

Wording from SchedMD/slurm (@ 284c3b9, 2026; docs/simulator.md cites each):
- slurmstepd (src/slurmd/slurmstepd/req.c:1121-1150) `*** JOB 1001 ON gpu-001 CANCELLED AT
  2026-11-02T03:12:45 DUE TO PREEMPTION ***` (the batch step: JOB n; srun's step: STEP n.0), `… DUE TO TIME
  LIMIT ***`, `… DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***`, `… DUE TO JOB REQUEUE ***` (the job
  was requeued while it ran: slurmd/req.c:4898), and since 25.05 (610dc22) `… DUE TO TASK FAILURE ***` when
  --kill-on-bad-exit stops a step (before: no reason given). Printed by the stepd of the step's first node,
  with that node's name, once per step; a step's notice reaches the task's output (`srun -l` labels it).
- srun (src/srun/launch.c _task_finish, src/api/step_launch.c): `srun: error: gpu-004: task 35: Exited with
  exit code 1`, `srun: error: gpu-002: tasks 8-15: Terminated` (strsignal), `srun: Terminating
  StepId=1001.0` (older `srun: launch/slurm: _step_signal: Terminating StepId=…`), `srun: error: Node
  failure on gpu-004` (step_launch.c:1245), `srun: Job step aborted: Waiting up to 32 seconds for job step to
  finish.` (KillWait 30 + 2), `srun: forcing job termination` (signals.c:167, srun itself got SIGTERM).
  Real samples: a 2024 task failure and a 2025 preemption quoted in tests/data/real_samples/slurm/.
"""

from __future__ import annotations

from datetime import timedelta

from synestra_cli.simulate.logfmt import EPOCH
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, Attempt, JobTimeline
from synestra_cli.simulate.trainers.common import NO_TASK, Out


def _at(us: int) -> str:
    return (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S")


def stepd(entity: str, host: str, us: int, why: str | None) -> str:
    reason = f" DUE TO {why}" if why else ""
    return f"slurmstepd: error: *** {entity} ON {host} CANCELLED AT {_at(us)}{reason} ***"


def _tasks(tl: JobTimeline, node: int, render: Rendering) -> tuple[str, str]:
    """srun's task word and list for one node's tasks (one per GPU, or one torchrun per node)."""
    if render.launcher == "torchrun":
        return "task", str(node)
    g = tl.spec.gpus_per_node
    return ("task", str(node * g)) if g == 1 else ("tasks", f"{node * g}-{node * g + g - 1}")


def _notice(render: Rendering) -> bool:
    """Slurm's JOB notice is printed here unless Megatron's legacy writer printed it (simulate/joblog.py)."""
    legacy = render.trainer == "megatron" and render.launcher == "srun" and not render.slurm_lines
    return render.slurm_lines or (render.slurm_notice and not legacy)


def attempt_end(tl: JobTimeline, a: Attempt, render: Rendering) -> list[Out]:
    """Slurm's lines at the end of an attempt: the notice (when `slurm_notice`) and, with `slurm_lines`,
    the rest of what slurmstepd and srun print."""
    spec = tl.spec
    job, head = spec.job_id, spec.hosts[0]
    last = tl.launches_of(a.number)[-1]
    out: list[Out] = []
    if a.state == "PREEMPTED" and last.sigterm is not None:
        t = last.sigterm
        if render.slurm_lines:
            out.append((t, -9, stepd(f"STEP {job}.0", head, t, "PREEMPTION"), 0))
        if _notice(render):
            out.append((t, -8, stepd(f"JOB {job}", head, t, "PREEMPTION"), NO_TASK))
        if render.slurm_lines:
            out.append((t, -7, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", NO_TASK))
        return out
    if a.state == "TIMEOUT":
        if render.slurm_lines:
            out.append((a.end, -9, stepd(f"STEP {job}.0", head, a.end, "TIME LIMIT"), 0))
        if _notice(render):
            out.append((a.end, 0, stepd(f"JOB {job}", head, a.end, "TIME LIMIT"), NO_TASK))
        if render.slurm_lines:
            out.append((a.end, 1, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", NO_TASK))
            out += _terminated(tl, range(len(spec.hosts)), a.end + 2 * US, render)
        return out
    if not render.slurm_lines or last.failure is None:
        return out
    if a.state == "NODE_FAIL":
        return _node_failure(tl, a, last.failure.cause.hosts[0] if last.failure.cause else head)
    return _task_failure(tl, a, render)


def _terminated(tl: JobTimeline, nodes, us: int, render: Rendering) -> list[Out]:
    out: list[Out] = []
    for n in nodes:
        word, ids = _tasks(tl, n, render)
        out.append((us, 20 + n, f"srun: error: {tl.spec.hosts[n]}: {word} {ids}: Terminated", NO_TASK))
    return out


def _task_failure(tl: JobTimeline, a: Attempt, render: Rendering) -> list[Out]:
    """A task exits non-zero; --kill-on-bad-exit makes srun stop the step; a self-requeueing batch script
    then requeues the job while it still runs."""
    spec, last = tl.spec, tl.launches_of(a.number)[-1]
    f = last.failure
    assert f is not None
    job, head = spec.job_id, spec.hosts[0]
    rank = f.rank if f.rank is not None else 0
    node = rank // spec.gpus_per_node
    t = last.noticed if last.noticed is not None else f.at
    torchrun = render.launcher == "torchrun"
    task = node if torchrun else rank
    how = "Aborted" if f.incident == "nccl_timeout" and not torchrun else "Exited with exit code 1"
    end = t + 500_000  # srun hears of the exit, signals the step
    current = render.trainer_version == "current"
    terminating = (
        f"srun: Terminating StepId={job}.0"
        if current
        else f"srun: launch/slurm: _step_signal: Terminating StepId={job}.0"
    )
    out: list[Out] = [
        (t + 100_000, 10, f"srun: error: {spec.hosts[node]}: task {task}: {how}", NO_TASK),
        (end, 11, terminating, NO_TASK),
        (end, 12, stepd(f"STEP {job}.0", head, end, "TASK FAILURE" if current else None), 0),
    ]
    others = [n for n in range(len(spec.hosts)) if n != node]
    out += _terminated(tl, others, end + US, render)
    if a.state == "REQUEUED":
        out.append((a.end, 40, stepd(f"JOB {job}", head, a.end, "JOB REQUEUE"), NO_TASK))
    return out


def _node_failure(tl: JobTimeline, a: Attempt, failed: str) -> list[Out]:
    """slurmctld declared a node down: srun hears of it, the batch host's stepd ends the job (unless the
    failed node is the batch host itself: its stepd is gone with it)."""
    spec = tl.spec
    t = a.end - 2 * US
    out: list[Out] = [(t, 10, f"srun: error: Node failure on {failed}", NO_TASK)]
    if failed != spec.hosts[0]:
        why = "NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"
        out.append((t, 11, stepd(f"JOB {spec.job_id}", spec.hosts[0], t, why), NO_TASK))
    out.append((t, 12, "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.", NO_TASK))
    return out
