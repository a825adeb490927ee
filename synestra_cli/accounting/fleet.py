"""The fleet view of a tax report: totals, ETTR, economic availability, the costliest causes."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import TypedDict

from synestra_cli.accounting.buckets import BUCKETS
from synestra_cli.accounting.document import FleetDoc, FleetUsdDoc, IntervalDoc, RankedCauseDoc
from synestra_cli.accounting.interval import advise, cadence_action
from synestra_cli.accounting.report import TaxReport
from synestra_cli.explain.document import CauseChargeDoc

GROUP_KEYS = ("category", "host", "component", "job")


class _FleetOptions(TypedDict, total=False):
    """FleetDoc's keys that only --capacity-gpus and --gpu-hour-price add."""

    capacity_gpu_hours: float
    economic_availability_capacity: float | None
    usd: FleetUsdDoc


def _group(by: str, job_id: str, charge: CauseChargeDoc) -> tuple[str | None, ...]:
    if by == "job":
        return (job_id,)
    if by == "component":
        return (charge["host"], charge["component"])
    return (charge["category"] if by == "category" else charge["host"],)


def ranked_causes(report: TaxReport, by: str = "category", top: int | None = None) -> list[RankedCauseDoc]:
    """Badput charged to causes, summed by `by` across jobs, costliest first, with jobs touched."""
    if by not in GROUP_KEYS:
        raise ValueError(f"by must be one of {GROUP_KEYS}")
    acc: dict[tuple[str | None, ...], RankedCauseDoc] = {}
    categories: dict[tuple[str | None, ...], set[str]] = defaultdict(set)
    jobs_touched: dict[tuple[str | None, ...], set[str]] = defaultdict(set)
    for job in report.jobs:
        for charge in job.by_cause:
            key = _group(by, job.buckets.job_id, charge)
            name = " ".join(str(k) for k in key if k is not None) or f"(no {by})"
            row = acc.setdefault(key, {"key": name, "seconds": 0.0, "gpu_hours": 0.0, "categories": [], "jobs": 0})
            row["seconds"] += charge["seconds"]
            row["gpu_hours"] += charge["gpu_hours"]
            categories[key].add(charge["category"])
            jobs_touched[key].add(job.buckets.job_id)
    rows = []
    for key, row in acc.items():
        row["categories"] = sorted(c for c in categories[key] if c)
        row["jobs"] = len(jobs_touched[key])
        if report.price is not None:
            row["usd"] = row["gpu_hours"] * report.price
        rows.append(row)
    rows.sort(key=lambda r: (-r["gpu_hours"], r["key"]))
    return rows[:top] if top else rows


def fleet_summary(report: TaxReport) -> FleetDoc:
    """Totals over the jobs of the report, in GPU-hours; ratios are GPU-hour weighted."""
    gh = {b: sum(j.buckets.buckets_s[b] * j.buckets.gpus for j in report.jobs) / 3600.0 for b in BUCKETS}
    allocated = sum(j.buckets.wall_s * j.buckets.gpus for j in report.jobs) / 3600.0
    tax = sum(j.buckets.checkpoint_tax_s * j.buckets.gpus for j in report.jobs) / 3600.0
    extra: _FleetOptions = {}
    if report.capacity_gpus:
        starts = [c["start_ts"] for j in report.jobs for c in j.buckets.attempts]
        ends = [c["end_ts"] for j in report.jobs for c in j.buckets.attempts]
        lo = report.since or min(starts)
        hi = report.until or max(ends)
        capacity_gh = report.capacity_gpus * (hi - lo).total_seconds() / 3600.0
        extra["capacity_gpu_hours"] = capacity_gh
        extra["economic_availability_capacity"] = gh["productive"] / capacity_gh if capacity_gh else None
    if report.price is not None:
        extra["usd"] = {
            "allocated": allocated * report.price,
            "checkpoint_tax": tax * report.price,
            "hidden_tax": gh["degraded_throughput"] * report.price,
        }
    return {
        "jobs": len(report.jobs),
        "allocated_gpu_hours": allocated,
        "buckets_gpu_hours": gh,
        "checkpoint_tax": tax / allocated if allocated else None,
        "hidden_tax": gh["degraded_throughput"] / allocated if allocated else None,
        "ettr": gh["productive"] / allocated if allocated else None,
        "economic_availability": gh["productive"] / allocated if allocated else None,
        "failures": sum(j.failures for j in report.jobs),
        **extra,
        "top_offenders": {k: ranked_causes(report, k, top=5) for k in ("host", "component")},
        "interval": pooled_interval(report),
    }


def pooled_interval(report: TaxReport) -> IntervalDoc:
    """Interval advice from the whole fleet: one job rarely fails often enough to estimate its MTBF,
    jobs of one cluster together do (save cost and interval: medians over the jobs that have them)."""
    saves = [j.interval.save_cost_s for j in report.jobs if j.interval.save_cost_s]
    wall = sum(j.buckets.wall_s for j in report.jobs)
    failures = sum(j.failures for j in report.jobs)
    restarts = [j.interval.restart_s for j in report.jobs if j.interval.restart_s]
    currents = [j.interval.current_interval_s for j in report.jobs if j.interval.current_interval_s]
    advice = advise(
        statistics.median(saves) if saves else None,
        failures,
        wall,
        statistics.median(currents) if currents else None,
        statistics.median(restarts) if restarts else None,
    )
    return {
        "save_cost_s": advice.save_cost_s,
        "failures": advice.failures,
        "mtbf_s": advice.mtbf_s,
        "current_interval_s": advice.current_interval_s,
        "restart_s": advice.restart_s,
        "young_s": advice.young_s,
        "daly_s": advice.daly_s,
        "waste_current": advice.waste_current,
        "waste_recommended": advice.waste_recommended,
        "note": advice.note,
        "action": cadence_action(advice),
    }
