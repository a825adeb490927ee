"""The types and phrasings a renderer of the answers needs: an explanation's objects, the tax report's
documents, the timeline, and the library's own sentences for them (assets, restarts). Re-exported so the
CLI's views read them through `synestra_cli.api` only."""

from synestra_cli.accounting.buckets import BUCKETS
from synestra_cli.accounting.document import FleetDoc, IntervalDoc, JobTaxDoc, RankedCauseDoc
from synestra_cli.explain.assets import describe
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.document import CheckpointTaxDoc, ExplainTaxDoc, RestartDoc
from synestra_cli.explain.evidence import Cause
from synestra_cli.explain.explanation import CheckpointExplanation, FailureExplanation, JobExplanation
from synestra_cli.explain.markdown import job_markdown
from synestra_cli.explain.restart_text import loop_line, stages_line
from synestra_cli.explain.timeline import Timeline

__all__ = [
    "BUCKETS",
    "Cause",
    "ChainLink",
    "CheckpointExplanation",
    "CheckpointTaxDoc",
    "ExplainTaxDoc",
    "FailureExplanation",
    "FleetDoc",
    "IntervalDoc",
    "JobExplanation",
    "JobTaxDoc",
    "RankedCauseDoc",
    "RestartDoc",
    "Timeline",
    "describe",
    "job_markdown",
    "loop_line",
    "stages_line",
]
