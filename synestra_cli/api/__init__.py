"""The library's one face: every command of the CLI calls one function here and renders its typed result,
and a notebook or a script calls the same functions.

    from synestra_cli import api

    api.ingest(["exports/"], db="cluster.duckdb").to_pandas()       # one row per file
    job = api.explain("1003", db="cluster.duckdb")
    job.to_pandas()                                                  # one row per checkpoint
    report = api.tax_report(db="cluster.duckdb")
    report.to_pandas()                                               # one row per job
    report.causes_to_pandas()                                        # causes, costliest first

Each call opens the store, answers and closes it, as a command does; each result keeps the library's
own objects and converts to the CLI's JSON document (`to_json`, the same `synestra.*` schema ids) or to a
pandas DataFrame (`to_pandas`). Errors are the library's (`synestra_cli.errors`: NotFoundError,
EmptyStoreError, StoreBusyError, ...), each with the exit code the CLI would use. Nothing here imports
click or rich; pandas is imported by `to_pandas` only.

The modules: `loading` (ingest, follower), `explanations` (explain, explain_jobs), `taxes` (tax_report),
`health` (fleet, exclusions, risks), `jobs` (jobs, attempts), `views` (timeline, packet, annotations), `upkeep`
(check, compact, forget, sources, sql), `catalog` (formats, simulate); `shared` and `words` hold what a
renderer needs besides (errors and exit codes, how values are shown, the explanation's types). A name
is imported when first used, so `synestra --help` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from synestra_cli.api.catalog import formats, simulate
    from synestra_cli.api.explanations import CHECKPOINT_COLUMNS, ExplainResult, explain, explain_jobs
    from synestra_cli.api.health import exclusions, fleet, risks
    from synestra_cli.api.jobs import attempts, jobs_in_store
    from synestra_cli.api.loading import FILE_COLUMNS, IngestOptions, IngestResult, ingest
    from synestra_cli.api.taxes import JOB_COLUMNS, TaxReportResult, tax_report
    from synestra_cli.api.upkeep import check, compact, forget, query, sources
    from synestra_cli.api.views import grafana_annotations, packet_facts, timeline

# name -> the module that holds it (no module is named like a function: `api.explain` stays the function)
_WHERE = {
    "CHECKPOINT_COLUMNS": "explanations",
    "ExplainResult": "explanations",
    "explain": "explanations",
    "explain_jobs": "explanations",
    "FILE_COLUMNS": "loading",
    "IngestOptions": "loading",
    "IngestResult": "loading",
    "ingest": "loading",
    "JOB_COLUMNS": "taxes",
    "TaxReportResult": "taxes",
    "tax_report": "taxes",
    "exclusions": "health",
    "fleet": "health",
    "risks": "health",
    "attempts": "jobs",
    "jobs_in_store": "jobs",
    "check": "upkeep",
    "compact": "upkeep",
    "forget": "upkeep",
    "query": "upkeep",
    "sources": "upkeep",
    "grafana_annotations": "views",
    "packet_facts": "views",
    "timeline": "views",
    "formats": "catalog",
    "simulate": "catalog",
}

__all__ = [
    "CHECKPOINT_COLUMNS",
    "FILE_COLUMNS",
    "JOB_COLUMNS",
    "ExplainResult",
    "IngestOptions",
    "IngestResult",
    "TaxReportResult",
    "attempts",
    "check",
    "compact",
    "exclusions",
    "explain",
    "explain_jobs",
    "fleet",
    "forget",
    "formats",
    "grafana_annotations",
    "ingest",
    "jobs_in_store",
    "packet_facts",
    "query",
    "risks",
    "simulate",
    "sources",
    "tax_report",
    "timeline",
]
assert sorted(_WHERE) == sorted(__all__)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'synestra_cli.api' has no attribute {name!r}")
    return getattr(importlib.import_module(f"synestra_cli.api.{_WHERE[name]}"), name)
