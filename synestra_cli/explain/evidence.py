"""What explain knows of one job when it reasons (`Evidence`: its scope, signals, windows and incidents) and
what it answers (`Cause`, `Reasoning`); the attempt's crashes, which both the plan (explain/plan.py) and
the job's failures (explain/job.py) read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from synestra_cli.explain import chain as ch
from synestra_cli.explain.attribute import Signal
from synestra_cli.explain.rules import FALLBACK_CONFIDENCE
from synestra_cli.signals.activity import StragglerHost
from synestra_cli.signals.collectives import Laggard
from synestra_cli.signals.events import Incident
from synestra_cli.signals.scope import Attempt, JobScope
from synestra_cli.signals.steps import DegradationWindow

FALLBACK_STRAGGLER = FALLBACK_CONFIDENCE["workload.straggler"]
CRASH_INCIDENTS = ("nccl_timeout", "nccl_error", "cuda_error", "python_exception", "oom")
# Slurm's lines that say the attempt failed (formats/training/slurm_lines.py): how it ended, and when; never its cause.
FAILED_ENDS = ("node_failure", "task_failure", "failed")
WORKER = "worker_failed"
OOM_STATE = "OUT_OF_MEMORY"  # sacct's state when the step's cgroup OOM-killed it


@dataclass(frozen=True)
class Cause:
    category: str
    host: str | None
    component: str | None
    first_signal: datetime | None
    confidence: float
    reported_healthy: bool = False
    # What it is and what to do about it (explain/assets.py, explain/actions.py), filled in by api.
    assets: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    action: dict[str, str] | None = field(default=None, compare=False)
    evidence: tuple[ch.ChainLink, ...] = field(default=(), compare=False)  # an alternative's own signals


@dataclass
class Reasoning:
    cause: Cause | None = None
    alternatives: list[Cause] = field(default_factory=list)
    chain: list[ch.ChainLink] = field(default_factory=list)


@dataclass
class Evidence:
    """Everything found in the job's scope, computed once per job."""

    scope: JobScope
    signals: list[Signal]
    windows: list[DegradationWindow]
    incidents: list[Incident]
    observed: bool = False  # any telemetry of the job's hosts: without it, "not the infrastructure" is a guess
    # (hosts, healthy until, slow from, until, since) -> the straggler's host, read only when needed
    stragglers: Callable[..., StragglerHost | None] | None = None
    laggards: list[Laggard] = field(default_factory=list)  # ranks behind in a collective (Flight Recorder)


def first_node(att: Attempt | None) -> str | None:
    """Rank 0's node: Slurm's batch host, the first of the allocation."""
    return att.nodes[0] if att and att.nodes else None


def fallback(category: str, host: str | None = None, at: datetime | None = None) -> Cause:
    return Cause(category, host, None, at, FALLBACK_CONFIDENCE[category])


def crashes_of(ev: Evidence, attempt: int | None) -> list[Incident]:
    """The attempt's timed errors, and its failed workers (timed or not: torchrun's pylogging lines carry no
    time) but those stopped by SIGTERM, which follow another's failure or the scheduler's stop; and Slurm's
    lines that say it failed (a node failure, a task failure), which date its end and are evidence of how it
    ended, not of why."""
    return [
        i
        for i in ev.incidents
        if i.attempt == attempt
        and (
            (i.kind in CRASH_INCIDENTS and i.ts)
            or (i.kind == WORKER and i.signal != "SIGTERM")
            or (i.kind == "job_end" and i.ended_by in FAILED_ENDS and i.ts)
            or (i.kind == "task_exit" and i.signal != "SIGTERM" and i.ts)
        )
    ]
