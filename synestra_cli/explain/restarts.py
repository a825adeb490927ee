"""Every restart of a job measured in stages, each dated by the lines that date it (issue 37 item 4).

A restart is a new Slurm attempt after one that ended early (requeue), or a new worker group that torchrun's
elastic agent started inside the same attempt (in place: two log segments of one sacct attempt, or a
`Worker group FAILED ... will restart` line before the new segment). Its stages, in order:

    fault_at          the failure began: its earliest crash incident (a watchdog's hang start, an exception, a
                      failed worker), else the cause's first signal when that lies in the failed segment; a
                      preemption's SIGTERM
    noticed_at        the job noticed: the first line that reports the failure (the watchdog firing, the
                      traceback, Slurm's or torchrun's job-end line)
    ended_at          the failed attempt ended (sacct's end, else its last dated line); in place, the agent's
                      "Worker group FAILED" line
    restarted_at      the new attempt started (sacct's start, else its first dated line); in place, the agent's
                      worker group start (`Rendezvous complete` / `Starting worker group`), else the new
                      segment's first dated line
    startup_end       the framework initialised (Megatron's `[after megatron is initialized] datetime:`)
    load_start        the checkpoint load began and ended: the restore's own dated lines, or its end bounded
    load_end          by the dated line printed as the load returns and its start by the load's stated
                      duration (Megatron's load-checkpoint timer, torchtitan's "in N seconds")
    first_step_start  the first training step began: the new segment's first dated iteration line minus the
                      iterations it covers at the next line's pace (the first line's own average includes
                      the warm-up)

A stage the logs do not date is None and named in `undated`; it lies between the dated stages around it.
Nothing is guessed: a restore dated only by its neighbours' lines dates no load, one iteration line alone
dates no first step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from synestra_cli.explain.triggers import Checkpoint
from synestra_cli.signals.events import Incident
from synestra_cli.signals.lifecycle import Lifecycle, Mark, Segment
from synestra_cli.signals.scope import Attempt

STAGES = (
    "fault_at",
    "noticed_at",
    "ended_at",
    "restarted_at",
    "startup_end",
    "load_start",
    "load_end",
    "first_step_start",
)
# The kinds that say the failure struck (their ts: when it began) and those that say the job noticed.
STRUCK = ("nccl_timeout", "nccl_error", "cuda_error", "python_exception", "oom", "worker_failed")
NOTICED = (*STRUCK, "job_end", "task_exit", "elastic_restart", "sigterm")
FAILED_ENDS = ("node_failure", "task_failure", "failed")
SKEW = timedelta(seconds=30)


@dataclass
class Restart:
    attempt: int  # the attempt that restarted (in place: the attempt it restarted within)
    in_place: bool
    stages: dict[str, datetime | None]
    restore: Checkpoint | None = None  # the load of the new segment
    failed_attempt: int | None = None  # the attempt whose failure it followed
    failed_iteration: int | None = None  # the last iteration the failed segment printed
    cause_key: tuple[str, str | None, str | None] | None = None  # set by explain: the restart's cause
    segment: tuple[int, int] | None = field(default=None, repr=False)  # (attempt, log attempt) of the new segment
    failed_start: datetime | None = field(default=None, repr=False)  # the failed segment's first dated line

    @property
    def undated(self) -> list[str]:
        return [s for s in STAGES if self.stages.get(s) is None]

    @property
    def restored_iteration(self) -> int | None:
        return self.restore.iteration if self.restore else None

    def downtime_s(self) -> float | None:
        """From the failure (or the first dated stage) to the first step: what the restart cost in wall time."""
        dated = [t for t in self.stages.values() if t is not None]
        if not dated or self.stages.get("first_step_start") is None:
            return None
        return max((max(dated) - min(dated)).total_seconds(), 0.0)


def _failure_incidents(incidents: list[Incident], seg: Segment) -> list[Incident]:
    """The failed segment's incidents that report its end: inside its span (30 s skew), or undated."""

    def inside(i: Incident) -> bool:
        if i.log_attempt is not None:
            return i.log_attempt == seg.log_attempt
        t = i.logged_ts or i.ts
        if t is None or seg.start is None or seg.end is None:
            return True
        return seg.start - SKEW <= t <= seg.end + SKEW

    return [i for i in incidents if i.attempt == seg.attempt and i.kind in NOTICED and inside(i)]


def _struck(i: Incident) -> bool:
    if i.kind == "worker_failed":
        return i.signal != "SIGTERM"
    return i.kind in STRUCK


def _fault_and_notice(failing: list[Incident], seg: Segment) -> tuple[datetime | None, datetime | None]:
    """An undated line takes its nearest dated neighbour's time, which may be the next process's first line:
    a time past the failed segment's last dated line dates nothing of its failure."""
    last = seg.end + SKEW if seg.end else None

    def within(t: datetime | None) -> datetime | None:
        return t if t is not None and (last is None or t <= last) else None

    struck = [t for i in failing if _struck(i) and (t := within(i.ts))]
    if not struck:  # a preemption: the scheduler's signal is both
        struck = [t for i in failing if i.kind == "sigterm" and (t := within(i.ts))]
    noticed = [t for i in failing if (t := within(i.logged_ts or i.ts)) is not None]
    fault = min(struck, default=None)
    notice = min(noticed, default=None)
    if fault is not None and notice is not None and notice < fault:
        notice = fault
    return fault, notice


def _marks(marks: list[Mark], seg: Segment, kind: str) -> list[Mark]:
    return [
        m
        for m in marks
        if m.kind == kind and m.attempt == seg.attempt and (m.log_attempt is None or m.log_attempt == seg.log_attempt)
    ]


def _restore_of(checkpoints: list[Checkpoint], failed: Segment, seg: Segment, nxt: Segment | None) -> Checkpoint | None:
    """The segment's load: a restore of its attempt after the failed segment (in place: after its end) and before
    the next segment of the same attempt. (A segment's first dated line may come after its load began: NeMo dates
    its load from the load's own epoch start while the lines around it carry no time.)"""

    def inside(c: Checkpoint) -> bool:
        t = c.start or c.end
        if t is None:
            return True
        lo = failed.end - SKEW if failed.attempt == seg.attempt and failed.end else None
        hi = nxt.start if nxt is not None and nxt.attempt == seg.attempt else None
        return (lo is None or t >= lo) and (hi is None or t < hi)

    mine = [c for c in checkpoints if c.kind == "restore" and c.attempt == seg.attempt and inside(c)]
    return mine[0] if mine else None


def _load_stages(c: Checkpoint | None, built: list[Mark]) -> tuple[datetime | None, datetime | None]:
    """(load_start, load_end) as the restore's lines date them, else None."""
    if c is None or c.start is None or c.end is None:
        return None, None
    if c.precision == "exact":
        return c.start, c.end
    # undated lines: the load ended at the dated line printed as it returns when that line is the `built` mark,
    # and began its stated duration before; a restore dated by any other neighbour dates nothing
    end = c.end if any(abs((m.ts - c.end).total_seconds()) < 1 for m in built) else None
    start = end - timedelta(seconds=c.blocking_s) if end is not None and c.blocking_s is not None else None
    return start, end


def _first_step(seg: Segment, restored: int | None, loop: list[Mark]) -> datetime | None:
    """The first step's start: the first dated iteration line minus the iterations it covers at the next
    line's pace (its printed step time, else the time between the two lines per iteration)."""
    a, b = seg.first, seg.second
    if a is None or b is None or b.iteration <= a.iteration:
        return None
    pace = b.step_time_s
    if pace is None or pace <= 0:
        pace = (b.ts - a.ts).total_seconds() / (b.iteration - a.iteration)
    start_it = restored
    if start_it is None:  # torchtitan's "Training starts at step N" names the step after the restored one
        start_it = next((m.iteration - 1 for m in loop if m.iteration is not None), None)
    if start_it is None or a.iteration <= start_it or pace <= 0:
        return None
    return a.ts - timedelta(seconds=(a.iteration - start_it) * pace)


Bounds = tuple[datetime | None, datetime | None]  # (ended_at, restarted_at)


def _requeue_bounds(attempts: dict[int, Attempt], failed: Segment, new: Segment) -> Bounds:
    prev, cur = attempts.get(failed.attempt), attempts.get(new.attempt)
    ended = prev.end if prev and prev.end else failed.end
    started = cur.start if cur and cur.start else new.start
    return ended, started


def _in_place_bounds(failing: list[Incident], marks: list[Mark], failed: Segment, new: Segment) -> Bounds:
    """The old workers are stopped when the agent begins the next rendezvous (else at its "Worker group FAILED"
    line); the new ones start with "Starting worker group" (else the new segment's first dated line)."""
    agent = [t for i in failing if i.kind == "elastic_restart" and (t := i.logged_ts or i.ts) is not None]
    failed_at = max(agent, default=None)
    rdzv = [m.ts for m in marks if m.kind == "worker_rendezvous" and failed_at is not None and m.ts >= failed_at]
    ended = min(rdzv, default=None) or failed_at or failed.end
    started = [m.ts for m in marks if m.kind == "worker_start" and ended is not None and m.ts >= ended]
    return ended, min(started, default=None) or new.start


def restarts(
    attempts: list[Attempt], incidents: list[Incident], checkpoints: list[Checkpoint], life: Lifecycle
) -> list[Restart]:
    """Every restart of the job, in time order, with its stages."""
    by_no = {a.attempt: a for a in attempts}
    segs = _segments(attempts, life.segments)
    out = []
    for k in range(1, len(segs)):
        failed, new = segs[k - 1], segs[k]
        nxt = segs[k + 1] if k + 1 < len(segs) else None
        failing = _failure_incidents(incidents, failed)
        elastic = any(i.kind == "elastic_restart" for i in failing)
        sacct = by_no.get(failed.attempt)
        # without sacct every segment is its own attempt: torchrun's restart line says it was in place
        in_place = new.attempt == failed.attempt or (elastic and (sacct is None or sacct.state is None))
        if in_place and not failing and restore_missing(checkpoints, failed, new, nxt):
            continue  # a log cut in two without a failure or a load between: no restart
        fault, notice = _fault_and_notice(failing, failed)
        if in_place:
            ended, started = _in_place_bounds(failing, life.marks, failed, new)
        else:
            ended, started = _requeue_bounds(by_no, failed, new)
        restore = _restore_of(checkpoints, failed, new, nxt)
        load_start, load_end = _load_stages(restore, _marks(life.marks, new, "built"))
        init = _marks(life.marks, new, "initialized")
        loop = _marks(life.marks, new, "loop_start")
        stages = {
            "fault_at": fault,
            "noticed_at": notice,
            "ended_at": ended,
            "restarted_at": started,
            "startup_end": init[0].ts if init else None,
            "load_start": load_start,
            "load_end": load_end,
            "first_step_start": _first_step(new, restore.iteration if restore else None, loop),
        }
        out.append(
            Restart(
                new.attempt,
                in_place,
                _ordered(stages),
                restore,
                failed.attempt,
                failed.last_iteration,
                segment=(new.attempt, new.log_attempt),
                failed_start=failed.start,
            )
        )
    return out


def restore_missing(checkpoints: list[Checkpoint], failed: Segment, new: Segment, nxt: Segment | None) -> bool:
    return _restore_of(checkpoints, failed, new, nxt) is None


def _segments(attempts: list[Attempt], found: list[Segment]) -> list[Segment]:
    """The job's segments in order: the logs' own, and one per attempt no log covers (sacct alone)."""
    covered = {s.attempt for s in found}
    extra = [
        Segment(a.attempt, a.attempt, a.start, a.end, None, None, None) for a in attempts if a.attempt not in covered
    ]
    return sorted([*found, *extra], key=lambda s: (s.attempt, s.start or datetime.min, s.log_attempt))


def _ordered(stages: dict[str, datetime | None]) -> dict[str, datetime | None]:
    """A stage dated before the one it follows (clock skew between a log and sacct) is not dated: each dated
    stage is at or after every dated stage before it (a 30 s skew allowed)."""
    out: dict[str, datetime | None] = {}
    latest: datetime | None = None
    for name in STAGES:
        t = stages.get(name)
        if t is not None and latest is not None and t < latest - SKEW:
            t = None
        out[name] = t
        if t is not None:
            latest = t if latest is None else max(latest, t)
    return out


# A cause's first signal dates a fault only this close before the job noticed it (a collective's timeout is at most
# this long): an older signal is a degradation that went on long before the failure.
FIRST_SIGNAL_S = 1800


def with_first_signal(r: Restart, first_signal: datetime | None) -> Restart:
    """The cause's first signal dates the fault when it lies before the notice (and not long before it), and no
    crash incident dates it earlier (XLA's error line, printed when the hung collective times out, dates the notice)."""
    if first_signal is None:
        return r
    notice = r.stages["noticed_at"] or r.stages["ended_at"]
    fault = r.stages["fault_at"]
    fits = notice is None or notice - timedelta(seconds=FIRST_SIGNAL_S) <= first_signal <= notice
    # a segment torchrun started again after the fault struck failed of it too, but later: its own failure
    fits = fits and (r.failed_start is None or first_signal >= r.failed_start)
    if fits and (fault is None or first_signal < fault):
        r.stages["fault_at"] = first_signal
    return r
