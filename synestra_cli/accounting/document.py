"""The `synestra.tax/1` document as types: what `tax-report --format json` prints and `api.TaxReportResult`
returns (`tax_document`), what the table and csv renderers read (cli/tax_report.py), and what
docs/accounting.md describes. mypy checks the builders (report.job_doc, fleet.fleet_summary,
fleet.ranked_causes, attribution.by_cause) and the readers against these: a key added or renamed on one
side only is an error. Keys marked NotRequired appear only with `--gpu-hour-price` (`usd`) or
`--capacity-gpus`; the builders insert them where the document has always had them. A job's charges
(`CauseChargeDoc`) are explain/document.py's: `explain --tax` prints them too.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

from synestra_cli.explain.document import CauseChargeDoc  # explain --tax prints the same charges

SCHEMA = "synestra.tax/1"

Buckets = dict[str, float]  # bucket name (accounting/buckets.py BUCKETS) -> seconds or GPU-hours


class JobUsdDoc(TypedDict):
    checkpoint_tax: float
    hidden_tax: float
    wall: float


class FleetUsdDoc(TypedDict):
    allocated: float
    checkpoint_tax: float
    hidden_tax: float


class HeadlinesDoc(TypedDict):
    """A job's ratios of its wall time (report.JobTax.headlines)."""

    checkpoint_tax: float
    hidden_tax: float
    goodput: float
    usd: NotRequired[JobUsdDoc]


class IntervalDoc(TypedDict):
    """Young/Daly advice (accounting/interval.py); the fleet's is pooled over its jobs."""

    save_cost_s: float | None
    failures: int
    mtbf_s: float | None
    current_interval_s: float | None
    restart_s: float | None
    young_s: float | None
    daly_s: float | None
    waste_current: float | None
    waste_recommended: float | None
    note: str
    action: dict[str, str] | None  # interval.cadence_action: kind, text, why, source


class JobIntervalDoc(IntervalDoc):
    """A job's advice, with its waste in GPU-hours (report.job_doc writes them before the note)."""

    waste_current_gpu_hours: float | None
    waste_recommended_gpu_hours: float | None


class JobTaxDoc(TypedDict):
    job: str
    gpus: int
    wall_s: float
    gpu_hours: float
    ideal_step_s: float | None
    counted_iterations: int
    buckets_s: Buckets
    buckets_gpu_hours: Buckets
    checkpoint_tax: float
    hidden_tax: float
    goodput: float
    usd: NotRequired[JobUsdDoc]
    failures: int
    by_cause: list[CauseChargeDoc]
    notes: list[str]
    interval: JobIntervalDoc


class RankedCauseDoc(TypedDict):
    """Badput summed by `--by` across jobs (fleet.ranked_causes)."""

    key: str  # the category, host, "host component" or job; "(no host)" when the charge names none
    seconds: float
    gpu_hours: float
    categories: list[str]
    jobs: int
    usd: NotRequired[float]


class FleetDoc(TypedDict):
    jobs: int
    allocated_gpu_hours: float
    buckets_gpu_hours: Buckets
    checkpoint_tax: float | None  # None: no GPU-hours allocated
    hidden_tax: float | None
    ettr: float | None
    economic_availability: float | None
    failures: int
    capacity_gpu_hours: NotRequired[float]
    economic_availability_capacity: NotRequired[float | None]
    usd: NotRequired[FleetUsdDoc]
    top_offenders: dict[str, list[RankedCauseDoc]]  # "host" and "component": the 5 costliest
    interval: IntervalDoc


class TaxDoc(TypedDict):
    schema: str  # SCHEMA
    jobs: list[JobTaxDoc]
    fleet: FleetDoc
    by: str  # category | host | component | job
    causes: list[RankedCauseDoc]
