"""From a classified checkpoint to its cause, alternatives and chain.

Routine checkpoints (periodic or final saves of normal duration) get no cause. For the others the
effect is found first (the failure behind a restart, the slowdown behind a reactive save, the slow
save itself), then the candidates in its window are ranked (attribute.py). When no infrastructure
signal explains it, the job's own log decides: a traceback is `software.crash`, a slowdown is
`workload.straggler` (only when the job's telemetry was there to rule the infrastructure out), and
anything else is `unknown` with low confidence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from synestra_cli.explain import chain as ch
from synestra_cli.explain.attribute import Candidate, Effect, Signal, active, confidences, effect_window, score_all
from synestra_cli.explain.rules import (
    FALLBACK_CONFIDENCE,
    MAX_ALTERNATIVES,
    MIN_SCORE,
    POST_WINDOW_S,
    PRE_WINDOW_S,
    SCHEDULER_STOP_STATES,
    SKEW_S,
    WORKER_EXIT_VERDICTS,
)
from synestra_cli.explain.triggers import Checkpoint, Classified
from synestra_cli.signals.activity import StragglerHost
from synestra_cli.signals.anomalies import Anomaly
from synestra_cli.signals.collectives import Laggard
from synestra_cli.signals.events import Event, Incident
from synestra_cli.signals.scope import Attempt, JobScope
from synestra_cli.signals.steps import DegradationWindow

FALLBACK_STRAGGLER = FALLBACK_CONFIDENCE["workload.straggler"]
CRASH_INCIDENTS = ("nccl_timeout", "nccl_error", "cuda_error", "python_exception", "oom")
# Slurm's lines that say the attempt failed (formats/slurm_lines.py): how it ended, and when; never its cause.
FAILED_ENDS = ("node_failure", "task_failure", "failed")
WORKER = "worker_failed"
OOM_STATE = "OUT_OF_MEMORY"  # sacct's state when the step's cgroup OOM-killed it


@dataclass(frozen=True)
class Cause:
    category: str
    host: str | None
    component: str | None
    first_signal: datetime | None
    confidence: float
    reported_healthy: bool = False
    # What it is and what to do about it (explain/assets.py, explain/actions.py), filled in by api.
    assets: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    action: dict[str, str] | None = field(default=None, compare=False)
    evidence: tuple[ch.ChainLink, ...] = field(default=(), compare=False)  # an alternative's own signals


@dataclass
class Reasoning:
    cause: Cause | None = None
    alternatives: list[Cause] = field(default_factory=list)
    chain: list[ch.ChainLink] = field(default_factory=list)


@dataclass
class Evidence:
    """Everything found in the job's scope, computed once per job."""

    scope: JobScope
    signals: list[Signal]
    windows: list[DegradationWindow]
    incidents: list[Incident]
    observed: bool = False  # any telemetry of the job's hosts: without it, "not the infrastructure" is a guess
    # (hosts, healthy until, slow from, until, since) -> the straggler's host, read only when needed
    stragglers: Callable[..., StragglerHost | None] | None = None
    laggards: list[Laggard] = field(default_factory=list)  # ranks behind in a collective (Flight Recorder)


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


def _first_node(att: Attempt | None) -> str | None:
    """Rank 0's node: Slurm's batch host, the first of the allocation."""
    return att.nodes[0] if att and att.nodes else None


def _fallback(category: str, host: str | None = None, at: datetime | None = None) -> Cause:
    return Cause(category, host, None, at, FALLBACK_CONFIDENCE[category])


@dataclass
class Plan:
    """What a non-routine checkpoint is the effect of, before any telemetry is read."""

    effect: Effect | None  # None: nothing to attribute (the fallback stands)
    attempt: int | None  # whose hosts may hold the cause
    links: list[ch.ChainLink]  # the effect side of the chain
    fallback: Cause  # what to say when no candidate survives
    window: DegradationWindow | None = None  # the slowdown a reactive save reacts to


def _plan_restart(cl: Classified, ev: Evidence) -> Plan:
    """A restore after a failure: the failure of the attempt before it is the effect; for torchrun's restart in
    place (a `Worker group FAILED ... will restart` before the restore in its own attempt), the failure of that
    attempt before the restore (its nodes, its crashes before it; it has not ended)."""
    cp = cl.checkpoint
    if _in_place(cp, ev):
        own = next((a for a in ev.scope.attempts if a.attempt == cp.attempt), None)
        failed = replace(own, end=None) if own is not None else None
        # its failure came after the attempt's previous restart in place, if any: the agent's lines before this
        # restore report this failure (the last) and the ones before it
        reported = sorted(i.ts for i in ev.incidents if _restarted(i, cp) and i.ts)
        since = reported[-2] if len(reported) > 1 else None
        return _plan_failure(failed, cp.attempt, ev, ch.from_checkpoint(cp, cl.trigger), cp.start, since)
    prev = [a for a in ev.scope.attempts if cp.attempt is not None and a.attempt < cp.attempt]
    failed = prev[-1] if prev else None
    att_no = failed.attempt if failed else cp.attempt
    return _plan_failure(failed, att_no, ev, ch.from_checkpoint(cp, cl.trigger), cp.start)


def _restarted(i: Incident, cp: Checkpoint) -> bool:
    return i.kind == "elastic_restart" and i.attempt == cp.attempt and bool(i.ts and cp.start and i.ts <= cp.start)


def _in_place(cp: Checkpoint, ev: Evidence) -> bool:
    """torchrun restarted the worker group inside the restore's own attempt before it."""
    return any(_restarted(i, cp) for i in ev.incidents)


def plan_attempt_failure(att: Attempt, ev: Evidence) -> Plan:
    """An attempt that failed with no restore after it (it crashed before its first save, or was
    never requeued): explained like a restart, the attempt's end standing in for the restore."""
    return _plan_failure(att, att.attempt, ev, None, att.end)


def crashes_of(ev: Evidence, attempt: int | None) -> list[Incident]:
    """The attempt's timed errors, and its failed workers (timed or not: torchrun's pylogging lines carry no
    time) but those stopped by SIGTERM, which follow another's failure or the scheduler's stop; and Slurm's
    lines that say it failed (a node failure, a task failure), which date its end and are evidence of how it
    ended, not of why."""
    return [
        i
        for i in ev.incidents
        if i.attempt == attempt
        and (
            (i.kind in CRASH_INCIDENTS and i.ts)
            or (i.kind == WORKER and i.signal != "SIGTERM")
            or (i.kind == "job_end" and i.ended_by in FAILED_ENDS and i.ts)
            or (i.kind == "task_exit" and i.signal != "SIGTERM" and i.ts)
        )
    ]


def _primary_worker(workers: list[Incident]) -> Incident:
    """The failure torchrun names the root cause, else the first worker that did not just get SIGTERM."""
    named = [i for i in workers if i.root_cause] or [i for i in workers if i.signal != "SIGTERM"] or workers
    return min(named, key=lambda i: (i.ts is None, i.ts or datetime.min, i.line or 0))


def _oom_near(ev: Evidence, att_no: int | None, host: str | None, ts: datetime | None) -> Incident | Event | None:
    """An oom-kill line near a SIGKILL: slurmstepd's or srun's in the job's log (the same attempt), or the
    kernel's on the worker's host, from PRE_WINDOW_S before it to POST_WINDOW_S after."""

    def near(t: datetime | None) -> bool:
        if ts is None or t is None:
            return True  # an untimed line of the same attempt's log
        return -PRE_WINDOW_S <= (t - ts).total_seconds() <= POST_WINDOW_S

    slurm = [i for i in ev.incidents if i.kind == "oom" and i.attempt == att_no and near(i.ts)]
    kernel = [
        s
        for s in ev.signals
        if isinstance(s, Event) and s.category == "host.oom" and (host is None or s.host == host) and near(s.ts)
    ]
    return next(iter(slurm), None) or next(iter(kernel), None)


def _stopped_by_scheduler(att: Attempt | None) -> bool:
    """sacct agrees that the scheduler stopped the attempt: CANCELLED / PREEMPTED, or signal 15."""
    if att is None:
        return False
    return (att.state or "").upper().startswith(SCHEDULER_STOP_STATES) or (att.exit_code or "").endswith(":15")


def _worker_verdict(
    ev: Evidence, failed: Attempt | None, att_no: int | None
) -> tuple[Cause | None, list[ch.ChainLink]]:
    """What the failed workers' exit codes say (rules.WORKER_EXIT_VERDICTS), and their chain links."""
    workers = [i for i in ev.incidents if i.attempt == att_no and i.kind == WORKER]
    if not workers:
        return None, []
    p = _primary_worker(workers)
    key: str | None = p.signal if p.signal in WORKER_EXIT_VERDICTS else None
    oom = _oom_near(ev, att_no, p.host, p.ts) if p.signal == "SIGKILL" else None
    sacct_oom = p.signal == "SIGKILL" and failed is not None and (failed.state or "").upper().startswith(OOM_STATE)
    watchdog = [i for i in ev.incidents if i.attempt == att_no and i.kind == "nccl_timeout"]
    if oom is not None or sacct_oom:
        key = "oom_kill"
    elif p.signal is None and p.exit_code == 1:
        key = "exception"
    elif p.signal == "SIGABRT" and watchdog:
        key = None  # the watchdog's timeout is the story: its cause is the failure's
    elif p.signal == "SIGTERM" and not _stopped_by_scheduler(failed):
        key = None
    note = ch.worker_note(key, p, oom, watchdog[0] if watchdog else None, failed.state if failed else None)
    others = [i for i in workers if i is not p and i.signal != "SIGTERM"]
    links = [ch.from_worker(p, note), *(ch.from_worker(i, None) for i in others)]
    if key is None:
        return None, links
    category, confidence = WORKER_EXIT_VERDICTS[key]
    host = None if category == "scheduler.preemption" else p.host or (oom.host if oom else None) or _first_node(failed)
    return Cause(category, host, None, p.ts or (oom.ts if oom else None), confidence), links


def laggards_of(ev: Evidence, failed: Attempt | None, att_no: int | None) -> list[Laggard]:
    """The ranks the Flight Recorder finds behind in this attempt (most process groups behind first);
    dumps the store could not place in an attempt are taken for the attempt when their time falls in it."""

    def during(t: datetime | None) -> bool:
        return failed is None or t is None or failed.start is None or failed.start <= t <= (failed.end or t)

    return [lag for lag in ev.laggards if lag.attempt == att_no or (lag.attempt is None and during(lag.ts))]


def _plan_failure(
    failed: Attempt | None,
    att_no: int | None,
    ev: Evidence,
    tail: ch.ChainLink | None,
    deadline: datetime | None,
    since: datetime | None = None,
) -> Plan:
    """The failure of attempt `att_no` is the effect; nothing at or after `deadline` caused it (nor, restarted
    in place, anything of the attempt before `since`)."""
    crashes = [i for i in crashes_of(ev, att_no) if since is None or i.ts is None or i.ts > since]
    crash_times = [i.ts for i in crashes if i.ts]
    end = failed.end if failed else None
    times = crash_times + ([end] if end else [])
    at = min(times) if times else deadline  # None: nothing dates the failure (a real log's worker exit alone)
    verdict, worker_links = _worker_verdict(ev, failed, att_no)
    links = [ch.from_incident(i) for i in crashes if i.kind != WORKER] + worker_links
    links += [ch.from_attempt_end(failed)] if failed and end else []
    links += [ch.from_window(w) for w in ev.windows if w.attempt == att_no and at is not None and w.end <= at]
    links += [tail] if tail else []
    behind = laggards_of(ev, failed, att_no)
    links += [ch.from_laggard(lag) for lag in behind]
    kinds = {i.kind for i in crashes}
    host = next((i.host for i in crashes if i.host), _first_node(failed))
    if kinds & {"python_exception", "cuda_error"}:
        fallback = _fallback("software.crash", host, min(crash_times, default=None))
    elif verdict is not None:
        fallback = verdict
    elif "oom" in kinds:
        fallback = Cause("host.oom", host, None, at, 0.6)
    elif behind:
        # a hang with no infrastructure signal: the rank its peers wait for is where to look
        lag = behind[0]
        fallback = Cause("workload.straggler", lag.host, f"rank{lag.rank}", lag.ts or at, FALLBACK_STRAGGLER)
    else:
        fallback = _fallback("unknown")
    if fallback.category == "scheduler.preemption" or at is None:
        # the scheduler stopped it: no host of the job to blame; or no time to read any telemetry around
        return Plan(None, att_no, links, fallback)
    # without a restore, anything up to the attempt's end (plus skew) may have caused it
    limit = deadline + timedelta(seconds=SKEW_S) if tail is None and deadline else (deadline or at)
    return Plan(effect_window(at, end, limit, "crash"), att_no, links, fallback)


def _window_before(
    cp_start: datetime, attempt: int | None, windows: list[DegradationWindow]
) -> DegradationWindow | None:
    """The slowdown a reactive save reacts to: the latest one that began before it, recent enough."""
    recent = cp_start - timedelta(seconds=PRE_WINDOW_S)
    skew = timedelta(seconds=SKEW_S)
    fits = [w for w in windows if w.attempt == attempt and w.first_slow <= cp_start + skew and w.end >= recent]
    return max(fits, key=lambda w: w.first_slow, default=None)


def _plan_reactive(cl: Classified, ev: Evidence) -> Plan:
    cp = cl.checkpoint
    start = cp.start or cp.end
    w = _window_before(start, cp.attempt, ev.windows) if start else None
    links = [ch.from_checkpoint(cp, cl.trigger)]
    if w is None or start is None:
        return Plan(None, cp.attempt, links, _fallback("unknown"))
    links.append(ch.from_window(w))
    # The job reacted at the save: the freshest trouble before it is the likeliest trigger, and a
    # slowdown that began long before (another fault) fades with its age.
    effect = effect_window(start, start, start, "slowdown")
    fallback = _fallback("workload.straggler", None, w.first_slow) if ev.observed else _fallback("unknown")
    return Plan(effect, cp.attempt, links, fallback, w)


def _plan_slow_save(cl: Classified, ev: Evidence) -> Plan:
    cp = cl.checkpoint
    links = [ch.from_checkpoint(cp, cl.trigger)]
    if cp.start is None:
        return Plan(None, cp.attempt, links, _fallback("unknown"))
    end = cp.end or cp.start
    return Plan(Effect("slow_save", cp.start, end, end), cp.attempt, links, _fallback("unknown"))


def plan(cl: Classified, ev: Evidence) -> Plan | None:
    """The effect to explain for a restart, a reactive or a slow save; None for the others."""
    if cl.trigger == "restart":
        return _plan_restart(cl, ev)
    if cl.trigger == "reactive":
        return _plan_reactive(cl, ev)
    if cl.slow and cl.trigger != "preemption":
        return _plan_slow_save(cl, ev)
    return None


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
