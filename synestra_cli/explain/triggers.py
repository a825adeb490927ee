"""Classify each checkpoint: periodic, reactive, restart, preemption, final or unknown.

The save cadence is learned from the job itself: Megatron saves when iteration % save_interval == 0,
so the cadence is the interval whose multiples the job saved at, without skipping many (ties go to
the "rounder" number, as people choose intervals like 500 or 1000, then to the larger one).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import quantiles

import duckdb

from synestra_cli.explain.rules import (
    EXIT_SIGNAL_MARK,
    HEALTHY_SAVE_PAIR_RATIO,
    HEALTHY_SAVE_QUARTERS,
    OK_STATES,
    PREEMPT_SAVE_S,
    PREEMPT_STATES,
    SIGTERM_STATES,
    SKEW_S,
    SLOW_SAVE_FACTOR,
)
from synestra_cli.signals.events import Incident
from synestra_cli.signals.scope import Attempt

# Incidents that say the attempt ended for another reason than a preemption (a SIGTERM logged with them is the
# scheduler or torchrun stopping what was left).
ENDED_OTHERWISE = ("nccl_timeout", "nccl_error", "cuda_error", "python_exception", "oom", "job_end", "task_exit")
SLURM_PREEMPTION = "DUE TO PREEMPTION"

# Async saves log a scheduled and a finalized line: one checkpoint per (attempt, kind, iteration).
CHECKPOINTS_SQL = """
SELECT c.job_id, c.attempt, c.kind, c.iteration, min(c.start_ts) AS start_ts,
       max(coalesce(c.end_ts, c.start_ts)) AS end_ts, max(c.blocking_s), bool_or(coalesce(c.is_async, false)),
       arg_min(s.path, c.line), min(c.line),
       CASE WHEN bool_and(c.ts_precision = 'exact') THEN 'exact' WHEN bool_or(c.ts_precision = 'bounded') THEN 'bounded'
            ELSE min(c.ts_precision) END
FROM checkpoints_reconciled c LEFT JOIN sources s ON s.source_id = c.source_id
WHERE c.job_id IN (SELECT unnest($jobs)) GROUP BY c.job_id, c.attempt, c.kind, c.iteration
ORDER BY c.job_id, coalesce(min(c.start_ts), max(c.end_ts)), c.kind DESC, c.attempt, c.iteration
"""
LAST_ITERATION_SQL = """
SELECT job_id, attempt, max(iteration) FROM steps_reconciled WHERE job_id IN (SELECT unnest($jobs)) GROUP BY ALL
"""


@dataclass(frozen=True)
class Checkpoint:
    attempt: int | None
    kind: str  # save | restore
    iteration: int | None
    start: datetime | None
    end: datetime | None
    blocking_s: float | None
    is_async: bool
    path: str | None  # the log file that reports it
    line: int | None
    # exact: its lines' own times; bounded: between the dated lines around it; inferred: its neighbours' times
    precision: str | None = None

    @property
    def duration_s(self) -> float | None:
        if self.blocking_s is not None:
            return self.blocking_s
        if self.start and self.end:
            return (self.end - self.start).total_seconds()
        return None


@dataclass(frozen=True)
class Classified:
    checkpoint: Checkpoint
    trigger: str
    slow: bool  # a save that took abnormally long


def load_checkpoints(conn: duckdb.DuckDBPyConnection, job_id: str) -> list[Checkpoint]:
    return load_checkpoints_for(conn, [job_id])[job_id]


def load_checkpoints_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, list[Checkpoint]]:
    """load_checkpoints for many jobs in one query (a fleet's tax-report)."""
    out: dict[str, list[Checkpoint]] = {j: [] for j in job_ids}
    for job, *row in conn.execute(CHECKPOINTS_SQL, {"jobs": list(job_ids)}).fetchall():
        out[job].append(Checkpoint(*row))
    return out


def last_iterations_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, dict[int | None, int]]:
    """Per job, the last iteration printed in each attempt."""
    out: dict[str, dict[int | None, int]] = {j: {} for j in job_ids}
    for job, attempt, it in conn.execute(LAST_ITERATION_SQL, {"jobs": list(job_ids)}).fetchall():
        out[job][attempt] = it
    return out


def learn_cadence(iterations: list[int]) -> int | None:
    """The save interval (in iterations) that best explains the save iterations: multiples saved
    minus multiples skipped within the saved span (so a small common divisor does not win).
    None when no interval is seen at least twice: too little evidence to call a save periodic.
    Trainers that number a step by its zero-based index (NeMo 2's Megatron-core lines, MaxText) save
    at iteration % interval == interval - 1: the cadence is learned in the numbering that fits best."""
    return _learn_cadence(iterations, cadence_phase(iterations))


def cadence_phase(iterations: list[int]) -> int:
    """0 when the saves fall on multiples of their interval as numbered, 1 when they do one step later
    (a zero-based numbering of steps completed): what to add to an iteration before testing a multiple."""
    scores = []
    for phase in (0, 1):
        c = _learn_cadence(iterations, phase)
        its = {i + phase for i in iterations if i is not None and i + phase > 0}
        hits = sum(i % c == 0 for i in its) if c else -1
        # the other numbering only on evidence: three saves on it, or two on a round interval
        if phase and not (hits >= 3 or (hits >= 2 and c is not None and c % 10 == 0)):
            hits = -1
        scores.append((hits, -phase))
    return -max(scores)[1]


def _learn_cadence(iterations: list[int], phase: int) -> int | None:
    its = sorted({i + phase for i in iterations if i is not None and i + phase > 0})
    candidates = {b - a for a, b in zip(its, its[1:], strict=False)} | set(its)
    if not candidates:
        return None

    def score(c: int) -> tuple[int, int, int]:
        hits = sum(i % c == 0 for i in its)
        expected = its[-1] // c - (its[0] - 1) // c
        zeros = len(str(c)) - len(str(c).rstrip("0"))
        return 2 * hits - expected, zeros, c

    best = max(candidates, key=score)
    hits = sum(i % best == 0 for i in its)
    return best if hits >= 2 and score(best)[0] > 0 else None


def preempted(attempt: Attempt | None, incidents: list[Incident]) -> bool:
    """The scheduler took the attempt's nodes back: sacct says PREEMPTED, or Slurm's own `DUE TO PREEMPTION`
    line is in the log. A SIGTERM the job logged (torchrun's agent, Megatron's exit-signal handler) is one only
    where nothing else ended the attempt: no crash, no failed worker, none of Slurm's other job-end lines
    (node failure, requeue, time limit, task failure: formats/training/slurm_lines.py), and no other sacct state than
    CANCELLED. A requeue alone is never a preemption."""
    if attempt is None:
        return False
    state = (attempt.state or "").upper()
    mine = [i for i in incidents if i.attempt == attempt.attempt]
    slurm_says = any(i.kind == "sigterm" and SLURM_PREEMPTION in (i.message or "") for i in mine)
    if state.startswith(PREEMPT_STATES) or slurm_says:
        return True
    if state and not state.startswith(SIGTERM_STATES):
        return False  # sacct says how it ended: FAILED, NODE_FAIL, REQUEUED, TIMEOUT, COMPLETED ...
    ended_otherwise = any(
        i.kind in ENDED_OTHERWISE or (i.kind == "worker_failed" and i.signal != "SIGTERM") for i in mine
    )
    return not ended_otherwise and any(i.kind == "sigterm" for i in mine)


def exit_report(i: Incident) -> bool:
    """Megatron's exit-signal handler: logged after the save it made, when the process exits."""
    return i.kind == "sigterm" and EXIT_SIGNAL_MARK in (i.message or "")


def _is_preemption_save(cp: Checkpoint, att: Attempt | None, ctx: _Context) -> bool:
    """The save the job made because the scheduler signalled it: at or after a SIGTERM whose arrival is
    logged (Slurm's notice, torchrun), else the attempt's last save with no training after it, just
    before the handler's exit line or the attempt's preempted end."""
    if not preempted(att, ctx.incidents) or cp.start is None:
        return False
    skew = timedelta(seconds=SKEW_S)
    mine = [i for i in ctx.incidents if i.kind == "sigterm" and i.attempt == cp.attempt and i.ts]
    arrived = [i.ts for i in mine if i.ts and not exit_report(i)]
    if arrived:
        return cp.start >= min(arrived) - skew
    last = max((s.start for s in ctx.saves if s.attempt == cp.attempt and s.start), default=None)
    if cp.start != last or (cp.iteration or 0) < ctx.last_iterations.get(cp.attempt, 0):
        return False  # training went on after it: an ordinary save
    exits = [i.ts for i in mine if i.ts and exit_report(i)]
    end = min(exits) if exits else att.end if att else None
    return end is None or -SKEW_S <= (end - cp.start).total_seconds() <= PREEMPT_SAVE_S


def _save_trigger(cp: Checkpoint, ctx: _Context) -> str:
    if cp.iteration is None:
        return "unknown"
    att = ctx.attempts.get(cp.attempt) if cp.attempt is not None else None
    if _is_preemption_save(cp, att, ctx):
        return "preemption"
    if cp is ctx.saves[-1] and ctx.job_finished and cp.iteration >= ctx.max_iteration:
        return "final"
    if ctx.cadence is None:
        return "unknown"  # no cadence to be off: too few saves to tell periodic from reactive
    return "periodic" if (cp.iteration + ctx.phase) % ctx.cadence == 0 else "reactive"


def _restore_trigger(cp: Checkpoint, ctx: _Context) -> str:
    ordered = sorted(ctx.attempts)
    prev = [a for a in ordered if cp.attempt is not None and a < cp.attempt]
    elastic = [
        i
        for i in ctx.incidents
        if i.kind == "elastic_restart" and i.attempt == cp.attempt and i.ts and cp.start and i.ts <= cp.start
    ]
    if elastic:
        return "restart"
    if not prev:
        return "unknown"
    return "preemption" if preempted(ctx.attempts[prev[-1]], ctx.incidents) else "restart"


@dataclass
class _Context:
    attempts: dict[int, Attempt]
    saves: list[Checkpoint]
    incidents: list[Incident]
    cadence: int | None
    phase: int  # cadence_phase: 1 where steps are numbered from zero
    max_iteration: int
    job_finished: bool
    last_iterations: dict[int | None, int]


def healthy_save_s(durations: list[float]) -> float | None:
    """The job's healthy save duration: the lower quartile of its saves (interpolated between them);
    or, when that quartile is itself slow against the job's fastest pair of like saves, that pair's
    faster one (rules.HEALTHY_SAVE_PAIR_RATIO)."""
    if len(durations) < 2:
        return durations[0] if durations else None
    quartile = quantiles(durations, n=HEALTHY_SAVE_QUARTERS, method="inclusive")[0]
    fast = _fastest_pair(sorted(durations))
    return fast if fast is not None and quartile > SLOW_SAVE_FACTOR * fast else quartile


def _fastest_pair(ordered: list[float]) -> float | None:
    """The shortest duration that a second save comes within HEALTHY_SAVE_PAIR_RATIO of (None: no pair)."""
    return next((a for a, b in itertools.pairwise(ordered) if b <= HEALTHY_SAVE_PAIR_RATIO * a), None)


def classify(
    conn: duckdb.DuckDBPyConnection,
    job_id: str,
    attempts: list[Attempt],
    incidents: list[Incident],
    checkpoints: list[Checkpoint],
    last_iterations: dict[int | None, int] | None = None,
) -> list[Classified]:
    """Trigger of every checkpoint, and whether each save took abnormally long (`last_iterations`:
    per attempt, read here unless given)."""
    saves = [c for c in checkpoints if c.kind == "save"]
    last_its = last_iterations_for(conn, [job_id])[job_id] if last_iterations is None else last_iterations
    max_it = max([*last_its.values(), *[c.iteration or 0 for c in saves]], default=0)
    last_att = max(attempts, key=lambda a: a.attempt, default=None)
    crashed_last = any(i.kind != "sigterm" and i.attempt == (last_att.attempt if last_att else None) for i in incidents)
    finished = (
        last_att is None
        or (last_att.state is None and not crashed_last)
        or (last_att.state or "").upper().startswith(OK_STATES)
    )
    ctx = _Context(
        {a.attempt: a for a in attempts},
        saves,
        incidents,
        learn_cadence([c.iteration for c in saves if c.iteration is not None]),
        cadence_phase([c.iteration for c in saves if c.iteration is not None]),
        max_it,
        finished,
        last_its,
    )
    typical = healthy_save_s([d for c in saves if (d := c.duration_s) is not None])
    out = []
    for cp in checkpoints:
        trigger = _save_trigger(cp, ctx) if cp.kind == "save" else _restore_trigger(cp, ctx)
        slow = bool(cp.kind == "save" and typical and cp.duration_s and cp.duration_s > SLOW_SAVE_FACTOR * typical)
        out.append(Classified(cp, trigger, slow))
    return out
