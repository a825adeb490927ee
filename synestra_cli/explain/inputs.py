"""What explain reads of a job before its telemetry, for one job or for a whole fleet at once.

A job's scope, checkpoints, incidents, last iterations and step-time degradation windows come from the
store's reconciled job views, which DuckDB recomputes for every query: read one job at a time, a fleet's
cold tax-report paid those views ~190 times over (192 campus jobs, ~10 queries each). `inputs_for`
reads them for every job in six to eight queries and hands each job its own rows; each loader is the
same query for one job as for many (signals/scope.py, signals/events.py, explain/triggers.py,
signals/steps.py), so a job explained from the fleet's inputs is explained exactly as on its own
(tests/test_explain_batch.py compares the JSON byte for byte).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from synestra_cli.explain.triggers import Checkpoint, last_iterations_for, load_checkpoints_for
from synestra_cli.signals.anomalies import Comparable, disjoint
from synestra_cli.signals.collectives import Laggard, laggards_for
from synestra_cli.signals.events import Incident, incidents_for
from synestra_cli.signals.lifecycle import Lifecycle, lifecycles_for
from synestra_cli.signals.scope import JobScope, load_scope, load_scopes
from synestra_cli.signals.steps import DegradationWindow, degradation_windows_for, training_spans_for
from synestra_cli.store.parallel import default_workers, map_in_threads


@dataclass(frozen=True)
class JobInputs:
    scope: JobScope
    checkpoints: list[Checkpoint]
    incidents: list[Incident]
    last_iterations: dict[int | None, int]  # per attempt, the last iteration printed
    windows: list[DegradationWindow]  # step-time degradation windows, in onset order
    lifecycle: Lifecycle  # its log segments and the marks that date its restarts (signals/lifecycle.py)
    laggards: list[Laggard]  # ranks the Flight Recorder finds behind in a collective (signals/collectives.py)
    # per attempt, its first and last iteration lines (signals/steps.py training_spans_for)
    training: dict[int | None, tuple[datetime, datetime]] = field(default_factory=dict)


def comparable(inputs: JobInputs) -> Comparable:
    """The job's own idle spans, whose samples make no baseline (signals/anomalies.py COMPARABLE_SQL):
    its saves and restores; and, when it logged iteration lines, every stretch of its span (its attempts'
    first start to last end) outside its training spans (an attempt's first to last iteration line; an
    attempt that logged none, its whole span): start-ups, hangs, the exits and the gaps between attempts.
    The samples before and after the job are the hosts' own and stay comparable."""
    idle = [(c.start, c.end) for c in inputs.checkpoints if c.start and c.end and c.start <= c.end]
    if inputs.training:  # else nothing tells when it computed
        timed = [(a.attempt, a.start, a.end) for a in inputs.scope.attempts if a.start and a.end]
        untrained = [(lo, hi) for n, lo, hi in timed if n not in inputs.training]
        busy = disjoint([*inputs.training.values(), *untrained])
        span = [t for s in busy for t in s] + [t for _, lo, hi in timed for t in (lo, hi)]
        idle += gaps(busy, min(span), max(span))
    return Comparable(disjoint(idle))


def gaps(busy: list[tuple[datetime, datetime]], lo: datetime, hi: datetime) -> list[tuple[datetime, datetime]]:
    """The stretches of lo..hi outside the sorted, disjoint busy spans."""
    out, at = [], lo
    for b_lo, b_hi in busy:
        if b_lo > at:
            out.append((at, b_lo))
        at = max(at, b_hi)
    return out + ([(at, hi)] if hi > at else [])


def job_inputs(conn: duckdb.DuckDBPyConnection, job_id: str) -> JobInputs:
    """One job's inputs; NotFoundError / EmptyStoreError when the store does not hold it."""
    jobs = [job_id]
    reads: list[Read] = [
        lambda c: {job_id: load_scope(c, job_id)},  # raises first, with how to fix it
        lambda c: load_checkpoints_for(c, jobs),
        lambda c: incidents_for(c, jobs),
        lambda c: last_iterations_for(c, jobs),
        lambda c: degradation_windows_for(c, jobs),
        lambda c: lifecycles_for(c, jobs),
        lambda c: laggards_for(c, jobs),
        lambda c: training_spans_for(c, jobs),
    ]
    scopes, checkpoints, incidents, last, windows, life, lag, train = _read_together(conn, reads)
    return JobInputs(
        scopes[job_id],
        checkpoints[job_id],
        incidents[job_id],
        last[job_id],
        windows.get(job_id, []),
        life[job_id],
        lag[job_id],
        train.get(job_id, {}),
    )


def inputs_for(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: dict[str, list[DegradationWindow]] | None = None
) -> dict[str, JobInputs]:
    """Every job's inputs in a few queries, for jobs known to be in the store (jobs_in_window);
    `windows`: their degradation windows, when read already (degradation_windows_for: tax-report's)."""
    reads: list[Read] = [
        lambda c: load_scopes(c, job_ids),
        lambda c: load_checkpoints_for(c, job_ids),
        lambda c: incidents_for(c, job_ids),
        lambda c: last_iterations_for(c, job_ids),
        lambda c: degradation_windows_for(c, job_ids) if windows is None else windows,
        lambda c: lifecycles_for(c, job_ids),
        lambda c: laggards_for(c, job_ids),
        lambda c: training_spans_for(c, job_ids),
    ]
    scopes, checkpoints, incidents, last, read, life, lag, train = _read_together(conn, reads)
    return {
        j: JobInputs(
            scopes[j], checkpoints[j], incidents[j], last[j], read.get(j, []), life[j], lag[j], train.get(j, {})
        )
        for j in job_ids
    }


# Each read is a few queries over the job views, whose cost is mostly DuckDB planning them (the views nest
# the reconciliation of sacct and log attempts): one core each, so two run at once on their own cursors.
Read = Callable[[duckdb.DuckDBPyConnection], dict[str, Any]]


def _read_together(conn: duckdb.DuckDBPyConnection, reads: list[Read]) -> list[dict[str, Any]]:
    return list(map_in_threads(conn, lambda c, read: read(c), reads, default_workers("SYNESTRA_WORKERS")))
