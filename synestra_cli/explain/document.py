"""The `synestra.explain/3` document as types: what `JobExplanation.to_json` writes (explain/explanation.py),
what the kept explanations are read back from (kept/explanations.py), what the renderers read, and what
docs/explain.md describes. mypy checks both directions against these; a key added on one side only
is an error.

Times are datetimes as built, ISO 8601 strings once stored or printed (`Stamp`). A link's `evidence`
is the signal's own record (its fields differ by signal type: docs/explain.md), hence a plain dict.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from synestra_cli.explain.chain import ChainLink

Stamp = datetime | str | None


class LinkDoc(TypedDict):
    time: Stamp
    layer: str  # gpu | nic | fabric | storage | node | job | log ...
    host: str | None
    entity: str | None
    signal: str
    evidence: dict[str, Any]


class CauseDoc(TypedDict):
    category: str  # the taxonomy of docs/explain.md: gpu.fell_off_bus, fabric.link_flap, ...
    host: str | None
    component: str | None
    first_signal: Stamp
    confidence: float
    reported_healthy: bool
    assets: list[dict[str, Any]]  # explain/assets.py: a GPU, a cable's two ends, a rack
    action: dict[str, str] | None  # explain/actions.py: kind, text, why, source
    evidence: list[LinkDoc]  # an alternative's own signals


class CauseChargeDoc(TypedDict):
    """One job's badput charged to one (category, host, component) (accounting/attribution.py by_cause):
    in `explain --tax` and in tax-report's `by_cause` (synestra.tax/1)."""

    category: str
    host: str | None
    component: str | None
    seconds: float
    buckets_s: dict[str, float]  # only the buckets charged
    gpu_hours: float
    usd: NotRequired[float]  # tax-report --gpu-hour-price


class CheckpointTaxDoc(TypedDict):
    """A checkpoint's cost: its own save/restore seconds and, through its cause, the badput charged."""

    seconds: float
    buckets_s: dict[str, float]
    gpu_hours: float


class ExplainTaxDoc(TypedDict):
    """The job's tax beside its explanation: tax-report's headlines, buckets and top causes."""

    gpus: int
    wall_s: float
    gpu_hours: float
    buckets_s: dict[str, float]
    checkpoint_tax: float
    hidden_tax: float
    goodput: float
    by_cause: list[CauseChargeDoc]  # the costliest few
    cadence_action: dict[str, str] | None  # accounting/interval.py cadence_action


class CheckpointDoc(TypedDict):
    kind: str  # save | restore
    attempt: int | None
    iteration: int | None
    start: Stamp
    end: Stamp
    duration_s: float | None
    trigger: str
    slow: bool
    cause: CauseDoc | None
    chain: list[LinkDoc]
    alternatives: list[CauseDoc]
    tax: CheckpointTaxDoc | None  # explain --tax (accounting/checkpoint_tax.py)
    # exact | bounded (its lines carry no time: start and end are the dated lines around it, duration at most)
    # | inferred (its neighbours' times) | estimated (a time no line prints, from a stated duration or the next step)
    precision: str | None


class FailureDoc(TypedDict):
    attempt: int
    at: Stamp
    end: Stamp
    state: str | None
    exit_code: str | None
    cause: CauseDoc | None
    chain: list[LinkDoc]
    alternatives: list[CauseDoc]


class RestartDoc(TypedDict):
    """One restart in stages (explain/restarts.py): each stage's time as the logs date it, None where they do
    not (`undated` names those; each lies between the dated stages around it)."""

    attempt: int
    in_place: bool  # torchrun restarted the worker group inside the same Slurm attempt
    fault_at: Stamp
    noticed_at: Stamp
    ended_at: Stamp
    restarted_at: Stamp
    startup_end: Stamp
    load_start: Stamp
    load_end: Stamp
    first_step_start: Stamp
    undated: list[str]


class RestartLoopDoc(TypedDict):
    """Consecutive restarts for one cause (explain/loops.py): one incident, N restarts, their summed downtime."""

    attempts: list[int]
    restarts: int
    in_place: list[bool]
    cause: dict[str, str | None] | None  # category, host, component
    restored_iteration: int | None  # when every restart loaded the same checkpoint
    failed_iteration: int | None  # when every failed segment stopped at the same step
    first_at: Stamp
    last_at: Stamp
    downtime_s: float | None  # summed: each restart's failure to its first step (or, never trained, the next failure)
    undated_restarts: int  # restarts whose downtime the logs do not date


class ExplainDoc(TypedDict):
    schema: str  # synestra.explain/3
    job: str
    hosts: list[str]
    attempts: int
    save_cadence_iterations: int | None
    checkpoints: list[CheckpointDoc]
    failures: list[FailureDoc]
    restarts: list[RestartDoc]
    restart_loops: list[RestartLoopDoc]
    tax: ExplainTaxDoc | None  # explain --tax


def link_doc(lk: ChainLink, copied: bool = True) -> LinkDoc:
    return {
        "time": lk.time,
        "layer": lk.layer,
        "host": lk.host,
        "entity": lk.entity,
        "signal": lk.signal,
        "evidence": _copied(lk.evidence) if copied else lk.evidence,  # the document is the caller's to change
    }


IMMUTABLE = (str, int, float, bool, type(None), datetime)


def _copied(value: Any) -> Any:
    """deepcopy of JSON-like evidence (dicts, lists, tuples of scalars and datetimes) at a fraction of
    its cost (a fleet's cold report writes thousands of links); anything else through deepcopy."""
    if type(value) is dict:
        return {k: _copied(v) for k, v in value.items()}
    if type(value) is list:
        return [_copied(v) for v in value]
    if type(value) is tuple:
        return tuple(_copied(v) for v in value)
    return value if isinstance(value, IMMUTABLE) else copy.deepcopy(value)


def link_of(doc: LinkDoc) -> ChainLink:
    return ChainLink(stamp(doc["time"]), doc["layer"], doc["host"], doc["entity"], doc["signal"], doc["evidence"])


def stamp(value: Stamp) -> datetime | None:
    """A document's time as a datetime (a kept document holds ISO strings, a fresh one datetimes)."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value) if value else None
