"""`synestra explain`: every checkpoint and failure of the jobs asked for, classified and, when not
routine, attributed (explain/); kept explanations reused and computed ones kept (accounting/kept/)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import duckdb

from synestra_cli import settings
from synestra_cli.api._frames import Db, LongSteps, frame
from synestra_cli.errors import NotFoundError
from synestra_cli.explain.document import ExplainDoc
from synestra_cli.explain.explanation import CheckpointExplanation, JobExplanation
from synestra_cli.explain.job import explain_each, explain_job, jobs_in_window, select
from synestra_cli.query.clusters import resolve_job
from synestra_cli.store import open_store

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ExplainResult", "explain", "explain_jobs", "select_jobs"]

# DuckDB's buffer pool for one job's explanation (SYNESTRA_MEMORY_LIMIT overrides it, as everywhere).
ONE_JOB_MEMORY_LIMIT = "384MB"
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
    explanations: list[JobExplanation]  # each job's whole typed explanation (explain/explanation.py)
    many: bool = False  # asked for several jobs (or --all): the JSON document is a list

    @property
    def explanation(self) -> JobExplanation:
        """The (first) job's explanation."""
        return self.explanations[0]

    def to_json(self) -> ExplainDoc | list[ExplainDoc]:
        """The `synestra.explain/3` document `synestra explain --format json` prints: one job's, or a list."""
        docs = [e.to_json() for e in self.explanations]
        return docs if self.many else docs[0]

    def to_markdown(
        self, checkpoint: int | None = None, since: datetime | None = None, until: datetime | None = None
    ) -> list[str]:
        """Each job's ticket (`--format markdown`), with only the checkpoints asked for when any is."""
        from synestra_cli.explain.markdown import job_markdown
        from synestra_cli.shown import relative_in

        filtered = checkpoint is not None or since is not None or until is not None
        return [
            relative_in(job_markdown(e, select(e, checkpoint, since, until) if filtered else None))
            for e in self.explanations  # a ticket leaks no analyst's home folder
        ]

    def to_pandas(self) -> pd.DataFrame:
        """One row per checkpoint: its trigger, the cause named (if not routine), and its tax."""
        rows = [_checkpoint_row(e.job, cp) for e in self.explanations for cp in e.checkpoints]
        return frame(rows, CHECKPOINT_COLUMNS)


def _checkpoint_row(job: str, cp: CheckpointExplanation) -> dict[str, Any]:
    cause, tax = cp.cause, cp.tax
    return {
        "job": job,
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


def explain_jobs(
    db: Db = None,
    *,
    jobs: Sequence[str] = (),
    all_jobs: bool = False,
    hosts: Sequence[str] = (),
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    tax: bool = False,
    long_steps: LongSteps = nullcontext,
) -> ExplainResult:
    """The jobs named (each resolved; NotFoundError if unknown) or, all_jobs, those in the window, then
    those that ran on one of `hosts`; each explained (`synestra explain`). A view of one checkpoint or of
    a time window reads only its own telemetry; whole jobs reuse the explanation kept under the store's
    current key (tax-report, `ingest --explain`, an earlier explain) and keep the ones computed now.
    tax=True adds each checkpoint's cost and the job's tax (`--tax`)."""
    explain: Callable[..., JobExplanation] = explain_job
    if tax:  # lazily: tax-report's buckets cost ~0.4 s more (pyarrow, bucket queries)
        from synestra_cli.accounting.checkpoint_tax import explain_with_tax

        explain = explain_with_tax
    window = (checkpoint, since, until)
    reuse = not tax and window == (None, None, None) and settings.reuse_kept()
    computed: list[JobExplanation] = []
    store = open_store(db, read_only=True)
    with store as conn:
        if len(jobs) == 1 and "SYNESTRA_MEMORY_LIMIT" not in os.environ:
            # One explanation reads each block of its hosts once: cached, they would only swell the RSS
            # (a 256-host job: ~950 MB at the store's 1 GB limit, ~480 MB at this one, same speed).
            conn.execute("SET memory_limit = ?", [ONE_JOB_MEMORY_LIMIT])
        ids = select_jobs(conn, jobs, all_jobs, hosts, since, until)
        if len(ids) == 1 and not all_jobs:
            store.narrow_to_jobs(conn, ids)  # a lake reads only the job's partitions
        with long_steps():
            if reuse:
                from synestra_cli.accounting.kept.explanations import explain_reusing

                docs, computed, key = explain_reusing(conn, ids)
            else:
                docs = explain_each(conn, ids, lambda c, j: explain(c, j, *window))
    if computed:  # best effort, after the read: a store held by another process keeps nothing
        from synestra_cli.accounting.kept.explanations import save_to

        save_to(db, key, computed)
    return ExplainResult(docs, many=all_jobs or len(ids) > 1)


def explain(
    job_id: str,
    db: Db = None,
    *,
    checkpoint: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    tax: bool = False,
) -> ExplainResult:
    """One job's explanation (`synestra explain --job ID`): explain_jobs for that job."""
    return explain_jobs(db, jobs=(str(job_id),), checkpoint=checkpoint, since=since, until=until, tax=tax)


def select_jobs(
    conn: duckdb.DuckDBPyConnection,
    jobs: Sequence[str],
    all_jobs: bool,
    hosts: Sequence[str],
    since: datetime | None,
    until: datetime | None,
) -> list[str]:
    """The jobs named (each resolved, exit 5 if unknown) or those in the window, then those that ran on
    one of the hosts; none left is exit 5 with what was asked."""
    ids = jobs_in_window(conn, since, until) if all_jobs else [resolve_job(conn, j) for j in jobs]
    if hosts:
        from synestra_cli.query.jobs import jobs_on_hosts

        on = jobs_on_hosts(conn, list(hosts))
        ids = [j for j in ids if j in on]
        if not ids:
            raise NotFoundError(f"no {'such ' if jobs else ''}job ran on {', '.join(hosts)}")
    return ids
