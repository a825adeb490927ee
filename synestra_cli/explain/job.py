"""`explain_job`: every checkpoint and failure of a job, classified and (when not routine) attributed; the
objects it returns, and their JSON document, are in explain/explanation.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import duckdb

from synestra_cli import progress
from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.explain.assets import AssetBook, load_book
from synestra_cli.explain.evidence import Cause, Evidence, crashes_of
from synestra_cli.explain.explanation import (
    CheckpointExplanation,
    FailureExplanation,
    JobExplanation,
    precision_of,
)
from synestra_cli.explain.inputs import JobInputs, comparable, job_inputs
from synestra_cli.explain.loops import cause_key, restart_doc, restart_loops
from synestra_cli.explain.plan import Plan, plan, plan_attempt_failure
from synestra_cli.explain.reason import reason, reason_failure
from synestra_cli.explain.restarts import Restart, restarts, with_first_signal
from synestra_cli.explain.rules import (
    FAILED_STATES,
    LOOKBACK_S,
    PERSIST_READ_S,
    POST_WINDOW_S,
    PRE_WINDOW_S,
)
from synestra_cli.explain.runbook import enrich
from synestra_cli.explain.triggers import Classified, classify, learn_cadence, preempted
from synestra_cli.signals.activity import straggler_host
from synestra_cli.signals.anomalies import Anomaly, anomalies
from synestra_cli.signals.events import Event, typed_events
from synestra_cli.signals.peers import peer_outliers
from synestra_cli.signals.scope import ANY_JOB_SQL, Attempt, JobScope
from synestra_cli.signals.scope_samples import stage_scope
from synestra_cli.store.parallel import default_workers, map_in_threads
from synestra_cli.store.series import has_series_layout
from synestra_cli.store.sql import scalar

if TYPE_CHECKING:  # the fleet's read (explain/batch.py) is not imported to explain one job
    from synestra_cli.signals.fleet_events import EventRead
    from synestra_cli.signals.fleet_telemetry import JobTelemetry

JOBS_IN_WINDOW_SQL = """
SELECT job_id FROM (
    SELECT job_id, min(start_ts) AS s, max(coalesce(end_ts, start_ts)) AS e FROM checkpoints GROUP BY job_id
    UNION ALL SELECT job_id, min(start_ts), max(coalesce(end_ts, start_ts)) FROM attempts GROUP BY job_id
) GROUP BY job_id
HAVING ($since IS NULL OR max(e) >= $since) AND ($until IS NULL OR min(s) <= $until)
ORDER BY job_id
"""


def unexplained_failures(scope: JobScope, classified: list[Classified], inc: list) -> list[Attempt]:
    """Attempts that failed (a failed Slurm state or a crash in the job's log, and not preempted)
    that no restart restore explains: the attempt before a restart restore, or its own (in place)."""
    restored = {c.checkpoint.attempt for c in classified if c.checkpoint.kind == "restore" and c.trigger == "restart"}
    nos = [a.attempt for a in scope.attempts]
    explained = {n for i, n in enumerate(nos) if n in restored or (i + 1 < len(nos) and nos[i + 1] in restored)}
    ev = Evidence(scope, [], [], inc)
    out = []
    for a in scope.attempts:
        state = (a.state or "").upper()
        failed = state.startswith(FAILED_STATES) or bool(crashes_of(ev, a.attempt))
        if a.attempt not in explained and not preempted(a, inc) and failed:
            out.append(a)
    return out


def _selected(
    items: list[Classified], checkpoint: int | None, since: datetime | None, until: datetime | None
) -> list[Classified]:
    out = [c for c in items if checkpoint is None or c.checkpoint.iteration == checkpoint]
    t = [(c, c.checkpoint.start or c.checkpoint.end) for c in out]
    return [c for c, ts in t if (since is None or (ts and ts >= since)) and (until is None or (ts and ts <= until))]


def _telemetry_windows(plans: list[Plan | None]) -> list[tuple[datetime, datetime]]:
    """Per effect to explain: from the baseline lookback before the attribution window to the
    checkpoint; overlapping windows merged, so each sample is read once."""
    spans = []
    for p in plans:
        if p is not None and p.effect is not None:
            lo = p.effect.at - timedelta(seconds=PRE_WINDOW_S + LOOKBACK_S)
            # past the checkpoint: the samples that show a change begun before it come scrapes later
            spans.append((lo, p.effect.deadline + timedelta(seconds=max(POST_WINDOW_S, PERSIST_READ_S))))
    merged: list[tuple[datetime, datetime]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(hi, merged[-1][1]))
        else:
            merged.append((lo, hi))
    return merged


def _signal_order(s: Anomaly | Event) -> tuple:
    if isinstance(s, Anomaly):
        return (s.onset, s.host, s.entity or "", s.metric, "", 0)
    return (s.ts, s.host, s.entity or "", f"{s.kind} {s.code}", s.path or "", s.line or 0)


def event_read(scope: JobScope, spans: list[tuple[datetime, datetime]]) -> EventRead:
    """Where a job's events are read: its hosts and the switches cabled to them, from its start (events
    are few: an outage logged long ago still counts) to past its last read window."""
    switches = sorted({lk.switch for lk in scope.links if lk.switch} - set(scope.hosts))
    t0 = min(spans[0][0], (scope.start or spans[0][0]) - timedelta(seconds=LOOKBACK_S))
    return scope.hosts + switches, t0, spans[-1][1] + timedelta(seconds=POST_WINDOW_S)


def _evidence(
    conn: duckdb.DuckDBPyConnection,
    inputs: JobInputs,
    items: list[Classified],
    failed: list[Attempt],
    telemetry: JobTelemetry | None = None,
) -> Evidence:
    """Telemetry and events of the job's hosts, read only around the effects that need a cause;
    `telemetry`: the job's, read already with a fleet's for these same windows, else read here.
    `items` and `failed` are the whole job's, whatever the view: a checkpoint's evidence (its baselines,
    its first signal) is one set, the same in the job's explanation as in a view of that checkpoint."""
    scope, inc = inputs.scope, inputs.incidents
    ev = Evidence(
        scope,
        [],
        inputs.windows,
        inc,
        stragglers=lambda *window: straggler_host(conn, *window),
        laggards=inputs.laggards or [],
    )
    spans = _telemetry_windows([plan(cl, ev) for cl in items] + [plan_attempt_failure(a, ev) for a in failed])
    if not spans:
        return ev
    if telemetry is None and has_series_layout(conn):  # one reading path for one job and many (store/series.py)
        from synestra_cli.signals.fleet_tables import JobRead
        from synestra_cli.signals.fleet_telemetry import fleet_telemetry

        job_read = JobRead(scope, spans, event_read(scope, spans), comparable(inputs))
        telemetry = fleet_telemetry(conn, {scope.job_id: job_read}).get(scope.job_id)
    if telemetry is not None and telemetry.windows == spans:
        ev.observed, found = telemetry.observed, telemetry.anomalies
    else:
        staged = stage_scope(conn, scope, spans)
        ev.observed = staged.observed > 0
        found = anomalies(
            conn, windows=spans, comparable=comparable(inputs), samples=staged.samples, rules=staged.rules
        )
    # the job's error counters against their peers: gray parts no rule's floor or own history shows
    cabled = sorted({(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port})
    beside, fresh = peer_outliers(conn, scope.hosts, cabled, spans, found)
    found = [*beside, *fresh]
    read = event_read(scope, spans)
    logged = telemetry.events if telemetry is not None and telemetry.event_read == read else typed_events(conn, *read)
    ports = {(lk.switch, lk.switch_port) for lk in scope.links if lk.switch}
    events = [e for e in logged if e.host in scope.hosts or (e.host, e.component) in ports]
    ev.signals = sorted([*found, *events], key=_signal_order)  # row order varies with threads
    return ev


def telemetry_windows(conn: duckdb.DuckDBPyConnection, inputs: JobInputs) -> list[tuple[datetime, datetime]]:
    """The read windows of the job's whole explanation (explain_job with no selection), found before
    reading them, so that a fleet's telemetry is read for all its jobs at once (explain/batch.py)."""
    scope, inc = inputs.scope, inputs.incidents
    classified = classify(conn, scope.job_id, scope.attempts, inc, inputs.checkpoints, inputs.last_iterations)
    ev = Evidence(scope, [], inputs.windows, inc)
    failed = unexplained_failures(scope, classified, inc)
    return _telemetry_windows([plan(cl, ev) for cl in classified] + [plan_attempt_failure(a, ev) for a in failed])


def explain_job(
    conn: duckdb.DuckDBPyConnection,
    job_id: str,
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    inputs: JobInputs | None = None,
    telemetry: JobTelemetry | None = None,
    book: AssetBook | None = None,
) -> JobExplanation:
    """Explain the job's checkpoints (optionally one iteration, or those in [since, until]); `inputs`
    `telemetry` and `book`: the job's rows, telemetry and asset book already read with a fleet's
    (explain/batch.py), else read here."""
    inputs = job_inputs(conn, job_id) if inputs is None else inputs
    scope, cps, inc = inputs.scope, inputs.checkpoints, inputs.incidents
    classified = classify(conn, job_id, scope.attempts, inc, cps, inputs.last_iterations)
    chosen = _selected(classified, checkpoint, since, until)
    if checkpoint is not None and not chosen:
        raise NotFoundError(
            f"job {job_id} has no checkpoint at iteration {checkpoint}: "
            f"run `synestra explain --job {job_id}` to list them"
        )
    # attempt failures are whole-job facts: a view of one checkpoint or a time window leaves them out
    whole = checkpoint is None and since is None and until is None
    every_failure = unexplained_failures(scope, classified, inc)
    failed = every_failure if whole else []
    ev = _evidence(conn, inputs, classified, every_failure, telemetry)
    failures = []
    for a in failed:
        r = reason_failure(a, ev)
        if r.cause is not None:
            book = book or load_book(conn, scope)
            r = enrich(r, book)
        at = min([i.ts for i in crashes_of(ev, a.attempt) if i.ts] + ([a.end] if a.end else []), default=None)
        failures.append(
            FailureExplanation(a.attempt, at, a.end, a.state, a.exit_code, r.cause, r.chain, r.alternatives)
        )
    out = []
    for cl in chosen:
        r = reason(cl, ev)
        if r.cause is not None:
            book = book or load_book(conn, scope)
            r = enrich(r, book)
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
                precision=precision_of(cp),
            )
        )
    cadence = learn_cadence([c.iteration for c in cps if c.kind == "save" and c.iteration])
    found = restarts(scope.attempts, inc, cps, inputs.lifecycle)
    causes = _restart_causes(found, classified, out, failures)
    return JobExplanation(
        job_id,
        scope.hosts,
        len(scope.attempts),
        cadence,
        out,
        failures=failures,
        restarts=[restart_doc(r) for r in found],
        restart_loops=restart_loops(found, causes),
    )


def _restart_causes(
    found: list[Restart],
    classified: list[Classified],
    explained: list[CheckpointExplanation],
    failures: list[FailureExplanation],
) -> dict[int, Cause | None]:
    """Each restart's cause: its restore's (when that restore was explained), else the failure's of the
    attempt it followed, else that of the next restart out of the same attempt (torchrun restarting in place
    again and again, then Slurm requeueing: one attempt's failures, one cause); the cause's first signal dates
    the fault when it lies in the failed segment."""
    by_restore = {(c.kind, c.attempt, c.iteration, c.start): c.cause for c in explained if c.kind == "restore"}
    by_attempt = {f.attempt: f.cause for f in failures}
    out: dict[int, Cause | None] = {}
    for k, r in enumerate(found):
        cp = r.restore
        cause = by_restore.get(("restore", cp.attempt, cp.iteration, cp.start)) if cp else None
        if cause is None and r.failed_attempt is not None:
            cause = by_attempt.get(r.failed_attempt)
        out[k] = cause
    for k in reversed(range(len(found))):  # a restart without a cause of its own: the attempt's
        nxt = k + 1
        if out[k] is None and nxt < len(found) and found[nxt].failed_attempt == found[k].failed_attempt:
            out[k] = out[nxt]
    for k, r in enumerate(found):
        cause = out[k]
        r.cause_key = cause_key(cause)
        with_first_signal(r, cause.first_signal if cause else None)
    return out


def select(
    job: JobExplanation, checkpoint: int | None, since: datetime | None = None, until: datetime | None = None
) -> list[CheckpointExplanation]:
    """The explained checkpoints at this iteration or in [since, until], as explain_job would choose them."""
    out = []
    for cp in job.checkpoints:
        ts = cp.start or cp.end
        if checkpoint is not None and cp.iteration != checkpoint:
            continue
        if (since is None or (ts and ts >= since)) and (until is None or (ts and ts <= until)):
            out.append(cp)
    if checkpoint is not None and not out:
        raise NotFoundError(
            f"job {job.job} has no checkpoint at iteration {checkpoint}: "
            f"run `synestra explain --job {job.job}` to list them"
        )
    return out


def explain_each(
    conn: duckdb.DuckDBPyConnection,
    job_ids: list[str],
    explain: Callable[[duckdb.DuckDBPyConnection, str], JobExplanation] = explain_job,
) -> list[JobExplanation]:
    """explain(conn, job) for every job, a few jobs at a time ($SYNESTRA_WORKERS), in the given order."""
    done = map_in_threads(conn, explain, job_ids, default_workers("SYNESTRA_WORKERS"))
    return list(progress.track("explaining jobs", done, len(job_ids)))


def jobs_in_window(
    conn: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> list[str]:
    """Jobs with checkpoints or attempts overlapping [since, until] (--all)."""
    rows = conn.execute(JOBS_IN_WINDOW_SQL, {"since": since, "until": until}).fetchall()
    if not rows and not scalar(conn, ANY_JOB_SQL):
        raise EmptyStoreError("the store holds no jobs: ingest job logs or sacct first")
    if not rows:
        from synestra_cli.query.jobs import empty_window_message

        raise NotFoundError(empty_window_message(conn, since, until))
    return [r[0] for r in rows]
