"""`synestra tax-report`: the checkpoint tax of the jobs asked for, with the fleet view and the causes
ranked; what it computes is kept for the next report (accounting/kept/)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from synestra_cli.accounting.attribution import FullReport, build_report, tax_document
from synestra_cli.accounting.document import JobTaxDoc, TaxDoc
from synestra_cli.accounting.report import job_doc
from synestra_cli.api._frames import Db, LongSteps, frame
from synestra_cli.api.explanations import select_jobs
from synestra_cli.store import open_store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["TaxReportResult", "tax_report"]

JOB_COLUMNS = ["job", "gpus", "wall_s", "gpu_hours", "checkpoint_tax", "hidden_tax", "goodput"]


@dataclass(frozen=True)
class TaxReportResult:
    full: FullReport  # buckets, charges, fleet view and ranked causes (synestra_cli.accounting)
    price: float | None
    by: str

    @property
    def jobs(self) -> list[JobTaxDoc]:
        """Each job's document, as in the `jobs` list of the JSON report."""
        return [job_doc(t, self.price) for t in self.full.report.jobs]

    def to_json(self) -> TaxDoc:
        """The `synestra.tax/1` document `synestra tax-report --format json` prints."""
        return tax_document(self.full, self.by)

    def to_pandas(self) -> pd.DataFrame:
        """One row per job: headlines, then each bucket's seconds (`<bucket>_s`)."""
        docs = self.jobs
        buckets = list(docs[0]["buckets_s"]) if docs else []
        rows = [{**{c: d.get(c) for c in JOB_COLUMNS}, **{f"{b}_s": d["buckets_s"][b] for b in buckets}} for d in docs]
        return frame(rows, JOB_COLUMNS + [f"{b}_s" for b in buckets])

    def causes_to_pandas(self) -> pd.DataFrame:
        """The causes ranked as `--by` asked, costliest first."""
        rows = self.full.causes
        return frame(rows, list(rows[0]) if rows else [])


def tax_report(
    job_id: str | None = None,
    db: Db = None,
    *,
    jobs: Sequence[str] = (),
    hosts: Sequence[str] = (),
    since: datetime | None = None,
    until: datetime | None = None,
    price: float | None = None,
    capacity_gpus: int | None = None,
    by: str = "category",
    engine: str = "local",
    long_steps: LongSteps = nullcontext,
) -> TaxReportResult:
    """The checkpoint tax of one job (`job_id`), of the jobs named (`jobs`), or of every job in the window,
    narrowed to those that ran on one of `hosts`; with the fleet view and the causes ranked `by` category,
    host, component or job (`synestra tax-report`). `engine` "ray[://ADDRESS]": the jobs explained by Ray
    workers first (engine/). Explanations and accounting it computes are kept for the next report."""
    jobs = [str(job_id), *jobs] if job_id is not None else list(jobs)
    with open_store(db, read_only=True) as conn:
        chosen: list[str] | None = None
        if jobs or hosts:
            chosen = select_jobs(conn, jobs, not jobs, hosts, since, until)
        if engine != "local":  # explained by Ray workers, then reused as kept explanations (engine/)
            from synestra_cli.engine import explain_on
            from synestra_cli.explain.job import jobs_in_window

            explain_on(engine, conn, db, chosen or jobs_in_window(conn, since, until))
        one = chosen[0] if chosen and len(chosen) == 1 else chosen
        with long_steps():
            full = build_report(conn, one, since, until, price, capacity_gpus, by, explanations=False)
    full.keep(db)  # the next report reuses its explanations and accounting (accounting/kept/)
    return TaxReportResult(full, price, by)
