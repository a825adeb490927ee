"""What explain reads of a job before its telemetry, for one job or for a whole fleet at once.

A job's scope, checkpoints, incidents, last iterations and step-time degradation windows come from the
store's reconciled job views, which DuckDB recomputes for every query: read one job at a time, a fleet's
cold tax-report paid those views ~190 times over (192 campus jobs, ~10 queries each). `inputs_for`
reads them for every job in five to seven queries and hands each job its own rows; each loader is the
same query for one job as for many (signals/scope.py, signals/events.py, explain/triggers.py,
signals/steps.py), so a job explained from the fleet's inputs is explained exactly as on its own
(tests/test_explain_batch.py compares the JSON byte for byte).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from synestra_cli.explain.triggers import Checkpoint, last_iterations_for, load_checkpoints_for
from synestra_cli.signals.events import Incident, incidents_for
from synestra_cli.signals.scope import JobScope, load_scope, load_scopes
from synestra_cli.signals.steps import DegradationWindow, degradation_windows_for


@dataclass(frozen=True)
class JobInputs:
    scope: JobScope
    checkpoints: list[Checkpoint]
    incidents: list[Incident]
    last_iterations: dict[int | None, int]  # per attempt, the last iteration printed
    windows: list[DegradationWindow]  # step-time degradation windows, in onset order


def job_inputs(conn: duckdb.DuckDBPyConnection, job_id: str) -> JobInputs:
    """One job's inputs; NotFoundError / EmptyStoreError when the store does not hold it."""
    scope = load_scope(conn, job_id)  # raises first, with how to fix it
    return _assemble(conn, {job_id: scope})[job_id]


def inputs_for(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: dict[str, list[DegradationWindow]] | None = None
) -> dict[str, JobInputs]:
    """Every job's inputs in a few queries, for jobs known to be in the store (jobs_in_window);
    `windows`: their degradation windows, when read already (degradation_windows_for: tax-report's)."""
    return _assemble(conn, load_scopes(conn, job_ids), windows)


def _assemble(
    conn: duckdb.DuckDBPyConnection,
    scopes: dict[str, JobScope],
    windows: dict[str, list[DegradationWindow]] | None = None,
) -> dict[str, JobInputs]:
    jobs = list(scopes)
    checkpoints = load_checkpoints_for(conn, jobs)
    incidents = incidents_for(conn, jobs)
    last = last_iterations_for(conn, jobs)
    windows = degradation_windows_for(conn, jobs) if windows is None else windows
    return {j: JobInputs(scopes[j], checkpoints[j], incidents[j], last[j], windows.get(j, [])) for j in jobs}
