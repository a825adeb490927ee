"""The public, typed API: the answers the CLI prints, as objects, for notebooks and scripts.

    from synestra_cli import api

    api.ingest(["exports/"], db="cluster.duckdb").to_pandas()       # one row per file
    job = api.explain("1003", db="cluster.duckdb")
    job.to_pandas()                                                  # one row per checkpoint
    report = api.tax_report(db="cluster.duckdb")
    report.to_pandas()                                               # one row per job
    report.causes_to_pandas()                                        # causes, costliest first

Each call opens the store, answers and closes it, as a command does; each result keeps the library's
own objects (`.reports`, `.explanation`, `.full`) and converts to the CLI's JSON document (`to_json`,
the same `synestra.*` schema ids) or to a pandas DataFrame (`to_pandas`). Errors are the library's
(`synestra_cli.errors`: NotFoundError, EmptyStoreError, StoreBusyError, ...), each with the exit code
the CLI would use. Nothing here imports click or rich; pandas is imported by `to_pandas` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synestra_cli.accounting.attribution import FullReport, build_report, tax_document
from synestra_cli.accounting.checkpoint_tax import explain_with_tax
from synestra_cli.accounting.document import JobTaxDoc, TaxDoc
from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.accounting.report import job_doc
from synestra_cli.explain.document import ExplainDoc
from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.explain.job import explain_job
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import FileReport, ingest_paths
from synestra_cli.store import open_store

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ExplainResult",
    "IngestOptions",
    "IngestResult",
    "TaxReportResult",
    "explain",
    "ingest",
    "tax_report",
]

INGEST_SCHEMA = "synestra.ingest/1"
Db = str | Path | None  # the store: a path, else $SYNESTRA_DB, else ./synestra.duckdb


def _frame(rows: Sequence[Mapping[str, Any]], columns: list[str]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame(rows, columns=columns)


# --- ingest ----------------------------------------------------------------------------------------

FILE_COLUMNS = ["path", "status", "format", "rows", "rejected", "first_ts", "last_ts", "hosts", "error"]


@dataclass(frozen=True)
class IngestResult:
    reports: list[FileReport]  # one per file, in the order given
    explained: int | None = None  # jobs explained and kept (explain=True), else None

    @property
    def failed(self) -> list[FileReport]:
        return [r for r in self.reports if r.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        """The `synestra.ingest/1` document `synestra ingest --json` prints."""
        return {"schema": INGEST_SCHEMA, "files": [asdict(r) for r in self.reports]}

    def to_pandas(self) -> pd.DataFrame:
        """One row per file: status, format, rows, rejects, time span, hosts, error."""
        return _frame([asdict(r) for r in self.reports], FILE_COLUMNS)


def ingest(
    paths: Iterable[str | Path], db: Db = None, *, options: IngestOptions | None = None, explain: bool = False
) -> IngestResult:
    """Load files or folders into the store, as `synestra ingest` does (a bad file is reported in its
    FileReport, never raised); with explain=True, then explain and keep every job (`--explain`)."""
    with open_store(db) as conn:
        reports = ingest_paths(conn, [Path(p) for p in paths], options or IngestOptions())
        explained = memo.keep_all(conn) if explain else None
    return IngestResult(reports, explained)


# --- explain ---------------------------------------------------------------------------------------

CHECKPOINT_COLUMNS = [
    "job",
    "kind",
    "attempt",
    "iteration",
    "start",
    "end",
    "duration_s",
    "trigger",
    "slow",
    "routine",
    "category",
    "host",
    "component",
    "confidence",
    "first_signal",
    "chain_links",
    "tax_s",
    "tax_gpu_hours",
]


@dataclass(frozen=True)
class ExplainResult:
    explanation: JobExplanation  # the whole typed explanation (synestra_cli.explain.explanation)

    def to_json(self) -> ExplainDoc:
        """The `synestra.explain/3` document `synestra explain --format json` prints."""
        return self.explanation.to_json()

    def to_pandas(self) -> pd.DataFrame:
        """One row per checkpoint: its trigger, the cause named (if not routine), and its tax."""
        rows = []
        for cp in self.explanation.checkpoints:
            cause, tax = cp.cause, cp.tax
            rows.append(
                {
                    "job": self.explanation.job,
                    "kind": cp.kind,
                    "attempt": cp.attempt,
                    "iteration": cp.iteration,
                    "start": cp.start,
                    "end": cp.end,
                    "duration_s": cp.duration_s,
                    "trigger": cp.trigger,
                    "slow": cp.slow,
                    "routine": cp.routine,
                    "category": cause.category if cause else None,
                    "host": cause.host if cause else None,
                    "component": cause.component if cause else None,
                    "confidence": cause.confidence if cause else None,
                    "first_signal": cause.first_signal if cause else None,
                    "chain_links": len(cp.chain),
                    "tax_s": tax["seconds"] if tax else None,
                    "tax_gpu_hours": tax["gpu_hours"] if tax else None,
                }
            )
        return _frame(rows, CHECKPOINT_COLUMNS)


def explain(
    job_id: str,
    db: Db = None,
    *,
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    tax: bool = False,
) -> ExplainResult:
    """Every checkpoint of a job, classified and, when not routine, attributed (`synestra explain`);
    tax=True adds each checkpoint's cost and the job's tax (`--tax`, whole-job views only)."""
    run = explain_with_tax if tax else explain_job
    with open_store(db, read_only=True) as conn:
        return ExplainResult(run(conn, str(job_id), checkpoint, since, until))


# --- tax-report ------------------------------------------------------------------------------------

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
        return _frame(rows, JOB_COLUMNS + [f"{b}_s" for b in buckets])

    def causes_to_pandas(self) -> pd.DataFrame:
        """The causes ranked as `--by` asked, costliest first."""
        rows = self.full.causes
        return _frame(rows, list(rows[0]) if rows else [])


def tax_report(
    job_id: str | None = None,
    db: Db = None,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    price: float | None = None,
    capacity_gpus: int | None = None,
    by: str = "category",
) -> TaxReportResult:
    """The checkpoint tax of one job or (job_id None) every job in the window, with the fleet view and
    the causes ranked `by` category, host, component or job (`synestra tax-report`). Explanations it
    computes are kept in the store for the next report, as the command does."""
    with open_store(db, read_only=True) as conn:
        full = build_report(conn, job_id, since, until, price, capacity_gpus, by)
    full.keep(db)
    return TaxReportResult(full, price, by)


# --- fleet -----------------------------------------------------------------------------------------
# `fleet` (issue 16: fleet health and risks) joins here: a function over the store returning a frozen
# dataclass with to_json() (its `synestra.*` schema id) and to_pandas(), added to __all__.
