"""The ground truth for one simulated job: its checkpoints with trigger and cause, and its tax buckets.

Buckets follow the tax-report definitions (issue 6, docs/accounting.md) and are computed in integer
microseconds from the exact timeline, so they partition the wall time exactly. Schema: the "Job
truth" section of docs/simulator.md.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from synestra_cli.simulate.model import Cause
from synestra_cli.simulate.timeline import US, Attempt, JobTimeline, Launch

BUCKETS = (
    "productive",
    "checkpoint_save",
    "checkpoint_restore",
    "startup",
    "lost_work",
    "hang",
    "requeue",
    "degraded_throughput",
    "other",
)
# Launches (and attempts) that end before training is done: their unsaved work is lost and they hang
# until exit. REQUEUED: the batch script requeued the job after its step failed.
ENDED_EARLY = ("FAILED", "NODE_FAIL", "TIMEOUT", "PREEMPTED", "REQUEUED")


def iso(t: int | datetime) -> str:
    """ISO-8601 UTC with microseconds and a Z; ints are epoch microseconds."""
    if isinstance(t, datetime):
        t = t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t
    else:
        t = datetime(1970, 1, 1) + timedelta(microseconds=t)  # exact: no float seconds
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def ideal_step_us(durations: np.ndarray, fallback_us: float) -> float:
    """Mean of the step times at or below median + 3 * MAD (raw MAD, as ml-goodput-measurement does)."""
    if len(durations) == 0:
        return fallback_us
    med = float(np.median(durations))
    mad = float(np.median(np.abs(durations - med)))
    return float(durations[durations <= med + 3 * mad].mean())


def counted_steps(tl: JobTimeline) -> np.ndarray:
    """Mask of the steps that count toward the final model: those not thrown away by a failure.

    In a launch that ended early, the steps after its last completed save are lost (they are redone
    later), whether the job was requeued or torchrun restarted the worker group in place.
    """
    keep = np.ones(len(tl.steps.iteration), dtype=bool)
    for x in tl.launches:
        if x.state in ENDED_EARLY:
            keep &= ~((tl.steps.launch == x.number) & (tl.steps.end > resume_point(tl, x)))
    return keep


def resume_point(tl: JobTimeline, a: Attempt | Launch) -> int:
    """End of the last save completed in the launch (or attempt), else its first training step."""
    if isinstance(a, Launch):
        ends = [c.end for c in tl.checkpoints if c.kind == "save" and c.launch == a.number]
    else:
        ends = [c.end for c in tl.checkpoints if c.kind == "save" and c.attempt == a.number]
    return max(ends, default=a.first_step)


def in_windows(tl: JobTimeline) -> np.ndarray:
    """Mask of the steps that start inside a slowdown window."""
    inside = np.zeros(len(tl.steps.start), dtype=bool)
    for start, end in tl.windows:
        inside |= (tl.steps.start >= start) & (tl.steps.start < end)
    return inside


def buckets_us(tl: JobTimeline) -> tuple[dict[str, int], float]:
    """The nine buckets in µs (summing exactly to the wall time) and the ideal step time in µs.

    The ideal step time is taken over the steps outside slowdown windows: when a slowdown covers
    much of a job, median + 3 MAD over all steps admits the slow steps, and productive time would
    then count the very time that degraded_throughput charges (docs/accounting.md).
    """
    durations = tl.steps.end - tl.steps.start
    inside = in_windows(tl)
    ideal = ideal_step_us(durations[~inside] if (~inside).any() else durations, tl.spec.step_s * US)
    keep = counted_steps(tl)
    attempts, launches = tl.attempts, tl.launches
    saves = [c.end - c.start for c in tl.checkpoints if c.kind == "save"]
    restores = [c.end - c.start for c in tl.checkpoints if c.kind == "restore"]
    failed = [x for x in launches if x.state in ENDED_EARLY]
    # torchrun stopping the old workers and re-running the rendezvous is start-up, not a requeue
    in_place = sum(n.start - p.end for p, n in zip(launches, launches[1:], strict=False) if p.attempt == n.attempt)
    b = {
        "productive": round(ideal * int(keep.sum())),
        "checkpoint_save": sum(saves),
        "checkpoint_restore": sum(restores),
        "startup": sum(x.first_step - x.start for x in launches) - sum(restores) + in_place,
        "lost_work": sum(max(0, x.last_progress - resume_point(tl, x)) for x in failed),
        "hang": sum(x.end - x.last_progress for x in failed),
        "requeue": sum(n.start - p.end for p, n in zip(attempts, attempts[1:], strict=False)),
        "degraded_throughput": round(float(np.clip(durations[inside & keep] - ideal, 0, None).sum())),
    }
    b["other"] = attempts[-1].end - attempts[0].start - sum(b.values())
    return {k: b[k] for k in BUCKETS}, ideal


def cause_dict(cause: Cause | None) -> dict | None:
    if cause is None:
        return None
    return {
        "category": cause.category,
        "host": cause.hosts[0] if cause.hosts else None,
        "hosts": list(cause.hosts),
        "component": cause.component,
        "first_signal": iso(cause.first_signal),
        "reported_healthy": cause.reported_healthy,
    }


def job_truth(tl: JobTimeline) -> dict:
    """JSON-ready truth for one job (docs/simulator.md, "Job truth")."""
    spec = tl.spec
    buckets, ideal = buckets_us(tl)
    return {
        "job": spec.job_id,
        "name": spec.name,
        "user": spec.user,
        "hosts": list(spec.hosts),
        "gpus": len(spec.hosts) * spec.gpus_per_node,
        "start": iso(tl.attempts[0].start),
        "end": iso(tl.attempts[-1].end),
        "state": tl.attempts[-1].state,
        "save_every": spec.save_every,
        "step_s": spec.step_s,
        "attempts": [_attempt_dict(a) for a in tl.attempts],
        "checkpoints": [
            {
                "kind": c.kind,
                "attempt": c.attempt,
                "iteration": c.iteration,
                "start": iso(c.start),
                "end": iso(c.end),
                "duration_s": (c.end - c.start) / US,
                "trigger": c.trigger,
                "cause": cause_dict(c.cause),
            }
            for c in tl.checkpoints
        ],
        "degradation_windows": [{"start": iso(s), "end": iso(e)} for s, e in tl.windows],
        "ideal_step_s": ideal / US,
        "steps_counted": int(counted_steps(tl).sum()),
        "wall_s": (tl.attempts[-1].end - tl.attempts[0].start) / US,
        "buckets_us": buckets,
        "buckets_s": {k: v / US for k, v in buckets.items()},
        "restarts": restart_stages(tl),
    }


def restart_stages(tl: JobTimeline) -> list[dict]:
    """Every restart, in stages (docs/simulator.md, "Restarts"): from the fault to the first step of the
    launch that followed it, whether Slurm requeued the job or torchrun restarted it in place. A stage
    the new launch never reached (it failed first) is null."""
    out = []
    for prev, nxt in zip(tl.launches, tl.launches[1:], strict=False):
        restore = next((c for c in tl.checkpoints if c.kind == "restore" and c.launch == nxt.number), None)
        starts = tl.steps.start[tl.steps.launch == nxt.number]
        fault = prev.failure.at if prev.failure else prev.end
        if prev.state == "PREEMPTED" and prev.sigterm is not None:
            fault = prev.sigterm  # the scheduler's SIGTERM is where that restart began
        out.append(
            {
                "attempt": nxt.attempt,
                "in_place": prev.attempt == nxt.attempt,
                "fault_at": iso(fault),
                "noticed_at": iso(prev.noticed if prev.noticed is not None else prev.end),
                "ended_at": iso(prev.end),
                "restarted_at": iso(nxt.start),
                "startup_end": iso(nxt.init_end) if nxt.init_end is not None else None,
                "load_start": iso(restore.start) if restore else None,
                "load_end": iso(restore.end) if restore else None,
                "first_step_start": iso(int(starts.min())) if len(starts) else None,
            }
        )
    return out


def _attempt_dict(a: Attempt) -> dict:
    return {
        "attempt": a.number,
        "start": iso(a.start),
        "end": iso(a.end),
        "state": a.state,
        "exit_code": a.exit_code,
        "resume_iteration": a.resume_iteration,
        "first_step": iso(a.first_step),
        "last_progress": iso(a.last_progress),
        "incident": a.failure.incident if a.failure else None,
        "failure_at": iso(a.failure.at) if a.failure else None,
        "sigterm": iso(a.sigterm) if a.sigterm is not None else None,
        "cause": cause_dict(a.cause),
    }
