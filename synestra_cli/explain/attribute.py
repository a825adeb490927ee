"""Score candidate causes for one effect (a slowdown, a crash, a slow save) and rank them.

A candidate is one (category, host, component) with all its signals inside the job's scope and the
effect's window. Its score is the noisy-OR of its signals, each weighted by the rule's weight, the
causal template's prior for this effect, precedence (a cause precedes its effect, within the clock
skew), magnitude (how far past its own baseline) and specificity (one component vs. many).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from synestra_cli.explain.rules import (
    FLAG_METRICS,
    HOST_LEVEL_METRICS,
    ORDINARY_WEIGHT,
    POST_WINDOW_S,
    PRE_WINDOW_S,
    RACK_CATEGORIES,
    SKEW_S,
    SPREAD_PEER_DECADES,
    SPREAD_PENALTY,
    TEMPLATES,
)
from synestra_cli.signals.anomalies import Anomaly
from synestra_cli.signals.events import Event
from synestra_cli.signals.scope import JobScope

Signal = Anomaly | Event


@dataclass(frozen=True)
class Effect:
    kind: str  # slowdown | crash | slow_save
    at: datetime  # the effect: a failure's hang start or crash; a reactive or slow save's start
    until: datetime  # latest time a late-detected cause may still appear (failure + 5 min)
    deadline: datetime  # nothing at or after the checkpoint can have caused it


@dataclass
class Candidate:
    category: str
    host: str | None
    component: str | None
    signals: list[Signal] = field(default_factory=list)
    score: float = 0.0

    @property
    def first_signal(self) -> datetime:
        """Each signal bounds the start between two samples (an event: exactly); the start is the
        middle of the bounds the signals share, from the earliest signal on."""
        bounds = sorted(
            (s.bounds if isinstance(s, Anomaly) else (s.ts, s.ts) for s in self.signals), key=lambda b: b[1]
        )
        lo, hi = bounds[0]
        for a, b in bounds[1:]:
            if a <= hi and b >= lo:
                lo, hi = max(lo, a), min(hi, b)
        return lo + (hi - lo) / 2


def _onset(s: Signal) -> datetime:
    return s.onset if isinstance(s, Anomaly) else s.ts


def _cable(s: Signal, scope: JobScope) -> tuple[str, str | None] | None:
    """The host end (host, nic) of the cable a network signal sits on, from either end (topology)."""
    entity = (s.entity or "").split(":")[0] or None
    lk = scope.link_at((s.host, s.entity), (s.host, entity))
    return (lk.host, lk.nic) if lk else None


def _key(s: Signal, scope: JobScope) -> tuple[str, str, str, str]:
    """(category, what, where, which): a cable (both ends), a filesystem server, a rack's
    environment, a host (a node-level signal: power brake, HW slowdown), or one component of one host."""
    if isinstance(s, Event) and s.category == "storage.slow" and s.component:
        return s.category, "fs", s.component, ""
    cable = _cable(s, scope) if s.category.startswith("network.") else None
    if cable:
        return s.category, "cable", cable[0], cable[1] or ""
    if isinstance(s, Anomaly) and s.metric in HOST_LEVEL_METRICS:
        return s.category, "host", s.host, ""
    rack = scope.rack_of(s.host) if s.category in RACK_CATEGORIES else None
    if rack:
        return s.category, "rack", rack, ""
    return s.category, "unit", s.host, s.entity or ""


def _named(key: tuple[str, str, str, str], signals: list[Signal], scope: JobScope) -> Candidate:
    """Name a group: the host end of a cable unless only its switch end spoke; a filesystem by its
    server (host: the first client to complain); a rack when several of its hosts are hot or capped, a host
    when several of its GPUs are (and no other host of its rack), else the one GPU; a switch port as
    switch:port."""
    cat, what, where, which = key
    first = min(signals, key=lambda s: (_onset(s), s.host, s.entity or ""))  # ties: by name, not by row order
    if what == "fs":
        return Candidate(cat, first.host, where, signals)
    if what == "cable" and any(s.host in scope.hosts for s in signals):
        return Candidate(cat, where, which or None, signals)
    if what == "rack" and len({s.host for s in signals}) >= 2:
        return Candidate(cat, None, where, signals)  # the rack's, not one of its hosts: the same name in every job
    if what in ("host", "rack") and len({s.entity for s in signals}) >= 2:
        # several GPUs of one host: that host's (its power supply, its fans, a cap set on it), not its rack's
        return Candidate(cat, first.host if what == "rack" else where, None, signals)
    if first.host not in scope.hosts:
        return Candidate(cat, first.host, f"{first.host}:{first.entity}", signals)
    return Candidate(cat, first.host, first.entity, signals)


def _ordinary(s: Signal) -> bool:
    return isinstance(s, Anomaly) and s.ordinary


def _magnitude(s: Signal) -> float:
    if isinstance(s, Event) or s.metric in FLAG_METRICS:
        return 1.0
    return min(1.0, 0.5 + 0.15 * math.log10(max(s.magnitude, 1.0)))


def _precedence(s: Signal, effect: Effect) -> float:
    """Timing: 1 at the effect (+ skew), 0.7 ten minutes before, 0.2 from thirty minutes before; 0.3
    if detected late; 0 at or after the checkpoint. Of two faults the fresher is the likelier trigger.
    A save slowed by an outage still going on when it started is that outage's, however old."""
    skew = timedelta(seconds=SKEW_S)
    onset = _onset(s)
    if onset >= effect.deadline or onset > effect.until:
        return 0.0
    if onset > effect.at + skew:
        return 0.3
    if effect.kind == "slow_save" and s.end >= effect.at - skew:
        return 1.0
    lead = max(0.0, (effect.at - onset).total_seconds())
    if lead <= PRE_WINDOW_S:
        return 1.0 - 0.3 * lead / PRE_WINDOW_S
    return max(0.2, 0.7 - 0.5 * (lead - PRE_WINDOW_S) / (2 * PRE_WINDOW_S))


def active(s: Signal, effect: Effect) -> bool:
    """A signal still active within the window before the effect (a long-running fault counts)."""
    return _active(s, effect.at - timedelta(seconds=PRE_WINDOW_S), effect.deadline)


def _active(s: Signal, since: datetime, deadline: datetime) -> bool:
    return s.end >= since and _onset(s) < deadline


def _group(signals: list[Signal], scope: JobScope, effect: Effect) -> list[Candidate]:
    groups: dict[tuple[str, str, str, str], list[Signal]] = {}
    kinds = TEMPLATES[effect.kind]
    since = effect.at - timedelta(seconds=PRE_WINDOW_S)  # once per effect, not once per signal
    for s in signals:  # the category first: a dict lookup
        if s.category in kinds and _active(s, since, effect.deadline):
            groups.setdefault(_key(s, scope), []).append(s)
    return [_named(k, sig, scope) for k, sig in groups.items()]


def _score(c: Candidate, effect: Effect, peers: int) -> float:
    """prior x strength (noisy-OR of the signals' weight x magnitude) x timing (the best-timed
    signal: outside the noisy-OR, so that many signals cannot drown when they happened) x specificity."""
    timed = [(s, p) for s in c.signals if (p := _precedence(s, effect)) > 0]
    if not timed:
        return 0.0
    miss = 1.0
    for s, _ in timed:
        miss *= 1.0 - min(1.0, s.weight * _magnitude(s) * (ORDINARY_WEIGHT if _ordinary(s) else 1.0))
    timing = max(p for _, p in timed)
    specificity = 1.0 / (1.0 + SPREAD_PENALTY * max(0, peers - 1))
    return TEMPLATES[effect.kind].get(c.category, 0.0) * (1.0 - miss) * timing * specificity


def _excess(c: Candidate) -> float:
    """How far the candidate's strongest signal went past its own baseline, on the magnitude scale."""
    return max(_magnitude(s) for s in c.signals)


def _peers(cands: list[Candidate]) -> list[int]:
    """For each candidate, those of its category (itself included) whose strongest signal is within
    SPREAD_PEER_DECADES of its own. Many ports alike is the fabric's (or the fleet's background), and
    each weighs less; one port orders of magnitude past all the others is specific however many stray
    errors a big job shows elsewhere (2,048 NICs always hold a few)."""
    excess = [(c.category, _excess(c)) for c in cands]
    spread = 0.15 * SPREAD_PEER_DECADES  # _magnitude: 0.15 per decade of excess
    ranked: dict[str, list[float]] = {}  # per category, sorted: a count by bisection, not by every pair
    for cat, e in excess:
        ranked.setdefault(cat, []).append(e)
    for es in ranked.values():
        es.sort()
    return [len(ranked[cat]) - bisect_left(ranked[cat], top - spread) for cat, top in excess]


def score_all(signals: list[Signal], scope: JobScope, effect: Effect) -> list[Candidate]:
    """Every candidate with its score, best first (ties: the earlier first signal, then by name, so that
    the same store always gives the same answer, whatever order the rows came in)."""
    cands = _group(signals, scope, effect)
    for c, peers in zip(cands, _peers(cands), strict=True):
        c.score = _score(c, effect, peers)
    return sorted(cands, key=lambda c: (-c.score, c.first_signal, c.category, c.host or "", c.component or ""))


def confidences(cands: list[Candidate]) -> list[float]:
    """Each candidate's share of the evidence, discounted when its own evidence is thin."""
    total = sum(c.score for c in cands) + 0.1
    return [round(c.score / total * min(1.0, c.score + 0.2), 3) for c in cands]


def effect_window(at: datetime, failure_end: datetime | None, deadline: datetime, kind: str) -> Effect:
    until = (failure_end or at) + timedelta(seconds=POST_WINDOW_S)
    return Effect(kind, at, min(until, deadline), deadline)
