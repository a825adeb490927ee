"""`explain_job`: every checkpoint of a job, classified and (when not routine) attributed.

The JSON document (`to_json`) is the versioned schema `synestra.explain/1` (docs/explain.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.reason import Cause, Evidence, reason
from synestra_cli.explain.rules import LOOKBACK_S, POST_WINDOW_S, SCHEMA
from synestra_cli.explain.triggers import Classified, classify, learn_cadence, load_checkpoints
from synestra_cli.signals.anomalies import anomalies, build_scope
from synestra_cli.signals.events import incidents, typed_events
from synestra_cli.signals.scope import JobScope, load_scope
from synestra_cli.signals.steps import degradation_windows

JOBS_IN_WINDOW_SQL = """
SELECT job_id FROM (
    SELECT job_id, min(start_ts) AS s, max(coalesce(end_ts, start_ts)) AS e FROM checkpoints GROUP BY job_id
    UNION ALL SELECT job_id, min(start_ts), max(coalesce(end_ts, start_ts)) FROM attempts GROUP BY job_id
) GROUP BY job_id
HAVING ($since IS NULL OR max(e) >= $since) AND ($until IS NULL OR min(s) <= $until)
ORDER BY job_id
"""


@dataclass
class CheckpointExplanation:
    kind: str
    attempt: int | None
    iteration: int | None
    start: datetime | None
    end: datetime | None
    duration_s: float | None
    trigger: str
    slow: bool
    cause: Cause | None
    chain: list[ChainLink] = field(default_factory=list)
    alternatives: list[Cause] = field(default_factory=list)

    @property
    def routine(self) -> bool:
        return self.cause is None


@dataclass
class JobExplanation:
    job: str
    hosts: list[str]
    attempts: int
    cadence: int | None
    checkpoints: list[CheckpointExplanation]

    def to_json(self) -> dict[str, Any]:
        """The `synestra.explain/1` document (datetimes still as datetime: render serialises them)."""
        return {
            "schema": SCHEMA,
            "job": self.job,
            "hosts": self.hosts,
            "attempts": self.attempts,
            "save_cadence_iterations": self.cadence,
            "checkpoints": [_checkpoint_json(c) for c in self.checkpoints],
        }


def _cause_json(c: Cause) -> dict[str, Any]:
    return {
        "category": c.category,
        "host": c.host,
        "component": c.component,
        "first_signal": c.first_signal,
        "confidence": c.confidence,
        "reported_healthy": c.reported_healthy,
    }


def _checkpoint_json(c: CheckpointExplanation) -> dict[str, Any]:
    return {
        "kind": c.kind,
        "attempt": c.attempt,
        "iteration": c.iteration,
        "start": c.start,
        "end": c.end,
        "duration_s": c.duration_s,
        "trigger": c.trigger,
        "slow": c.slow,
        "cause": _cause_json(c.cause) if c.cause else None,
        "chain": [asdict(lk) for lk in c.chain],
        "alternatives": [_cause_json(a) for a in c.alternatives],
    }


def _selected(
    items: list[Classified], checkpoint: int | None, since: datetime | None, until: datetime | None
) -> list[Classified]:
    out = [c for c in items if checkpoint is None or c.checkpoint.iteration == checkpoint]
    t = [(c, c.checkpoint.start or c.checkpoint.end) for c in out]
    return [c for c, ts in t if (since is None or (ts and ts >= since)) and (until is None or (ts and ts <= until))]


def _evidence(conn: duckdb.DuckDBPyConnection, scope: JobScope, items: list[Classified], inc: list) -> Evidence:
    """Telemetry and events of the job's hosts, read once, only when some checkpoint needs a cause."""
    windows = degradation_windows(conn, scope.job_id)
    times = [t for c in items for t in (c.checkpoint.start, c.checkpoint.end) if t]
    times += [t for t in (scope.start, scope.end) if t]
    needs = any(c.trigger in ("restart", "reactive") or c.slow for c in items)
    if not needs or not times:
        return Evidence(scope, [], windows, inc)
    t0 = min(times) - timedelta(seconds=LOOKBACK_S)
    t1 = max(times) + timedelta(seconds=POST_WINDOW_S)
    build_scope(conn, scope, t0, t1)
    ports = {(lk.switch, lk.switch_port) for lk in scope.links if lk.switch}
    switches = sorted({p[0] for p in ports} - set(scope.hosts))
    events = [
        e
        for e in typed_events(conn, scope.hosts + switches, t0, t1)
        if e.host in scope.hosts or (e.host, e.component) in ports
    ]
    signals = [*anomalies(conn), *events]
    return Evidence(scope, signals, windows, inc)


def explain_job(
    conn: duckdb.DuckDBPyConnection,
    job_id: str,
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> JobExplanation:
    """Explain the job's checkpoints (optionally one iteration, or those in [since, until])."""
    scope = load_scope(conn, job_id)
    cps = load_checkpoints(conn, job_id)
    inc = incidents(conn, job_id)
    classified = classify(conn, job_id, scope.attempts, inc, cps)
    chosen = _selected(classified, checkpoint, since, until)
    if checkpoint is not None and not chosen:
        raise NotFoundError(
            f"job {job_id} has no checkpoint at iteration {checkpoint}: "
            f"run `synestra explain --job {job_id}` to list them"
        )
    ev = _evidence(conn, scope, chosen, inc)
    out = []
    for cl in chosen:
        r = reason(cl, ev)
        cp = cl.checkpoint
        out.append(
            CheckpointExplanation(
                cp.kind,
                cp.attempt,
                cp.iteration,
                cp.start,
                cp.end,
                cp.duration_s,
                cl.trigger,
                cl.slow,
                r.cause,
                r.chain,
                r.alternatives,
            )
        )
    cadence = learn_cadence([c.iteration for c in cps if c.kind == "save" and c.iteration])
    return JobExplanation(job_id, scope.hosts, len(scope.attempts), cadence, out)


def jobs_in_window(
    conn: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[str]:
    """Jobs with checkpoints or attempts overlapping [since, until] (--all)."""
    rows = conn.execute(JOBS_IN_WINDOW_SQL, {"since": since, "until": until}).fetchall()
    if not rows and not conn.execute("SELECT count(*) FROM jobs").fetchone()[0]:
        raise EmptyStoreError("the store holds no jobs: ingest job logs or sacct first")
    return [r[0] for r in rows]
