"""`tax-report` as a library: buckets per job, headlines, interval advice and the fleet view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import duckdb

from synestra_cli.accounting.buckets import (
    BUCKETS,
    JobBuckets,
    assemble,
    attempt_cuts,
    degraded_windows,
    ideal_step_times,
)
from synestra_cli.accounting.document import HeadlinesDoc, JobTaxDoc
from synestra_cli.accounting.interval import IntervalAdvice, advise, cadence_action
from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.explain.document import CauseChargeDoc
from synestra_cli.query.jobs import empty_window_message
from synestra_cli.signals.steps import DegradationWindow, degradation_windows_for

JOBS_SQL = """
SELECT a.job_id, max(j.gpus) AS gpus, min(a.start_ts) AS first_ts, max(a.end_ts) AS last_ts
FROM attempts_reconciled a LEFT JOIN jobs j USING (job_id)
WHERE a.start_ts IS NOT NULL AND a.end_ts IS NOT NULL
GROUP BY a.job_id
HAVING ($job IS NULL OR a.job_id = $job)
   AND ($since IS NULL OR max(a.end_ts) >= $since) AND ($until IS NULL OR min(a.start_ts) <= $until)
ORDER BY first_ts, a.job_id
"""

# Per job: the iteration it started from, its median blocking save (delta) and the median compute
# time between one save's end and the next save's start within an attempt (the current interval).
JOB_SAVES_SQL = """
WITH c AS (
    SELECT * FROM checkpoints_reconciled WHERE job_id IN (SELECT job_id FROM sel)
), s AS (
    SELECT job_id, start_ts, coalesce(blocking_s, epoch(end_ts - start_ts)) AS blocking_s,
           lag(end_ts) OVER (PARTITION BY job_id, attempt ORDER BY start_ts) AS prev_end
    FROM c WHERE kind = 'save' AND end_ts IS NOT NULL
), saves AS (
    SELECT job_id, median(blocking_s) AS delta,
           median(epoch(start_ts - prev_end)) FILTER (WHERE prev_end IS NOT NULL) AS current
    FROM s GROUP BY job_id
), firsts AS (  -- the first attempt's own start (its first log segment: a later one restarted in place)
    SELECT job_id, min(iteration) FILTER (WHERE kind = 'restore' AND attempt = 1 AND log_attempt = first_seg)
        AS first_iteration
    FROM (SELECT *, min(log_attempt) FILTER (WHERE attempt = 1) OVER (PARTITION BY job_id, source_id) AS first_seg
          FROM c)
    GROUP BY job_id
)
SELECT sel.job_id, coalesce(f.first_iteration, 0), v.delta, v.current
FROM sel LEFT JOIN firsts f USING (job_id) LEFT JOIN saves v USING (job_id)
"""

UNPLANNED_PREFIXES = ("FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY", "CANCELLED", "REQUEUED", "BOOT_FAIL")


@dataclass(frozen=True)
class Charge:
    """Seconds of one tax bucket charged to one cause (accounting/attribution.py makes them)."""

    category: str
    host: str | None
    component: str | None
    bucket: str
    seconds: float
    checkpoint: tuple[str, int | None, int | None] | None  # (kind, attempt, iteration) it is tied to


@dataclass
class JobTax:
    buckets: JobBuckets
    interval: IntervalAdvice
    failures: int
    charges: list[Charge] = field(default_factory=list)  # filled by build_report
    by_cause: list[CauseChargeDoc] = field(default_factory=list)

    def headlines(self, price: float | None) -> HeadlinesDoc:
        b = self.buckets
        doc: HeadlinesDoc = {
            "checkpoint_tax": b.ratio(b.checkpoint_tax_s),
            "hidden_tax": b.ratio(b.buckets_s["degraded_throughput"]),
            "goodput": b.ratio(b.buckets_s["productive"]),
        }
        if price is not None:
            gh = b.gpus / 3600.0 * price
            doc["usd"] = {
                "checkpoint_tax": b.checkpoint_tax_s * gh,
                "hidden_tax": b.buckets_s["degraded_throughput"] * gh,
                "wall": b.wall_s * gh,
            }
        return doc


@dataclass
class TaxReport:
    jobs: list[JobTax]
    price: float | None
    capacity_gpus: int | None
    since: datetime | None
    until: datetime | None
    # each job's step-time degradation windows, read once for the buckets and the explanations
    windows: dict[str, list[DegradationWindow]] = field(default_factory=dict)


def _failures(cuts: list[dict]) -> int:
    """Unplanned interruptions: attempts that ended in a failure state (preemptions are planned)."""
    return sum(
        1
        for c in cuts
        if c["failed"]
        and not (c["state"] or "").startswith("PREEMPTED")
        and (c["state"] is None or c["state"].startswith(UNPLANNED_PREFIXES))
    )


def _interval(jb: JobBuckets, failures: int, delta: float | None, current: float | None) -> IntervalAdvice:
    b = jb.buckets_s
    restart = (
        (b["checkpoint_restore"] + b["startup"] - jb.first_attempt_startup_s + b["requeue"] + b["hang"]) / failures
        if failures
        else None
    )
    return advise(delta, failures, jb.wall_s, current, restart)


def job_taxes(
    conn: duckdb.DuckDBPyConnection, job_rows: list[tuple], found: dict[str, list[DegradationWindow]] | None = None
) -> list[JobTax]:
    """Buckets for every job in a few SQL passes; degradation windows from signals (`found`: read already)."""
    job_ids = [r[0] for r in job_rows]
    found = degradation_windows_for(conn, job_ids) if found is None else found
    windows = [(j, w.onset, w.end) for j, ws in found.items() for w in ws]
    ideal = ideal_step_times(conn, job_ids, windows)
    cuts = attempt_cuts(conn, job_ids, ideal)
    degraded = degraded_windows(conn, cuts, ideal, windows)
    saves = {r[0]: r[1:] for r in conn.execute(JOB_SAVES_SQL).fetchall()}  # `sel` registered by attempt_cuts
    cuts_of: dict[str, list[dict]] = {}
    for c in cuts:
        cuts_of.setdefault(c["job_id"], []).append(c)
    out = []
    for job_id, gpus, _first, _last in job_rows:
        if job_id not in cuts_of:
            continue
        first_iter, delta, current = saves[job_id]
        jb = assemble(job_id, gpus or 0, cuts_of[job_id], ideal.get(job_id), degraded.get(job_id, []), first_iter)
        failures = _failures(cuts_of[job_id])
        out.append(JobTax(jb, _interval(jb, failures, delta, current), failures))
    return out


def tax_report(
    conn: duckdb.DuckDBPyConnection,
    job_id: str | Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    price: float | None = None,
    capacity_gpus: int | None = None,
) -> TaxReport:
    """job_id: one job, several (a list), or None for every job in the window."""
    return report_of(conn, report_jobs(conn, job_id, since, until), since, until, price, capacity_gpus)


def report_of(
    conn: duckdb.DuckDBPyConnection,
    rows: list[tuple],
    since: datetime | None,
    until: datetime | None,
    price: float | None,
    capacity_gpus: int | None,
) -> TaxReport:
    """The report of these jobs (`report_jobs`' rows): their step-time degradation windows, their buckets."""
    windows = degradation_windows_for(conn, [r[0] for r in rows])
    return TaxReport(job_taxes(conn, rows, windows), price, capacity_gpus, since, until, windows)


def report_jobs(
    conn: duckdb.DuckDBPyConnection,
    job_id: str | Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[tuple]:
    """The jobs a report covers (JOBS_SQL's rows: job, gpus, first and last times), in report order;
    NotFoundError or EmptyStoreError when there are none."""
    one = job_id if isinstance(job_id, str) else None
    rows = conn.execute(JOBS_SQL, {"job": one, "since": since, "until": until}).fetchall()
    if job_id is not None and one is None:
        wanted = set(job_id)
        rows = [r for r in rows if r[0] in wanted]
        missing = sorted(wanted - {r[0] for r in rows})
        if missing and rows:
            raise NotFoundError(
                f"job {', '.join(missing)} has no attempts with start and end times in the window "
                "(`synestra jobs` lists the jobs)"
            )
        job_id = ", ".join(job_id)
    if not rows:
        if job_id is not None:
            raise NotFoundError(
                f"job {job_id} has no attempts with start and end times in the store (`synestra jobs` lists the jobs)"
            )
        if since is not None or until is not None:
            raise NotFoundError(empty_window_message(conn, since, until))
        raise EmptyStoreError("no jobs in the store (ingest job logs and sacct output first)")
    return rows


def job_doc(t: JobTax, price: float | None) -> JobTaxDoc:
    b = t.buckets
    iv = t.interval
    current_gh, recommended_gh = iv.waste_gpu_hours(b.wall_s, b.gpus)
    return {
        "job": b.job_id,
        "gpus": b.gpus,
        "wall_s": b.wall_s,
        "gpu_hours": b.wall_s * b.gpus / 3600.0,
        "ideal_step_s": b.ideal_step_s,
        "counted_iterations": b.counted_iterations,
        "buckets_s": {k: b.buckets_s[k] for k in BUCKETS},
        "buckets_gpu_hours": {k: b.buckets_s[k] * b.gpus / 3600.0 for k in BUCKETS},
        **t.headlines(price),
        "failures": t.failures,
        "by_cause": t.by_cause,
        "notes": list(b.notes),
        "interval": {
            "save_cost_s": iv.save_cost_s,
            "failures": iv.failures,
            "mtbf_s": iv.mtbf_s,
            "current_interval_s": iv.current_interval_s,
            "restart_s": iv.restart_s,
            "young_s": iv.young_s,
            "daly_s": iv.daly_s,
            "waste_current": iv.waste_current,
            "waste_recommended": iv.waste_recommended,
            "waste_current_gpu_hours": current_gh,
            "waste_recommended_gpu_hours": recommended_gh,
            "note": iv.note,
            "action": cadence_action(iv),
        },
    }
