"""The causal chain: ordered links from the first signal to the checkpoint, each with its evidence.

Evidence is either a metric change (before / after values, the window, the samples) or a log line
(source file and 1-based line number), so an SRE can open the file at that line and check.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from synestra_cli.explain import wording
from synestra_cli.explain.rules import ACTIVITY_METRICS, LAYERS, SKEW_S
from synestra_cli.explain.triggers import Checkpoint
from synestra_cli.shown import plural
from synestra_cli.signals.activity import StragglerHost
from synestra_cli.signals.anomalies import Anomaly
from synestra_cli.signals.collectives import Laggard
from synestra_cli.signals.events import Event, Incident
from synestra_cli.signals.scope import Attempt
from synestra_cli.signals.steps import DegradationWindow

# Layer of each job incident kind (collective: NCCL; job: the process itself).
INCIDENT_LAYER = {"nccl_timeout": "collective", "nccl_error": "collective"}


@dataclass(frozen=True)
class ChainLink:
    time: datetime | None
    layer: str
    host: str | None
    entity: str | None
    signal: str
    evidence: dict[str, Any]


def _log(path: str | None, line: int | None, text: str | None, **more: Any) -> dict[str, Any]:
    return {"type": "log", "source": path, "line": line, "text": (text or "")[:300], **more}


def from_signal(s: Anomaly | Event) -> ChainLink:
    if isinstance(s, Event):
        name = wording.event(s.kind, s.code, s.message, s.component)
        more = {"kind": s.kind, "code": s.code} if s.code is not None else {"kind": s.kind}
        return ChainLink(s.ts, s.layer, s.host, s.entity, name, _log(s.path, s.line, s.message, **more))
    count = wording.increase(s.after, s.last_normal, s.end) if s.is_rate else None
    evidence: dict[str, Any] = {
        "type": "metric",
        "metric": s.metric,
        "unit": "per_second" if s.is_rate else None,
        "before": s.before,
        "after": s.after,
        "peak": s.peak,
        "window": {"start": s.onset, "end": s.end},
        "samples": s.samples,
        "count": count if s.metric in wording.COUNTED else None,
        # where `before` came from: the job's comparable samples of this series it is a quartile of
        "baseline": {"from": s.baseline_from, "to": s.baseline_to, "samples": s.baseline_samples},
    }
    signal = wording.metric(s.metric, s.before, s.after, count, s.is_rate)
    if s.peers is not None:  # the job's other series of its metric: the evidence, or its context
        p = s.peers
        evidence["peers"] = {"series": p.series, "median": p.median, "max": p.max, "ratio": p.ratio, "found": p.found}
        if p.found:
            signal = wording.against_peers(s.metric, s.after, p.median, p.max, p.series, p.ratio)
    return ChainLink(s.onset, s.layer, s.host, s.entity, signal, evidence)


def from_window(w: DegradationWindow) -> ChainLink:
    evidence = {
        "type": "metric",
        "metric": "step_time_s",
        "unit": "s",
        "before": w.baseline_s,
        "after": w.slow_step_s,
        "peak": None,
        "window": {"start": w.first_slow, "end": w.end},
        "samples": None,
        "iterations": [w.first_iteration, w.last_iteration],
    }
    return ChainLink(w.first_slow, "throughput", None, None, f"step time x{w.factor:.2f}", evidence)


def from_straggler(s: StragglerHost, w: DegradationWindow) -> ChainLink:
    evidence = {
        "type": "metric",
        "metric": "gpu_activity_kept_ratio",
        "unit": "ratio",
        "before": s.peers_kept,
        "after": s.kept,
        "peak": None,
        "window": {"start": w.first_slow, "end": w.end},
        "samples": None,
        "metrics": list(ACTIVITY_METRICS),
    }
    what = f"GPUs stayed busy ({s.kept:.0%} of own activity kept; peers {s.peers_kept:.0%}): the others wait for it"
    return ChainLink(w.first_slow, "gpu", s.host, s.gpu, what, evidence)


def from_incident(i: Incident) -> ChainLink:
    what = i.kind + (f" ({i.collective})" if i.collective else "")
    if i.ended_by and i.kind in ("job_end", "task_exit"):  # Slurm's word for how the attempt ended
        what = f"{i.kind} ({i.ended_by.replace('_', ' ')})"
    if i.ran_for_ms:
        what += f", hang began {i.ran_for_ms / 1000:.0f} s before it was logged"
    entity = f"rank{i.rank}" if i.rank is not None else None
    return ChainLink(i.ts, INCIDENT_LAYER.get(i.kind, "job"), i.host, entity, what, _log(i.path, i.line, i.message))


def from_laggard(lag: Laggard) -> ChainLink:
    """A rank the Flight Recorder finds behind: the collective its peers wait in, and where it runs; or a rank
    NVRx's straggler detection named."""
    if lag.found_by == "nvrx_straggler_detection":
        where = f" on {lag.host}" if lag.host else ""
        what = f"rank {lag.rank}{where} is a straggler: NVRx straggler detection named it"
        more = {"kind": "straggler", "rank": lag.rank, "host_basis": lag.host_basis}
        return ChainLink(lag.ts, "job", lag.host, f"rank{lag.rank}", what, _log(lag.path, lag.line, what, **more))
    group = " ".join(x for x in (lag.pg_desc, f"(process group {lag.pg})" if lag.pg else "") if x)
    peers = f"; {plural(lag.waiting, 'peer')} {'waits' if lag.waiting == 1 else 'wait'} in it" if lag.waiting else ""
    where = f" on {lag.host}" if lag.host else ""
    basis = {"allocation": " (host from the allocation: rank // ranks per node)"}.get(lag.host_basis or "", "")
    what = (
        f"rank {lag.rank}{where} is behind: it never joined {lag.collective or 'the collective'}"
        + (f" #{lag.seq}" if lag.seq is not None else "")
        + (f" of {group}" if group else "")
        + peers
        + (f", behind in {lag.groups} process groups" if lag.groups > 1 else "")
        + f" (flight recorder{', ' + lag.found_by if lag.found_by != 'flight_recorder' else ''}){basis}"
    )
    more = {"kind": "fr_lagging_rank", "rank": lag.rank, "host_basis": lag.host_basis, "seq": lag.seq}
    return ChainLink(lag.ts, "collective", lag.host, f"rank{lag.rank}", what, _log(lag.path, lag.line, what, **more))


def from_worker(i: Incident, note: str | None) -> ChainLink:
    """A failed torchrun worker: who, its exit code and signal, and what they mean here (`note`)."""
    who = " ".join(x for x in (f"rank {i.rank}" if i.rank is not None else "", f"on {i.host}" if i.host else "") if x)
    what = f"worker {who + ' ' if who else ''}failed with exit code {i.exit_code}" + (
        f" ({i.signal})" if i.signal else ""
    )
    entity = f"rank{i.rank}" if i.rank is not None else None
    more = {"exit_code": i.exit_code, "signal": i.signal}
    return ChainLink(
        i.ts, "job", i.host, entity, what + (f": {note}" if note else ""), _log(i.path, i.line, i.message, **more)
    )


def worker_note(
    verdict: str | None, worker: Incident, oom: Incident | Event | None, watchdog: Incident | None, state: str | None
) -> str | None:
    """What a failed worker's exit code means, given what lies near it (see rules.WORKER_EXIT_VERDICTS)."""
    if verdict == "oom_kill" and oom is not None:
        where = f"{oom.path}:{oom.line}" if oom.path else "the log"
        return f"killed by the OOM killer (oom-kill line at {where})"
    if verdict == "oom_kill":
        return f"killed by the OOM killer (sacct: {state})"
    if verdict == "SIGKILL":
        return "likely an OOM kill or an external kill (kill -9, a health check): no oom-kill line near it"
    if worker.signal == "SIGABRT" and watchdog is not None:
        return "aborted by the NCCL watchdog after its collective timed out"
    if verdict == "SIGABRT":
        return "aborted: abort() or an uncaught C++ exception"
    if verdict == "exception":
        return "an uncaught Python exception"
    if verdict == "SIGTERM":
        return f"stopped by the scheduler (sacct: {state or 'signal 15'})"
    if worker.signal == "SIGTERM":
        return "stopped from outside (torchrun stops the other workers when one fails)"
    return None


def from_attempt_end(a: Attempt) -> ChainLink:
    evidence = {"type": "scheduler", "attempt": a.attempt, "state": a.state, "exit_code": a.exit_code}
    return ChainLink(a.end, "job", None, None, f"attempt {a.attempt} ended {a.state or ''}".strip(), evidence)


def from_checkpoint(cp: Checkpoint, trigger: str) -> ChainLink:
    what = f"{trigger} {cp.kind}" + (f" at iteration {cp.iteration}" if cp.iteration is not None else "")
    return ChainLink(cp.start or cp.end, "checkpoint", None, None, what, _log(cp.path, cp.line, None))


# Layers whose links are effects (a watchdog timeout, a crash, a slowdown, the checkpoint): never before
# the cause they follow from.
EFFECT_LAYERS = ("collective", "throughput", "job", "checkpoint")


def _order(lk: ChainLink, after: datetime | None = None) -> tuple:
    """Time first (links without one go last); at equal times the causal layer order, then the names,
    so that the same store always prints the same chain (SQL row order is not fixed across runs).
    `after`: the cause's first signal. An effect dated up to SKEW_S before it (the NCCL watchdog dates a
    hang from its collective's start, on the job log's clock, 2 s before the Xid that stopped the GPU
    on the kernel's) is placed at it, after the cause's own links: an effect follows what caused it."""
    layer = LAYERS.index(lk.layer) if lk.layer in LAYERS else len(LAYERS)
    t = lk.time
    early = t is not None and after is not None and after - timedelta(seconds=SKEW_S) <= t < after
    if early and lk.layer in EFFECT_LAYERS:
        t = after
    line = lk.evidence.get("line") if lk.evidence.get("type") == "log" else None
    where = (lk.host or "", lk.entity or "", str(lk.evidence.get("source") or ""), line if isinstance(line, int) else 0)
    return (t is None, t or datetime.min, layer, *where, lk.signal, lk.time or datetime.min)


def own(effects: list[ChainLink], cause: Any) -> list[ChainLink]:
    """The effect links that can be this cause's: a slowdown that began before the cause's first signal
    (another fault's, earlier in the attempt) is not its effect."""
    if cause.first_signal is None:
        return effects
    first = cause.first_signal - timedelta(seconds=SKEW_S)
    return [lk for lk in effects if lk.layer != "throughput" or lk.time is None or lk.time >= first]


def ordered(links: list[ChainLink], after: datetime | None = None) -> list[ChainLink]:
    """In causal order (_order; `after`: the cause's first signal), without duplicates."""
    seen: set[tuple] = set()
    out = []
    for lk in sorted(links, key=lambda lk: _order(lk, after)):
        key = (lk.time, lk.layer, lk.host, lk.entity, lk.signal)
        if key not in seen:
            seen.add(key)
            out.append(lk)
    return out
