"""Score candidate causes for one effect (a slowdown, a crash, a slow save) and rank them.

A candidate is one (category, host, component) with all its signals inside the job's scope and the
effect's window. Its score is the noisy-OR of its signals, each weighted by the rule's weight, the
causal template's prior for this effect, precedence (a cause precedes its effect, within the clock
skew), magnitude (how far past its own baseline) and specificity (one component vs. many).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from synestra_cli.explain.rules import (
    MIN_SCORE,
    POST_WINDOW_S,
    PRE_WINDOW_S,
    SKEW_S,
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
    at: datetime  # when the job first felt it (hang start, degradation onset, save start)
    until: datetime  # latest time a late-detected cause may still appear (failure + 5 min)
    deadline: datetime  # nothing at or after the checkpoint can have caused it


@dataclass
class Candidate:
    category: str
    host: str
    component: str | None
    signals: list[Signal] = field(default_factory=list)
    score: float = 0.0

    @property
    def first_signal(self) -> datetime:
        return min(_onset(s) for s in self.signals)


def _onset(s: Signal) -> datetime:
    return s.onset if isinstance(s, Anomaly) else s.ts


def _key(s: Signal, scope: JobScope) -> tuple[str, str, str | None]:
    """(category, host, component): switch ports are named switch:port, storage by its server."""
    if isinstance(s, Event) and s.category == "storage.slow" and s.component:
        return s.category, s.component, s.component
    if s.host not in scope.hosts:
        return s.category, s.host, f"{s.host}:{s.entity}"
    return s.category, s.host, s.entity


def _magnitude(s: Signal) -> float:
    if isinstance(s, Event):
        return 1.0
    m = s.magnitude
    return 1.0 if math.isinf(m) else min(1.0, 0.6 + 0.2 * math.log10(max(m, 1.0)))


def _precedence(onset: datetime, effect: Effect) -> float:
    """1 up to the effect (+ skew), fading to 0 over the 10 min before; 0.3 if detected late."""
    skew = timedelta(seconds=SKEW_S)
    if onset >= effect.deadline or onset > effect.until:
        return 0.0
    if onset > effect.at + skew:
        return 0.3
    lead = (effect.at - onset).total_seconds()
    return 1.0 if lead <= PRE_WINDOW_S else max(0.2, 1.0 - (lead - PRE_WINDOW_S) / (2 * PRE_WINDOW_S))


def active(s: Signal, effect: Effect) -> bool:
    """A signal still active within the window before the effect (a long-running fault counts)."""
    end = s.end if isinstance(s, Anomaly) else s.ts
    return end >= effect.at - timedelta(seconds=PRE_WINDOW_S) and _onset(s) < effect.deadline


def _group(signals: list[Signal], scope: JobScope, effect: Effect) -> list[Candidate]:
    by_key: dict[tuple[str, str, str | None], Candidate] = {}
    for s in signals:
        if not active(s, effect) or s.category not in TEMPLATES[effect.kind]:
            continue
        key = _key(s, scope)
        by_key.setdefault(key, Candidate(*key)).signals.append(s)
    return _merge_racks(list(by_key.values()), scope)


def _merge_racks(cands: list[Candidate], scope: JobScope) -> list[Candidate]:
    """Thermal or power trouble on several hosts of one rack is the rack's (cooling, PDU)."""
    out: list[Candidate] = []
    for cat in ("cooling.thermal", "power.capping"):
        racks: dict[str, list[Candidate]] = {}
        for c in cands:
            rack = scope.rack_of(c.host) if c.category == cat else None
            if rack:
                racks.setdefault(rack, []).append(c)
        for rack, group in racks.items():
            if len({c.host for c in group}) >= 2:
                merged = Candidate(cat, min(c.host for c in group), rack, [s for c in group for s in c.signals])
                out.append(merged)
                cands = [c for c in cands if c not in group]
    return cands + out


def _score(c: Candidate, effect: Effect, spread: dict[str, int]) -> float:
    prior = TEMPLATES[effect.kind].get(c.category, 0.0)
    miss = 1.0
    for s in c.signals:
        miss *= 1.0 - min(1.0, s.weight * _magnitude(s) * _precedence(_onset(s), effect))
    specificity = 1.0 / (1.0 + SPREAD_PENALTY * max(0, spread.get(c.category, 1) - 1))
    return prior * (1.0 - miss) * specificity


def rank(signals: list[Signal], scope: JobScope, effect: Effect) -> list[Candidate]:
    """Candidates above MIN_SCORE, best first (ties: the earlier first signal)."""
    cands = _group(signals, scope, effect)
    spread: dict[str, int] = {}
    for c in cands:
        spread[c.category] = spread.get(c.category, 0) + 1
    for c in cands:
        c.score = _score(c, effect, spread)
    kept = [c for c in cands if c.score >= MIN_SCORE]
    return sorted(kept, key=lambda c: (-c.score, c.first_signal))


def confidences(cands: list[Candidate]) -> list[float]:
    """Each candidate's share of the evidence, discounted when its own evidence is thin."""
    total = sum(c.score for c in cands) + 0.1
    return [round(c.score / total * min(1.0, c.score + 0.2), 3) for c in cands]


def effect_window(at: datetime, failure_end: datetime | None, deadline: datetime, kind: str) -> Effect:
    until = (failure_end or at) + timedelta(seconds=POST_WINDOW_S)
    return Effect(kind, at, min(until, deadline), deadline)
