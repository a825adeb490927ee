"""The job model: a JobSpec and its Disturbances in, the timeline of every attempt, step and checkpoint out.

Time is integer microseconds since the Unix epoch (UTC) throughout, so the tax buckets computed from it
partition the wall time exactly. Steps are generated a segment at a time with numpy (a segment ends at
the next save, a change of slowdown factor, a failure or a preemption), so a 10^5-step job costs a few
hundred vector operations, not 10^5 Python iterations.

Megatron semantics modelled: periodic saves at ``iteration % save_every == 0`` (blocking); a SIGTERM
is acted on after the step in progress (save, then exit); a crash leaves the in-flight step unfinished
and the process hangs until it exits; a requeued attempt restores the last completed save.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from synestra_cli.simulate.model import Cause, Disturbance, JobSpec

US = 1_000_000
STEP_NOISE_SIGMA = 0.015  # lognormal sigma of step times: ~1.5% run-to-run jitter
PHASE_NOISE_SIGMA = 0.05  # startup, save and restore durations vary more
EXIT_US = 3 * US  # process teardown: after the last save, or after the watchdog / crash
WARMUP_SHARE = 0.1  # share of startup_s spent in the training loop before the first step
# sacct ExitCode "code:signal": a preempted allocation ends on SIGTERM (0:15, log-formats D.8)
EXIT_CODES = {"FAILED": "1:0", "NODE_FAIL": "0:0", "TIMEOUT": "0:0", "PREEMPTED": "0:15", "COMPLETED": "0:0"}


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
    iteration: int
    start: int  # µs
    end: int
    trigger: str  # periodic | reactive | restart | preemption | final
    cause: Cause | None


@dataclass(frozen=True)
class Failure:
    at: int  # µs when it struck (crash start, time limit)
    incident: str | None  # nccl_timeout | cuda_error | python_exception | None (time limit)
    rank: int | None
    cause: Cause | None


@dataclass(frozen=True)
class Attempt:
    number: int  # 1-based
    start: int
    end: int
    state: str  # COMPLETED | FAILED | NODE_FAIL | PREEMPTED | TIMEOUT
    exit_code: str  # sacct "code:signal"
    first_step: int  # start of the first training step (or the failure, if none ran)
    last_progress: int  # end of the last completed step or save (or first_step if none)
    resume_iteration: int  # iteration restored at start (0: from scratch)
    failure: Failure | None = None  # crash or time limit
    sigterm: int | None = None  # when SIGTERM arrived (preemption)
    cause: Cause | None = None  # why the attempt ended early (crash or preemption cause)
    loop_start: int | None = None  # the training loop (and Megatron's interval timer) starts; None: never


@dataclass(frozen=True)
class Steps:
    """Every completed training step, in time order (numpy int64 arrays of equal length)."""

    iteration: np.ndarray
    start: np.ndarray
    end: np.ndarray
    attempt: np.ndarray


@dataclass(frozen=True)
class JobTimeline:
    spec: JobSpec
    attempts: tuple[Attempt, ...]
    checkpoints: tuple[Checkpoint, ...]
    steps: Steps
    windows: tuple[tuple[int, int], ...]  # slowdown windows (µs), clipped to the job


@dataclass
class _Run:
    """Mutable state of one simulation; private to simulate_job."""

    spec: JobSpec
    rng: np.random.Generator
    slow: list[tuple[int, int, float, int]]  # (start, end, factor, disturbance index)
    storage: list[tuple[int, int, float, Cause | None]]
    crashes: list[tuple[int, Disturbance]]
    preempts: list[tuple[int, Disturbance]]
    t: int = 0
    it: int = 0
    saved_it: int = 0  # last iteration on storage (survives attempts)
    reacted: set[int] = field(default_factory=set)
    streak: int | None = None  # start of the current run of slow steps
    progress: int = 0  # end of the last completed step or save
    ckpts: list[Checkpoint] = field(default_factory=list)
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = field(default_factory=list)

    def jitter(self, seconds: float, sigma: float = PHASE_NOISE_SIGMA) -> int:
        return max(1, round(seconds * US * float(self.rng.lognormal(0.0, sigma))))

    def factor_at(self, t: int) -> float:
        return float(np.prod([f for s, e, f, _ in self.slow if s <= t < e] or [1.0]))

    def next_boundary(self, t: int) -> int:
        edges = [x for s, e, _, _ in self.slow for x in (s, e) if x > t]
        return min(edges, default=2**62)

    def next_event(self, events: list[tuple[int, Disturbance]], t: int, until: int) -> tuple[int, Disturbance] | None:
        """The first event in [t, until): events before t happened while the job was not running."""
        return next(((at, d) for at, d in events if t <= at < until), None)


def _parse(spec: JobSpec, rng: np.random.Generator) -> _Run:
    never = 2**62
    slow, storage, crashes, preempts = [], [], [], []
    for i, d in enumerate(spec.disturbances):
        start, end = to_us(d.start), (to_us(d.end) if d.end else never)
        if d.kind == "slowdown":
            slow.append((start, end, d.factor, i))
        elif d.kind == "slow_storage":
            storage.append((start, end, d.factor, d.cause))
        elif d.kind == "crash":
            crashes.append((start, d))
        elif d.kind == "preempt":
            preempts.append((start, d))
        else:
            raise ValueError(f"unknown disturbance kind {d.kind!r}")
    return _Run(spec, rng, slow, storage, sorted(crashes, key=lambda x: x[0]), sorted(preempts, key=lambda x: x[0]))


def simulate_job(spec: JobSpec, rng: np.random.Generator) -> JobTimeline:
    """Run the job through its disturbances: attempts until it completes or times out."""
    run = _parse(spec, rng)
    attempts: list[Attempt] = []
    t = to_us(spec.start)
    while True:
        attempt = _attempt(run, attempts[-1] if attempts else None, t)
        attempts.append(attempt)
        if attempt.state in ("COMPLETED", "TIMEOUT"):
            break
        t = attempt.end + run.jitter(spec.requeue_s)
    return JobTimeline(
        spec, tuple(attempts), tuple(run.ckpts), _steps(run.chunks), _windows(run, to_us(spec.start), attempts[-1].end)
    )


def _steps(chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]) -> Steps:
    if not chunks:
        empty = np.zeros(0, dtype=np.int64)
        return Steps(empty, empty, empty, empty)
    return Steps(
        np.concatenate([c[0] for c in chunks]),
        np.concatenate([c[1] for c in chunks]),
        np.concatenate([c[2] for c in chunks]),
        np.concatenate([np.full(len(c[0]), c[3], dtype=np.int64) for c in chunks]),
    )


def _windows(run: _Run, start: int, end: int) -> tuple[tuple[int, int], ...]:
    return tuple((max(s, start), min(e, end)) for s, e, _, _ in run.slow if s < end and e > start)


def _restore_reason(prev: Attempt | None) -> tuple[str, Cause | None]:
    if prev is not None and prev.state == "PREEMPTED":
        return "preemption", prev.cause
    return "restart", prev.cause if prev else None


def _attempt(run: _Run, prev: Attempt | None, t0: int) -> Attempt:
    """One attempt: startup, restore of the last save (if any), then training until it ends."""
    spec, number = run.spec, (prev.number + 1 if prev else 1)
    limit = t0 + round(spec.time_limit_s * US)
    run.t, run.it, run.streak = t0, run.saved_it, None
    base: dict = {"number": number, "start": t0, "resume_iteration": run.saved_it}
    # Megatron initialises, loads the checkpoint, then starts its training loop; the first step's
    # warm-up (lazy NCCL communicators, data-loader workers) is start-up time inside that loop.
    phases = (
        [("init", spec.startup_s * (1 - WARMUP_SHARE))]
        + ([("restore", spec.restore_s)] if run.saved_it > 0 else [])
        + [("warmup", spec.startup_s * WARMUP_SHARE)]
    )
    for phase, seconds in phases:
        if phase == "warmup":
            base["loop_start"] = run.t
        end = run.t + run.jitter(seconds)
        failed = _fail(run, base, end, limit, first_step=None)
        if failed:
            return failed
        if phase == "restore":
            trigger, cause = _restore_reason(prev)
            run.ckpts.append(Checkpoint("restore", number, run.saved_it, run.t, end, trigger, cause))
        run.t = end
    run.progress = run.t
    return _train(run, base, limit, first_step=run.t)


def _fail(
    run: _Run, base: dict, until: int, limit: int, first_step: int | None, last_progress: int | None = None
) -> Attempt | None:
    """The attempt's end if a crash or the time limit strikes in [run.t, until), else None.

    Without a completed step, the failure itself is the attempt's first step and last progress: the
    phase it cut short counts as startup and the rest as hang.
    """
    crash = run.next_event(run.crashes, run.t, until)
    at = min(crash[0] if crash else limit, limit)
    if at >= until:
        return None
    first = at if first_step is None else first_step
    progress = first if last_progress is None else last_progress
    if crash and crash[0] < limit:
        d = crash[1]
        end = at + round(d.hang_s * US) + EXIT_US  # the hung collective began at the fault
        return Attempt(
            **base,
            end=end,
            state=d.exit_state,
            exit_code=EXIT_CODES.get(d.exit_state, "1:0"),
            first_step=first,
            last_progress=progress,
            failure=Failure(at, d.incident, d.rank, d.cause),
            cause=d.cause,
        )
    return Attempt(
        **base,
        end=limit,
        state="TIMEOUT",
        exit_code=EXIT_CODES["TIMEOUT"],
        first_step=first,
        last_progress=progress,
        failure=Failure(limit, None, None, None),
    )


def _step_durations(run: _Run, n: int) -> np.ndarray:
    scale = run.spec.step_s * US * run.factor_at(run.t)
    return np.maximum(1, np.rint(scale * run.rng.lognormal(0.0, STEP_NOISE_SIGMA, n))).astype(np.int64)


def _reactive_count(run: _Run, starts: np.ndarray, ends: np.ndarray, d: np.ndarray) -> tuple[int, np.ndarray]:
    """Steps up to the one after which a reactive save fires (len+1: none), and each step's streak start.

    A streak is a run of consecutive steps slower than reactive_threshold x the healthy step time; it
    carries over saves and segment ends within an attempt.
    """
    n = len(d)
    slow = d > run.spec.reactive_threshold * run.spec.step_s * US
    idx = np.arange(n)
    first = np.maximum.accumulate(np.where(~slow, idx, -1)) + 1
    streak = starts[np.minimum(first, n - 1)]
    if run.streak is not None:
        streak = np.where(first == 0, run.streak, streak)
    streak = np.where(slow, streak, -1)
    if not _unreacted(run):
        return n + 1, streak
    ok = slow & (ends - streak >= round(run.spec.reactive_after_s * US))
    return (int(np.argmax(ok)) + 1 if ok.any() else n + 1), streak


def _unreacted(run: _Run) -> list[int]:
    return [i for s, e, _, i in run.slow if s <= run.t < e and i not in run.reacted]


def _train(run: _Run, base: dict, limit: int, first_step: int) -> Attempt:
    """Steps segment by segment until the job completes, is preempted, crashes or times out."""
    spec = run.spec
    pre = run.next_event(run.preempts, base["start"], 2**62)
    sigterm = pre[0] if pre else None
    while True:
        target = min((run.it // spec.save_every + 1) * spec.save_every, spec.train_iters)
        n = target - run.it
        if n <= 0:  # restored at train_iters (preempted right at the end): nothing left to do
            return _clean_exit(run, base, "COMPLETED", first_step)
        d = _step_durations(run, n)
        ends = run.t + np.cumsum(d)
        starts = ends - d
        crash = run.next_event(run.crashes, run.t, 2**62)
        n_crash = int(np.searchsorted(ends, min(crash[0] if crash else limit, limit), "right"))
        n_factor = int(np.searchsorted(starts, run.next_boundary(run.t), "left"))
        n_pre = int(np.searchsorted(ends, sigterm, "left")) + 1 if sigterm is not None else n + 1
        n_react, streak = _reactive_count(run, starts, ends, d)
        slowing = _unreacted(run)  # taken before the steps: the slowdown may end during them
        c = min(n, n_crash, n_factor, n_pre, n_react)
        _commit(run, base["number"], starts, ends, streak, c)
        if n_pre == c:  # Megatron acts on SIGTERM after the step in progress: save, then exit
            assert pre is not None
            cause = pre[1].cause or Cause("scheduler.preemption", (), None, pre[1].start)
            return _save(run, base, "preemption", cause, limit, first_step) or _clean_exit(
                run, base, "PREEMPTED", first_step, sigterm=sigterm, cause=cause
            )
        if n_react == c < n:
            index = slowing[0]
            run.reacted.add(index)
            failed = _save(run, base, "reactive", spec.disturbances[index].cause, limit, first_step)
        elif n_crash == c < n:
            failed = _fail(run, base, 2**62, limit, first_step, last_progress=run.progress)
        elif c < n:
            continue  # the slowdown factor changed: regenerate the rest at the new rate
        elif run.it >= spec.train_iters:
            return _save(run, base, "final", None, limit, first_step) or _clean_exit(run, base, "COMPLETED", first_step)
        else:
            failed = _save(run, base, "periodic", None, limit, first_step)
        if failed:
            return failed


def _commit(run: _Run, attempt: int, starts: np.ndarray, ends: np.ndarray, streak: np.ndarray, c: int) -> None:
    if c == 0:
        return
    iterations = run.it + 1 + np.arange(c, dtype=np.int64)
    run.chunks.append((iterations, starts[:c].copy(), ends[:c].copy(), attempt))
    run.it += c
    run.t = run.progress = int(ends[c - 1])
    run.streak = int(streak[c - 1]) if streak[c - 1] >= 0 else None


def _save(run: _Run, base: dict, trigger: str, cause: Cause | None, limit: int, first_step: int) -> Attempt | None:
    """A blocking save at the current iteration; the failed attempt if a crash cuts it short.

    A slow filesystem stretches it: a routine (periodic or final) save then carries the storage cause.
    """
    active = [(f, c) for s, e, f, c in run.storage if s <= run.t < e]
    factor = float(np.prod([f for f, _ in active] or [1.0]))
    end = run.t + run.jitter(run.spec.save_s * factor)
    failed = _fail(run, base, end, limit, first_step, last_progress=run.progress)
    if failed:
        return failed
    if trigger in ("periodic", "final") and active:
        cause = active[0][1]
    run.ckpts.append(Checkpoint("save", base["number"], run.it, run.t, end, trigger, cause))
    run.saved_it, run.t, run.progress = run.it, end, end
    return None


def _clean_exit(
    run: _Run, base: dict, state: str, first_step: int, sigterm: int | None = None, cause: Cause | None = None
) -> Attempt:
    return Attempt(
        **base,
        end=run.t + EXIT_US,
        state=state,
        exit_code=EXIT_CODES[state],
        first_step=first_step,
        last_progress=run.progress,
        sigterm=sigterm,
        cause=cause,
    )
