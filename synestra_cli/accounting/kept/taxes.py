"""Each job's tax accounting kept beside its explanation, so that a warm tax-report recomputes nothing.

A warm report used to reuse the kept explanations (kept/explanations.py) but still recompute every job's
buckets (its degradation windows, attempt cuts and degraded windows: three passes over the step
logs) and decode every explanation to charge its causes: about 2 CPU s for the campus's 192 jobs. What
it needs of them is small and does not depend on the report's options: the buckets, the interval
advice, the failures and the charges to causes (price, capacity and `--by` are applied afterwards). It
is kept in `kept_taxes` under the explanations' own key, so that any ingest, forget or code change
that makes an explanation stale makes its accounting stale with it. A job the buckets leave out (no
attempt with both times) is kept as NULL, so that a warm report knows it is not missing.

A lake reader keeps none (its explanations go beside its parts): it recomputes the accounting.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from typing import Any

import duckdb

from synestra_cli.accounting.buckets import DegradedWindow, JobBuckets
from synestra_cli.accounting.interval import IntervalAdvice
from synestra_cli.accounting.report import Charge, JobTax
from synestra_cli.store.sql import has_table

LOAD_SQL = "SELECT job_id, doc FROM kept_taxes WHERE store_key = ? AND job_id IN (SELECT unnest(?::VARCHAR[]))"
DELETE_SQL = "DELETE FROM kept_taxes WHERE job_id IN (SELECT unnest(?::VARCHAR[]))"
INSERT_SQL = "INSERT INTO kept_taxes (job_id, store_key, doc) SELECT unnest(?::VARCHAR[]), ?, unnest(?::JSON[])"
TIME = "t"  # a datetime in an attempt's cut: {"t": ISO}, the only non-JSON value JobBuckets holds


def load(conn: duckdb.DuckDBPyConnection, job_ids: list[str], key: str) -> dict[str, JobTax | None] | None:
    """The kept accounting of these jobs under `key` (None: a job kept without any), or None unless every
    one of them is kept (a partial hit saves nothing: the buckets are computed in a few passes for all)."""
    if not job_ids or not has_table(conn, "kept_taxes"):
        return None
    rows = conn.execute(LOAD_SQL, [key, job_ids]).fetchall()
    if len(rows) != len(set(job_ids)):
        return None
    return {job: None if doc is None else from_json(json.loads(doc)) for job, doc in rows}


def save(conn: duckdb.DuckDBPyConnection, key: str, docs: list[tuple[str, str | None]]) -> None:
    """Keep these (job, document) pairs under `key`, in the caller's transaction."""
    if docs and has_table(conn, "kept_taxes"):
        conn.execute(DELETE_SQL, [[j for j, _ in docs]])
        conn.execute(INSERT_SQL, [[j for j, _ in docs], key, [d for _, d in docs]])


def documents(job_ids: list[str], taxes: list[JobTax]) -> list[tuple[str, str | None]]:
    """What `save` keeps for these jobs: each one's accounting, NULL for a job the buckets left out."""
    by_job = {t.buckets.job_id: t for t in taxes}
    return [(j, json.dumps(to_json(by_job[j])) if j in by_job else None) for j in job_ids]


def _value(v: Any) -> Any:
    return {TIME: v.isoformat()} if isinstance(v, datetime) else v


def _unvalue(v: Any) -> Any:
    return _time(v[TIME]) if isinstance(v, dict) else v


def _time(iso: str) -> datetime:
    return datetime.fromisoformat(iso)


def to_json(t: JobTax) -> dict[str, Any]:
    """A job's accounting as JSON (floats as Python writes them: read back bit for bit)."""
    b = t.buckets
    return {
        "job": b.job_id,
        "gpus": b.gpus,
        "wall_s": b.wall_s,
        "ideal_step_s": b.ideal_step_s,
        "counted_iterations": b.counted_iterations,
        "buckets_s": b.buckets_s,
        "attempts": [{k: _value(v) for k, v in cut.items()} for cut in b.attempts],
        "first_attempt_startup_s": b.first_attempt_startup_s,
        "degraded_windows": [[w.start.isoformat(), w.end.isoformat(), w.seconds] for w in b.degraded_windows],
        "notes": b.notes,
        "interval": asdict(t.interval),
        "failures": t.failures,
        "charges": [[c.category, c.host, c.component, c.bucket, c.seconds, c.checkpoint] for c in t.charges],
    }


def from_json(doc: dict[str, Any]) -> JobTax:
    """The inverse of `to_json`: the JobTax job_taxes and charges_for computed."""
    b = JobBuckets(
        doc["job"],
        doc["gpus"],
        doc["wall_s"],
        doc["ideal_step_s"],
        doc["counted_iterations"],
        doc["buckets_s"],
        [{k: _unvalue(v) for k, v in cut.items()} for cut in doc["attempts"]],
        doc["first_attempt_startup_s"],
        [DegradedWindow(_time(s), _time(e), x) for s, e, x in doc["degraded_windows"]],
        doc["notes"],
    )
    charges = [
        Charge(category, host, component, bucket, seconds, tuple(tied) if tied is not None else None)
        for category, host, component, bucket, seconds, tied in doc["charges"]
    ]
    return JobTax(b, IntervalAdvice(**doc["interval"]), doc["failures"], charges)
