"""The checkpoint tax printed with the chain (issue 6, item 6): accounting applied to an explanation.

Each checkpoint carries its own cost (its save or restore seconds) and, when it has a cause, the
badput tax-report charges to that cause through it (the degraded throughput before it, the lost work,
hang, requeue and restart around it); the job carries tax-report's headlines, buckets and top causes.
Both come from tax-report's own buckets and charging rules (accounting/), applied to this
explanation, so `explain` and `tax-report` agree to the second.
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from synestra_cli.accounting.attribution import by_cause, charges_for
from synestra_cli.accounting.interval import cadence_action
from synestra_cli.accounting.report import Charge, tax_report
from synestra_cli.errors import NotFoundError
from synestra_cli.explain.document import CheckpointTaxDoc
from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.explain.inputs import JobInputs
from synestra_cli.explain.job import explain_job

TOP_CAUSES = 5


CheckpointKey = tuple[str, int | None, int | None]  # (kind, attempt, iteration)


def _per_checkpoint(charges: list[Charge], gpus: int) -> dict[CheckpointKey, CheckpointTaxDoc]:
    out: dict[CheckpointKey, CheckpointTaxDoc] = {}
    for c in charges:
        if c.checkpoint is None:
            continue
        row = out.setdefault(c.checkpoint, {"seconds": 0.0, "buckets_s": {}, "gpu_hours": 0.0})
        row["seconds"] += c.seconds
        row["buckets_s"][c.bucket] = row["buckets_s"].get(c.bucket, 0.0) + c.seconds
    for row in out.values():
        row["gpu_hours"] = row["seconds"] * gpus / 3600.0
    return out


def attach_tax(conn: duckdb.DuckDBPyConnection, job: JobExplanation) -> None:
    """Fill `tax` on the job and on each of its checkpoints (left None when the store lacks the
    attempt times tax-report needs). Meant for a whole-job explanation: charges follow the job's
    non-routine checkpoints, so a filtered view would move them."""
    try:
        report = tax_report(conn, job.job)
    except NotFoundError:
        return
    jt = report.jobs[0]
    b = jt.buckets
    charges = charges_for(jt, job.checkpoints, job.failures)
    per = _per_checkpoint(charges, b.gpus)
    for cp in job.checkpoints:
        cp.tax = per.get((cp.kind, cp.attempt, cp.iteration), {"seconds": 0.0, "buckets_s": {}, "gpu_hours": 0.0})
    headlines = jt.headlines(None)
    job.tax = {
        "gpus": b.gpus,
        "wall_s": b.wall_s,
        "gpu_hours": b.wall_s * b.gpus / 3600.0,
        "buckets_s": dict(b.buckets_s),
        "checkpoint_tax": headlines["checkpoint_tax"],
        "hidden_tax": headlines["hidden_tax"],
        "goodput": headlines["goodput"],
        "by_cause": by_cause(jt, charges, None)[:TOP_CAUSES],
        "cadence_action": cadence_action(jt.interval),
    }


def explain_with_tax(
    conn: duckdb.DuckDBPyConnection,
    job_id: str,
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    inputs: JobInputs | None = None,
) -> JobExplanation:
    """explain_job, with the tax attached when the whole job is explained (see attach_tax)."""
    job = explain_job(conn, job_id, checkpoint, since, until, inputs)
    if checkpoint is None and since is None and until is None:
        attach_tax(conn, job)
    return job
