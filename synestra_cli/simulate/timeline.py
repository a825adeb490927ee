"""What the job model produces: the timeline of a job's Slurm attempts, the worker-group launches inside
them, its steps and its checkpoints.

Time is integer microseconds since the Unix epoch (UTC) throughout, so the tax buckets computed from it
partition the wall time exactly.

A *launch* is one start of the training processes. Under plain `srun` every Slurm attempt holds exactly
one; under `torchrun` with `--max-restarts` the elastic agent restarts the worker group in place after a
worker fails, so one Slurm attempt (one sacct row) may hold several launches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from synestra_cli.simulate.model import Cause, JobSpec

US = 1_000_000
EXIT_US = 3 * US  # process teardown: after the last save, or after the watchdog / crash
# sacct ExitCode "code:signal": a preempted allocation ends on SIGTERM (0:15, log-formats D.8); a job that
# requeues itself while it runs (`scontrol requeue` in the batch script) is recorded REQUEUED before its
# batch script could exit (job_mgr.c _job_requeue_op: accounting state JOB_REQUEUE).
EXIT_CODES = {
    "FAILED": "1:0",
    "NODE_FAIL": "0:0",
    "TIMEOUT": "0:0",
    "PREEMPTED": "0:15",
    "COMPLETED": "0:0",
    "REQUEUED": "0:0",
}


def to_us(t: datetime) -> int:
    """Microseconds since the epoch; naive datetimes are UTC."""
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    delta = t - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * US + delta.microseconds


@dataclass(frozen=True)
class Checkpoint:
    kind: str  # save | restore
    attempt: int
    iteration: int  # steps completed (Megatron's numbering; each trainer prints its own, docs/simulator.md)
    start: int  # µs
    end: int
    trigger: str  # periodic | reactive | restart | preemption | final
    cause: Cause | None
    launch: int = 0  # the launch it belongs to (1-based over the job)


@dataclass(frozen=True)
class Failure:
    at: int  # µs when it struck (crash start, time limit)
    incident: str | None  # nccl_timeout | cuda_error | python_exception | node_failure | None (time limit)
    rank: int | None
    cause: Cause | None
    message: str | None = None  # what the failing rank printed when it is not the fault's usual text


@dataclass(frozen=True)
class Launch:
    """One start of the training processes: start-up, restore, steps, and how it ended."""

    number: int  # 1-based over the job
    attempt: int  # the Slurm attempt it runs in
    start: int  # processes start
    end: int  # processes gone
    state: str  # COMPLETED | FAILED | NODE_FAIL | PREEMPTED | TIMEOUT (FAILED: restarted in place, or the end)
    first_step: int  # start of the first training step (or the failure, if none ran)
    last_progress: int  # end of the last completed step or save (or first_step if none)
    resume_iteration: int  # iteration restored at start (0: from scratch)
    failure: Failure | None = None
    sigterm: int | None = None  # when SIGTERM arrived (preemption)
    cause: Cause | None = None  # why it ended early (crash or preemption cause)
    loop_start: int | None = None  # the training loop (and Megatron's interval timer) starts; None: never
    init_end: int | None = None  # process start-up done: the load (or the training loop) begins
    noticed: int | None = None  # when the job noticed the failure (a worker exited, Slurm declared the node)


@dataclass(frozen=True)
class Attempt:
    """One Slurm attempt (one sacct allocation row); its fields are those of its first and last launch."""

    number: int  # 1-based
    start: int
    end: int
    state: str  # COMPLETED | FAILED | NODE_FAIL | PREEMPTED | TIMEOUT | REQUEUED
    exit_code: str  # sacct "code:signal"
    first_step: int
    last_progress: int
    resume_iteration: int
    failure: Failure | None = None
    sigterm: int | None = None
    cause: Cause | None = None
    loop_start: int | None = None


@dataclass(frozen=True)
class Steps:
    """Every completed training step, in time order (numpy int64 arrays of equal length)."""

    iteration: np.ndarray
    start: np.ndarray
    end: np.ndarray
    attempt: np.ndarray
    launch: np.ndarray


@dataclass(frozen=True)
class JobTimeline:
    spec: JobSpec
    attempts: tuple[Attempt, ...]
    checkpoints: tuple[Checkpoint, ...]
    steps: Steps
    windows: tuple[tuple[int, int], ...]  # slowdown windows (µs), clipped to the job
    launches: tuple[Launch, ...] = ()

    def launches_of(self, attempt: int) -> list[Launch]:
        return [x for x in self.launches if x.attempt == attempt]


def attempt_of(number: int, launches: list[Launch], state: str) -> Attempt:
    """The Slurm attempt made of these launches (its sacct State given: a self-requeue renames FAILED)."""
    first, last = launches[0], launches[-1]
    return Attempt(
        number=number,
        start=first.start,
        end=last.end,
        state=state,
        exit_code=EXIT_CODES.get(state, "1:0"),
        first_step=first.first_step,
        last_progress=last.last_progress,
        resume_iteration=first.resume_iteration,
        failure=last.failure,
        sigterm=last.sigterm,
        cause=last.cause,
        loop_start=first.loop_start,
    )
