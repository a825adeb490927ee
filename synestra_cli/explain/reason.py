"""From a classified checkpoint to its cause, alternatives and chain.

Routine checkpoints (periodic or final saves of normal duration) get no cause. For the others the
effect is found first (the failure behind a restart, the slowdown behind a reactive save, the slow
save itself), then the candidates in its window are ranked (attribute.py). When no infrastructure
signal explains it, the job's own log decides: a traceback is `software.crash`, a slowdown is
`workload.straggler` (only when the job's telemetry was there to rule the infrastructure out), and
anything else is `unknown` with low confidence. The effect is planned in explain/plan.py; what the
reasoning reads and answers (Evidence, Cause, Reasoning) is in explain/evidence.py.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from synestra_cli.explain import chain as ch
from synestra_cli.explain.attribute import Candidate, Effect, active, confidences, score_all
from synestra_cli.explain.evidence import Cause, Evidence, Reasoning
from synestra_cli.explain.evidence import fallback as _fallback
from synestra_cli.explain.plan import plan, plan_attempt_failure
from synestra_cli.explain.rules import MAX_ALTERNATIVES, MIN_SCORE
from synestra_cli.explain.triggers import Classified
from synestra_cli.signals.anomalies import Anomaly
from synestra_cli.signals.scope import Attempt, JobScope
from synestra_cli.signals.steps import DegradationWindow


def _hosts_of(ev: Evidence, attempt: int | None) -> set[str]:
    att = next((a for a in ev.scope.attempts if a.attempt == attempt), None)
    hosts = set(att.nodes) if att and att.nodes else set(ev.scope.hosts)
    return hosts | {lk.switch for lk in ev.scope.links if lk.host in hosts and lk.switch}


def _endpoints(c: Candidate, scope: JobScope) -> set[tuple[str, str | None]]:
    """Both ends of the cable a candidate sits on: (host, nic) and (switch, port), from topology."""
    entity = c.component.split(":", 1)[1] if c.component and c.component.startswith(f"{c.host}:") else c.component
    ends = {(c.host or "", entity)}
    for lk in scope.links:
        if (lk.switch, lk.switch_port) in ends or (lk.host, lk.nic) in ends:
            ends |= {(lk.host, lk.nic), (lk.switch or "", lk.switch_port)}
    return ends


def _healthy(c: Candidate, ev: Evidence, effect: Effect) -> bool:
    """A lossy link is 'reported healthy' when nothing at either end of it says it went down."""
    ends = _endpoints(c, ev.scope)
    return not any(
        s.category == "network.link_down" and (s.host, (s.entity or "").split(":")[0]) in ends and active(s, effect)
        for s in ev.signals
    )


def _as_cause(c: Candidate, conf: float, ev: Evidence, effect: Effect) -> Cause:
    healthy = c.category == "network.link_degraded" and _healthy(c, ev, effect)
    return Cause(c.category, c.host, c.component, c.first_signal, conf, healthy)


def _attribute(
    ev: Evidence, effect: Effect, attempt: int | None, effects: list[ch.ChainLink], fallback: Cause
) -> Reasoning:
    hosts = _hosts_of(ev, attempt)
    signals = [s for s in ev.signals if s.host in hosts]
    scored = score_all(signals, ev.scope, effect)
    all_cands = [c for c in scored if c.score >= MIN_SCORE]
    if not all_cands:
        return _thin(fallback, [c for c in scored if c.score > 0], ev, effect, effects)
    confs = confidences(all_cands)
    causes = [_as_cause(c, conf, ev, effect) for c, conf in zip(all_cands, confs, strict=True)]
    links = [ch.from_signal(s) for s in all_cands[0].signals if isinstance(s, Anomaly) or s.ts <= effect.deadline]
    alts = [
        replace(a, evidence=tuple(ch.ordered([ch.from_signal(s) for s in c.signals])))
        for a, c in zip(causes[1 : 1 + MAX_ALTERNATIVES], all_cands[1 : 1 + MAX_ALTERNATIVES], strict=True)
    ]
    return Reasoning(causes[0], alts, ch.ordered(links + ch.own(effects, causes[0]), causes[0].first_signal))


def _thin(
    fallback: Cause, weak: list[Candidate], ev: Evidence, effect: Effect, effects: list[ch.ChainLink]
) -> Reasoning:
    """No candidate reaches MIN_SCORE: the fallback stands, but infrastructure evidence too thin to name
    is not nothing. The fallback's confidence drops by the strongest of it, which is listed as the
    alternatives (with their own, low, confidence)."""
    if not weak:
        return Reasoning(fallback, [], ch.ordered(effects))
    alts = [_as_cause(c, conf, ev, effect) for c, conf in zip(weak, confidences(weak), strict=True)]
    lowered = replace(fallback, confidence=round(fallback.confidence * (1.0 - weak[0].score), 3))
    return Reasoning(lowered, alts[:MAX_ALTERNATIVES], ch.ordered(effects))


def _preemption(cl: Classified, ev: Evidence) -> Reasoning:
    cp = cl.checkpoint
    att_no = (
        cp.attempt
        if cp.kind == "save"
        else max(
            (a.attempt for a in ev.scope.attempts if cp.attempt is not None and a.attempt < cp.attempt),
            default=None,
        )
    )
    sig = [i for i in ev.incidents if i.attempt == att_no and i.kind == "sigterm"]
    att = next((a for a in ev.scope.attempts if a.attempt == att_no), None)
    links = [ch.from_incident(i) for i in sig] + ([ch.from_attempt_end(att)] if att and att.end else [])
    links.append(ch.from_checkpoint(cp, cl.trigger))
    first = min([i.ts for i in sig if i.ts] + ([att.end] if att and att.end else []), default=None)
    # The scheduler took the nodes back: no host of the job is at fault.
    return Reasoning(_fallback("scheduler.preemption", None, first), [], ch.ordered(links))


def reason_failure(att: Attempt, ev: Evidence) -> Reasoning:
    """Cause, alternatives and chain of an attempt failure that no restore explains."""
    p = plan_attempt_failure(att, ev)
    if p.effect is None:
        return Reasoning(p.fallback, [], ch.ordered(p.links))
    return _attribute(ev, p.effect, p.attempt, p.links, p.fallback)


def reason(cl: Classified, ev: Evidence) -> Reasoning:
    """Cause, alternatives and chain of one classified checkpoint (none for a routine one)."""
    if cl.trigger == "preemption":
        return _preemption(cl, ev)
    p = plan(cl, ev)
    if p is None:
        return Reasoning()
    if p.effect is None:
        return Reasoning(p.fallback, [], ch.ordered(p.links))
    r = _attribute(ev, p.effect, p.attempt, p.links, p.fallback)
    if r.cause is not None and r.cause.category == "workload.straggler" and p.window is not None:
        r = _straggler(r, ev, p.window, p.attempt, p.effect.at)
    return r


def _straggler(r: Reasoning, ev: Evidence, w: DegradationWindow, attempt: int | None, at: datetime) -> Reasoning:
    """Name the straggler's host when its GPUs stayed busy while its peers' activity fell."""
    att = next((a for a in ev.scope.attempts if a.attempt == attempt), None)
    hosts = sorted(att.nodes) if att and att.nodes else ev.scope.hosts
    found = ev.stragglers(hosts, w.onset, w.first_slow, at, att.start if att else None) if ev.stragglers else None
    if found is None or r.cause is None:
        return r
    cause = replace(r.cause, host=found.host, confidence=found.confidence)
    link = ch.from_straggler(found, w)
    return Reasoning(cause, r.alternatives, ch.ordered([*r.chain, link], cause.first_signal))
