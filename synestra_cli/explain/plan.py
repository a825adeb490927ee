"""What a non-routine checkpoint, or a failed attempt, is the effect of (`Plan`), before any telemetry is
read: the failure behind a restart (its crashes, its failed workers' exit codes, the ranks behind), the
slowdown behind a reactive save, the slow save itself; and the fallback that stands when no signal does."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from synestra_cli.explain import chain as ch
from synestra_cli.explain.attribute import Effect, effect_window
from synestra_cli.explain.evidence import (
    FALLBACK_STRAGGLER,
    OOM_STATE,
    WORKER,
    Cause,
    Evidence,
    crashes_of,
)
from synestra_cli.explain.evidence import (
    fallback as _fallback,
)
from synestra_cli.explain.evidence import (
    first_node as _first_node,
)
from synestra_cli.explain.rules import (
    POST_WINDOW_S,
    PRE_WINDOW_S,
    SCHEDULER_STOP_STATES,
    SKEW_S,
    WORKER_EXIT_VERDICTS,
)
from synestra_cli.explain.triggers import Checkpoint, Classified
from synestra_cli.signals.collectives import Laggard
from synestra_cli.signals.events import Event, Incident
from synestra_cli.signals.scope import Attempt
from synestra_cli.signals.steps import DegradationWindow


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
