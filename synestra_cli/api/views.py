"""The views of one job's explanation that are files: `timeline` (the picture's facts), `packet` (what a
ticket's tarball holds) and `annotations` (Grafana's)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synestra_cli.accounting.checkpoint_tax import explain_with_tax
from synestra_cli.api._frames import Db
from synestra_cli.explain import packet as packets
from synestra_cli.explain.annotations import datasource_document, document, job_annotations
from synestra_cli.explain.explanation import CheckpointExplanation, JobExplanation
from synestra_cli.explain.job import explain_each, explain_job, jobs_in_window, select
from synestra_cli.explain.timeline import Timeline, build
from synestra_cli.query.clusters import resolve_job
from synestra_cli.store import open_store

__all__ = ["Annotations", "PacketFacts", "grafana_annotations", "packet_facts", "packets", "timeline"]


def timeline(job_id: str, db: Db = None) -> Timeline:
    """The facts `synestra timeline` draws: the job's steps, checkpoints, restarts, tax bands and causes."""
    with open_store(db, read_only=True) as conn:
        job = resolve_job(conn, job_id)
        return build(conn, job, explain_with_tax(conn, job))


@dataclass(frozen=True)
class PacketFacts:
    """What `synestra packet` writes, before it is written: the job with its tax, the checkpoints asked
    for, the evidence lines cited, the sources they come from, and the timeline."""

    job_id: str
    job: JobExplanation
    chosen: list[CheckpointExplanation] | None  # the checkpoint asked for (None: the whole job)
    lines: list[dict[str, Any]]  # each evidence line cited, with its source file and line
    cited: list[dict[str, Any]]  # the sources cited
    total: int  # the sources the store holds
    timeline: Timeline


def packet_facts(job_id: str, db: Db = None, checkpoint: int | None = None) -> PacketFacts:
    with open_store(db, read_only=True) as conn:
        job_id = resolve_job(conn, job_id)
        job = explain_with_tax(conn, job_id)  # the whole job: the ticket's cost and the picture
        chosen = select(job, checkpoint) if checkpoint is not None else None
        lines = packets.cited_lines(job, checkpoint)
        cited_paths = {x["source"] for x in lines} | set(
            packets.metric_sources(conn, packets.metric_series(job, checkpoint))
        )
        cited, total = packets.sources(conn, sorted(cited_paths))
        return PacketFacts(job_id, job, chosen, lines, cited, total, build(conn, job_id, job))


@dataclass(frozen=True)
class Annotations:
    """Grafana annotations of the jobs' checkpoints and failures (explain/annotations.py)."""

    explanations: list[JobExplanation]

    def each(self, dashboard_uid: str | None = None, panel_id: int | None = None) -> list[dict[str, Any]]:
        """One annotation per event, as Grafana's HTTP API takes them (`--format jsonl`)."""
        return [a for d in self.explanations for a in job_annotations(d, dashboard_uid, panel_id)]

    def datasource(self) -> Any:
        """The JSON data source document (`--format json-datasource`)."""
        return datasource_document(self.explanations)

    def to_json(self, dashboard_uid: str | None = None, panel_id: int | None = None) -> Any:
        return document(self.explanations, dashboard_uid, panel_id)


def grafana_annotations(db: Db = None, *, jobs: Sequence[str] = (), all_jobs: bool = False) -> Annotations:
    """The jobs named (or every job) explained, as Grafana annotations (`synestra annotations`)."""
    with open_store(db, read_only=True) as conn:
        ids = jobs_in_window(conn) if all_jobs else [resolve_job(conn, j) for j in jobs]
        return Annotations(explain_each(conn, ids, explain_job))
