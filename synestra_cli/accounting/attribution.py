"""Charging badput to causes: explain names the cause of each non-routine checkpoint, the tax buckets
say what it cost. Each charge is (category, host, component, bucket, seconds).

- A failed attempt's lost work, hang and requeue, and the next attempt's start-up and restore, are
  charged to the cause of the restore that follows it (trigger restart or preemption).
- A degradation window's hidden tax goes to the first caused checkpoint inside it or just after it
  (the reactive save it provoked, or the restart after the crash it ended in); a slowdown that outlives
  its reactive save and a restart goes to the last reactive save before it.
- A save's blocking time goes to its cause when it has one (reactive, preemption, abnormally slow);
  routine saves are charged to `checkpoint.routine`.
Whatever explain cannot attribute is charged to `unknown`, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from synestra_cli.accounting.buckets import BUCKETS
from synestra_cli.accounting.document import SCHEMA, FleetDoc, RankedCauseDoc, TaxDoc
from synestra_cli.accounting.fleet import fleet_summary, ranked_causes
from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.accounting.kept import taxes as kept
from synestra_cli.accounting.report import Charge, JobTax, TaxReport, job_doc, report_jobs, report_of
from synestra_cli.explain.document import CauseChargeDoc
from synestra_cli.explain.explanation import JobExplanation

ROUTINE = "checkpoint.routine"
UNKNOWN = "unknown"
SKEW = timedelta(seconds=30)  # clock skew between the job log and the degradation window
RESTART_WITHIN = timedelta(hours=2)  # a crash ends a window; its restart comes after hang, requeue, start-up


def _who(cp) -> tuple[str, str | None, str | None]:
    if cp is None or cp.cause is None:
        return (UNKNOWN, None, None)
    return (cp.cause.category, cp.cause.host, cp.cause.component)


def _key(cp) -> tuple[str, int | None, int | None]:
    return (cp.kind, cp.attempt, cp.iteration)


def _loads(c, seg: dict) -> bool:
    """The restore is the load of this segment (an attempt, or its part after an in-place restart)."""
    if c.attempt != seg["attempt"]:
        return False
    t = c.start or c.end
    return t is None or seg["start_ts"] - SKEW <= t <= seg["end_ts"]


def _failure_charges(job: JobTax, checkpoints: list, failures: list) -> Iterable[Charge]:
    cuts = job.buckets.attempts
    for cut, nxt in zip(cuts, [*cuts[1:], None], strict=True):
        if not cut["failed"]:
            continue
        restore = next((c for c in checkpoints if c.kind == "restore" and nxt and _loads(c, nxt)), None)
        # no restore after it (crashed before its first save, not requeued): the failure's own cause
        failure = next((f for f in failures if f.attempt == cut["attempt"]), None) if restore is None else None
        who = _who(restore or failure)
        tied = _key(restore) if restore else ("failure", failure.attempt, None) if failure else None
        for bucket, secs in (("lost_work", cut["lost_work_s"]), ("hang", cut["hang_s"]), ("requeue", cut["requeue_s"])):
            yield Charge(*who, bucket, secs, tied)
        yield Charge(*who, "startup", cut["restart_gap_s"], tied)  # torchrun's stop and rendezvous after it
        if nxt is not None:
            yield Charge(*who, "startup", nxt["startup_s"], tied)


def _save_and_restore_charges(checkpoints: list) -> Iterable[Charge]:
    for cp in checkpoints:
        secs = cp.duration_s or 0.0
        if cp.kind == "save":
            yield Charge(*(_who(cp) if cp.cause else (ROUTINE, None, None)), "checkpoint_save", secs, _key(cp))
        elif cp.kind == "restore":
            yield Charge(*_who(cp), "checkpoint_restore", secs, _key(cp))


def _window_cause(window, caused: list):
    """The checkpoint whose cause explains a degradation window: the first caused checkpoint inside it
    (a reactive or abnormally slow save); else the restart after the crash it ended in; else, for a
    slowdown that outlived its reactive save and a restart, the last reactive save before it."""

    def at(c):
        return c.start or c.end

    inside = [c for c in caused if window.start - SKEW <= at(c) <= window.end + SKEW]
    restart = [c for c in caused if c.trigger == "restart" and window.end < at(c) <= window.end + RESTART_WITHIN]
    before = [c for c in caused if at(c) < window.start and c.trigger == "reactive"]
    return (inside or restart or [None])[0] or (before[-1] if before else None)


def _degraded_charges(job: JobTax, checkpoints: list) -> Iterable[Charge]:
    caused = sorted(
        (c for c in checkpoints if c.cause is not None and (c.start or c.end)), key=lambda c: c.start or c.end
    )
    for w in job.buckets.degraded_windows:
        cp = _window_cause(w, caused)
        yield Charge(*_who(cp), "degraded_throughput", w.seconds, _key(cp) if cp else None)


def charges_for(job: JobTax, checkpoints: list, failures: list | None = None) -> list[Charge]:
    """Every badput second of the job that its checkpoints' causes (and, for a failure no restore
    followed, the failure's own explanation) account for; per bucket never more than the bucket holds
    (a checkpoint's own times may be wrong where the buckets were clamped)."""
    charges = [
        c
        for c in (
            *_failure_charges(job, checkpoints, failures or []),
            *_save_and_restore_charges(checkpoints),
            *_degraded_charges(job, checkpoints),
        )
        if c.seconds > 0
    ]
    total: dict[str, float] = {}
    for c in charges:
        total[c.bucket] = total.get(c.bucket, 0.0) + c.seconds
    cap = job.buckets.buckets_s
    return [
        replace(c, seconds=c.seconds * cap[c.bucket] / total[c.bucket]) if total[c.bucket] > cap[c.bucket] + 1.0 else c
        for c in charges
    ]


def by_cause(job: JobTax, charges: list[Charge], price: float | None) -> list[CauseChargeDoc]:
    """Charges summed per (category, host, component), costliest first."""
    rows: dict[tuple[str, str | None, str | None], CauseChargeDoc] = {}
    for c in charges:
        row = rows.setdefault(
            (c.category, c.host, c.component),
            {
                "category": c.category,
                "host": c.host,
                "component": c.component,
                "seconds": 0.0,
                "buckets_s": dict.fromkeys(BUCKETS, 0.0),
                "gpu_hours": 0.0,
            },
        )
        row["seconds"] += c.seconds
        row["buckets_s"][c.bucket] += c.seconds
    out = []
    for row in rows.values():
        row["buckets_s"] = {k: v for k, v in row["buckets_s"].items() if v}
        row["gpu_hours"] = row["seconds"] * job.buckets.gpus / 3600.0
        if price is not None:
            row["usd"] = row["gpu_hours"] * price
        out.append(row)
    return sorted(out, key=lambda r: (-r["seconds"], r["category"]))


@dataclass
class FullReport:
    report: TaxReport
    fleet: FleetDoc
    causes: list[RankedCauseDoc]
    computed: list  # explanations computed for this report, not yet kept in the store (explain.memo.save_to)
    key: str  # the store key they were computed under
    explanations: dict = field(default_factory=dict)  # job id -> its JobExplanation (fleet/ reads the causes)
    taxes: list = field(default_factory=list)  # (job, accounting document) computed now, to keep (`keep`)

    def keep(self, db: str | Path | None) -> int:
        """Keep what this report computed (explanations, accounting) for the next one; kept/explanations.py."""
        taxes = self.taxes
        beside = (lambda conn: kept.save(conn, self.key, taxes)) if taxes else None
        return memo.save_to(db, self.key, self.computed, beside)


def build_report(
    conn: duckdb.DuckDBPyConnection,
    job_id: str | Sequence[str] | None,
    since: datetime | None,
    until: datetime | None,
    price: float | None,
    capacity_gpus: int | None,
    by: str = "category",
    explanations: bool = True,
) -> FullReport:
    """The whole tax report: buckets, charges to causes (via explain, reusing kept explanations), fleet
    view, ranked causes. The accounting kept under the store's key (kept/taxes.py) is reused when
    every job has it; `explanations` False: the explanations are then not read either (`explanations`
    of the result is empty)."""
    rows = report_jobs(conn, job_id, since, until)
    key = memo.store_key(conn)
    ids = [r[0] for r in rows]
    reused = kept.load(conn, ids, key)
    if reused is None:
        report = report_of(conn, rows, since, until, price, capacity_gpus)
    else:
        jobs = [t for t in (reused[j] for j in ids) if t is not None]
        report = TaxReport(jobs, price, capacity_gpus, since, until)
    found: dict[str, JobExplanation] = {}
    computed: list[JobExplanation] = []
    if reused is None or explanations:
        windows = report.windows if reused is None else None  # None: explain reads its own
        found, computed, key = memo.explain_jobs(conn, [j.buckets.job_id for j in report.jobs], windows)
    for job in report.jobs:
        if reused is None:
            ex = found[job.buckets.job_id]
            job.charges = charges_for(job, ex.checkpoints, ex.failures)
        job.by_cause = by_cause(job, job.charges, price)
    taxes = kept.documents(ids, report.jobs) if reused is None else []
    return FullReport(report, fleet_summary(report), ranked_causes(report, by), computed, key, found, taxes)


def tax_document(full: FullReport, by: str) -> TaxDoc:
    """The `synestra.tax/1` document (`tax-report --format json`, api.TaxReportResult.to_json)."""
    jobs = [job_doc(t, full.report.price) for t in full.report.jobs]
    return {"schema": SCHEMA, "jobs": jobs, "fleet": full.fleet, "by": by, "causes": full.causes}
