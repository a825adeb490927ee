"""The job model: a JobSpec and its Disturbances in, the timeline of every attempt, launch, step and
checkpoint out (the dataclasses: simulate/timeline.py).

Time is integer microseconds since the Unix epoch (UTC) throughout, so the tax buckets computed from it
partition the wall time exactly. Steps are generated a segment at a time with numpy (a segment ends at
the next save, a change of slowdown factor, a failure or a preemption), so a 10^5-step job costs a few
hundred vector operations, not 10^5 Python iterations.

Megatron semantics modelled: periodic saves at ``iteration % save_every == 0`` (blocking); a SIGTERM
is acted on after the step in progress (save, then exit); a crash leaves the in-flight step unfinished
and the process hangs until it exits; a requeued attempt restores the last completed save. Under
torchrun with ``elastic_restarts`` the failed worker group is restarted in place (same Slurm attempt):
the agent stops the other workers, re-runs the rendezvous, and the new workers start up and restore.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from synestra_cli.simulate.model import Cause, Disturbance, JobSpec
from synestra_cli.simulate.timeline import (
    EXIT_CODES,
    EXIT_US,
    US,
    Attempt,
    Checkpoint,
    Failure,
    JobTimeline,
    Launch,
    Steps,
    attempt_of,
    to_us,
)

__all__ = ["EXIT_CODES", "EXIT_US", "US", "Attempt", "JobTimeline", "Launch", "simulate_job", "to_us"]

STEP_NOISE_SIGMA = 0.015  # lognormal sigma of step times: ~1.5% run-to-run jitter
PHASE_NOISE_SIGMA = 0.05  # startup, save and restore durations vary more
WARMUP_SHARE = 0.1  # share of startup_s spent in the training loop before the first step
LOST_INIT_SHARE = 0.15  # a worker on a lost device dies this far into its start-up (its CUDA context)


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
    chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]] = field(default_factory=list)
    lost: list[tuple[int, int, Disturbance]] = field(default_factory=list)  # (from, until, crash): a dead device

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
    run = _Run(spec, rng, slow, storage, sorted(crashes, key=lambda x: x[0]), sorted(preempts, key=lambda x: x[0]))
    run.lost = [(at, to_us(d.lost_until), d) for at, d in run.crashes if d.lost_until is not None]
    return run


def simulate_job(spec: JobSpec, rng: np.random.Generator) -> JobTimeline:
    """Run the job through its disturbances: attempts until it completes or times out."""
    run = _parse(spec, rng)
    attempts: list[Attempt] = []
    launches: list[Launch] = []
    t = to_us(spec.start)
    while True:
        number = len(attempts) + 1
        mine = _attempt_launches(run, number, launches[-1] if launches else None, t, len(launches))
        launches += mine
        state = "REQUEUED" if spec.self_requeue and mine[-1].state == "FAILED" else mine[-1].state
        attempts.append(attempt_of(number, mine, state))
        if state in ("COMPLETED", "TIMEOUT"):
            break
        t = attempts[-1].end + run.jitter(spec.requeue_s)
    return JobTimeline(
        spec,
        tuple(attempts),
        tuple(run.ckpts),
        _steps(run.chunks),
        _windows(run, to_us(spec.start), attempts[-1].end),
        tuple(launches),
    )


def _steps(chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]) -> Steps:
    if not chunks:
        empty = np.zeros(0, dtype=np.int64)
        return Steps(empty, empty, empty, empty, empty)
    return Steps(
        np.concatenate([c[0] for c in chunks]),
        np.concatenate([c[1] for c in chunks]),
        np.concatenate([c[2] for c in chunks]),
        np.concatenate([np.full(len(c[0]), c[3], dtype=np.int64) for c in chunks]),
        np.concatenate([np.full(len(c[0]), c[4], dtype=np.int64) for c in chunks]),
    )


def _windows(run: _Run, start: int, end: int) -> tuple[tuple[int, int], ...]:
    return tuple((max(s, start), min(e, end)) for s, e, _, _ in run.slow if s < end and e > start)


def _restore_reason(prev: Launch | None) -> tuple[str, Cause | None]:
    if prev is not None and prev.state == "PREEMPTED":
        return "preemption", prev.cause
    return "restart", prev.cause if prev else None


def _attempt_launches(run: _Run, number: int, prev: Launch | None, t0: int, before: int) -> list[Launch]:
    """The launches of one Slurm attempt: one, or (torchrun) more while a failed worker group is restarted
    in place and restarts are left. A time limit, a preemption or a node failure ends the attempt."""
    spec = run.spec
    limit = t0 + round(spec.time_limit_s * US)
    out: list[Launch] = []
    left, t = spec.elastic_restarts, t0
    while True:
        launch = _launch(run, number, before + len(out) + 1, prev, t, limit, in_place=bool(out))
        out.append(launch)
        crashed = launch.failure is not None and launch.failure.incident not in (None, "node_failure")
        if launch.state != "FAILED" or not crashed or left == 0:
            return out
        left -= 1
        t = launch.end + run.jitter(spec.elastic_restart_s)
        if t >= limit:
            return out
        prev = launch


def _launch(run: _Run, attempt: int, number: int, prev: Launch | None, t0: int, limit: int, in_place: bool) -> Launch:
    """One launch: startup, restore of the last save (if any), then training until it ends."""
    spec = run.spec
    run.t, run.it, run.streak = t0, run.saved_it, None
    base: dict = {"number": number, "attempt": attempt, "start": t0, "resume_iteration": run.saved_it}
    lost = next((d for at, until, d in run.lost if at <= t0 < until), None) if in_place else None
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
        if lost is not None:  # restarted on a device that is still gone: the new worker dies in its start-up
            return _lost(run, base, lost, limit)
        end = run.t + run.jitter(seconds)
        failed = _fail(run, base, end, limit, first_step=None)
        if failed:
            return failed
        if phase == "init":
            base["init_end"] = end
        if phase == "restore":
            trigger, cause = _restore_reason(prev)
            run.ckpts.append(Checkpoint("restore", attempt, run.saved_it, run.t, end, trigger, cause, number))
        run.t = end
    run.progress = run.t
    return _train(run, base, limit, first_step=run.t)


def _lost(run: _Run, base: dict, d: Disturbance, limit: int) -> Launch:
    """A worker restarted in place on a lost device fails as soon as it touches it (its CUDA context)."""
    at = min(run.t + run.jitter(run.spec.startup_s * LOST_INIT_SHARE), limit)
    failure = Failure(at, "cuda_error", d.rank, d.cause, d.lost_error)
    state = "FAILED" if at < limit else "TIMEOUT"
    return Launch(
        **base,
        end=at + EXIT_US if at < limit else limit,
        state=state,
        first_step=at,
        last_progress=at,
        failure=failure if at < limit else Failure(limit, None, None, None),
        cause=d.cause if at < limit else None,
        noticed=at,
    )


def _fail(
    run: _Run, base: dict, until: int, limit: int, first_step: int | None, last_progress: int | None = None
) -> Launch | None:
    """The launch's end if a crash or the time limit strikes in [run.t, until), else None.

    Without a completed step, the failure itself is the launch's first step and last progress: the
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
        noticed = at + round(d.hang_s * US)  # the hung collective began at the fault
        return Launch(
            **base,
            end=noticed + EXIT_US,
            state=d.exit_state,
            first_step=first,
            last_progress=progress,
            failure=Failure(at, d.incident, d.rank, d.cause),
            cause=d.cause,
            noticed=noticed,
        )
    return Launch(
        **base,
        end=limit,
        state="TIMEOUT",
        first_step=first,
        last_progress=progress,
        failure=Failure(limit, None, None, None),
        noticed=limit,
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


def _train(run: _Run, base: dict, limit: int, first_step: int) -> Launch:
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
        _commit(run, base, starts, ends, streak, c)
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


def _commit(run: _Run, base: dict, starts: np.ndarray, ends: np.ndarray, streak: np.ndarray, c: int) -> None:
    if c == 0:
        return
    iterations = run.it + 1 + np.arange(c, dtype=np.int64)
    run.chunks.append((iterations, starts[:c].copy(), ends[:c].copy(), base["attempt"], base["number"]))
    run.it += c
    run.t = run.progress = int(ends[c - 1])
    run.streak = int(streak[c - 1]) if streak[c - 1] >= 0 else None


def _save(run: _Run, base: dict, trigger: str, cause: Cause | None, limit: int, first_step: int) -> Launch | None:
    """A blocking save at the current iteration; the failed launch if a crash cuts it short.

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
    run.ckpts.append(Checkpoint("save", base["attempt"], run.it, run.t, end, trigger, cause, base["number"]))
    run.saved_it, run.t, run.progress = run.it, end, end
    return None


def _clean_exit(
    run: _Run, base: dict, state: str, first_step: int, sigterm: int | None = None, cause: Cause | None = None
) -> Launch:
    return Launch(
        **base,
        end=run.t + EXIT_US,
        state=state,
        first_step=first_step,
        last_progress=run.progress,
        sigterm=sigterm,
        cause=cause,
        noticed=sigterm,
    )
