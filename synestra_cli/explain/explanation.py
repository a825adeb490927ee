"""What `explain` answers for one job, as objects: each checkpoint and failure with its cause, chain and
alternatives (`CheckpointExplanation`, `FailureExplanation`), the job's (`JobExplanation`), and their
JSON document, the versioned schema `synestra.explain/3` (docs/explain.md). Built by explain/job.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.document import (
    CauseDoc,
    CheckpointDoc,
    CheckpointTaxDoc,
    ExplainDoc,
    ExplainTaxDoc,
    FailureDoc,
    RestartDoc,
    RestartLoopDoc,
    link_doc,
)
from synestra_cli.explain.evidence import Cause
from synestra_cli.explain.rules import SCHEMA
from synestra_cli.explain.triggers import Checkpoint


@dataclass
class CheckpointExplanation:
    kind: str
    attempt: int | None
    iteration: int | None
    start: datetime | None
    end: datetime | None
    duration_s: float | None
    trigger: str
    slow: bool
    cause: Cause | None
    chain: list[ChainLink] = field(default_factory=list)
    alternatives: list[Cause] = field(default_factory=list)
    tax: CheckpointTaxDoc | None = None  # its cost and the badput charged through it (accounting/checkpoint_tax.py)
    # how its lines date it (triggers.Checkpoint.precision): `bounded` is a load or save whose lines carry no time,
    # placed between the dated lines around it: its start is not its own and its duration only a bound
    precision: str | None = None

    @property
    def routine(self) -> bool:
        return self.cause is None


@dataclass
class FailureExplanation:
    """An attempt that failed with no restore to explain it (it crashed before its first save, or the
    job was not requeued): its cause, chain and alternatives, found as for a restart."""

    attempt: int
    at: datetime | None  # when it failed: the first crash incident, else the attempt's end
    end: datetime | None
    state: str | None
    exit_code: str | None
    cause: Cause | None
    chain: list[ChainLink] = field(default_factory=list)
    alternatives: list[Cause] = field(default_factory=list)


@dataclass
class JobExplanation:
    job: str
    hosts: list[str]
    attempts: int
    cadence: int | None
    checkpoints: list[CheckpointExplanation]
    tax: ExplainTaxDoc | None = None  # tax-report's headlines, buckets, top causes (accounting/checkpoint_tax.py)
    failures: list[FailureExplanation] = field(default_factory=list)
    restarts: list[RestartDoc] = field(default_factory=list)  # every restart in stages (explain/restarts.py)
    restart_loops: list[RestartLoopDoc] = field(default_factory=list)  # alike restarts in a row (explain/loops.py)

    def to_json(self, copied: bool = True) -> ExplainDoc:
        """The `synestra.explain/3` document (datetimes still as datetime: render serialises them);
        `copied` False: its evidence is the explanation's own, for a caller that only serialises it."""
        return {
            "schema": SCHEMA,
            "job": self.job,
            "hosts": self.hosts,
            "attempts": self.attempts,
            "save_cadence_iterations": self.cadence,
            "checkpoints": [_checkpoint_json(c, copied) for c in self.checkpoints],
            "failures": [_failure_json(f, copied) for f in self.failures],
            "restarts": [dict(r) for r in self.restarts] if copied else self.restarts,  # type: ignore[misc]
            "restart_loops": self.restart_loops,
            "tax": self.tax,
        }


def _cause_json(c: Cause, copied: bool) -> CauseDoc:
    return {
        "category": c.category,
        "host": c.host,
        "component": c.component,
        "first_signal": c.first_signal,
        "confidence": c.confidence,
        "reported_healthy": c.reported_healthy,
        "assets": list(c.assets),
        "action": c.action,
        "evidence": [link_doc(lk, copied) for lk in c.evidence],
    }


def precision_of(cp: Checkpoint) -> str | None:
    """A bounded checkpoint whose duration its log states (Megatron's load-checkpoint timer) is placed that long
    before its end: its times are estimated, its duration is a measure, not a bound."""
    return "estimated" if cp.precision == "bounded" and cp.blocking_s is not None else cp.precision


def _checkpoint_json(c: CheckpointExplanation, copied: bool) -> CheckpointDoc:
    return {
        "kind": c.kind,
        "attempt": c.attempt,
        "iteration": c.iteration,
        "start": c.start,
        "end": c.end,
        "duration_s": c.duration_s,
        "trigger": c.trigger,
        "slow": c.slow,
        "cause": _cause_json(c.cause, copied) if c.cause else None,
        "chain": [link_doc(lk, copied) for lk in c.chain],
        "alternatives": [_cause_json(a, copied) for a in c.alternatives],
        "tax": c.tax,
        "precision": c.precision,
    }


def _failure_json(f: FailureExplanation, copied: bool) -> FailureDoc:
    return {
        "attempt": f.attempt,
        "at": f.at,
        "end": f.end,
        "state": f.state,
        "exit_code": f.exit_code,
        "cause": _cause_json(f.cause, copied) if f.cause else None,
        "chain": [link_doc(lk, copied) for lk in f.chain],
        "alternatives": [_cause_json(a, copied) for a in f.alternatives],
    }
