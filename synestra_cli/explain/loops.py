"""A job's restarts as explain's JSON: each restart's stages, and restart loops (issue 37 item 5).

A restart loop is a run of two or more consecutive restarts for one cause: the same host and component (a GPU,
a link) or, where the cause names none, the same category; or the same checkpoint restored and failing again
at the same step. It is one incident with N restarts and their summed downtime, not N unrelated stories.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from synestra_cli.explain.document import RestartDoc, RestartLoopDoc
from synestra_cli.explain.evidence import Cause
from synestra_cli.explain.restarts import STAGES, Restart

CauseKey = tuple[str, str | None, str | None]
UNNAMED = ("unknown",)  # a cause that names nothing cannot make restarts alike


def cause_key(c: Cause | None) -> CauseKey | None:
    if c is None or c.category in UNNAMED:
        return None
    return (c.category, c.host, c.component)


def restart_doc(r: Restart) -> RestartDoc:
    s = r.stages
    return {
        "attempt": r.attempt,
        "in_place": r.in_place,
        "fault_at": s["fault_at"],
        "noticed_at": s["noticed_at"],
        "ended_at": s["ended_at"],
        "restarted_at": s["restarted_at"],
        "startup_end": s["startup_end"],
        "load_start": s["load_start"],
        "load_end": s["load_end"],
        "first_step_start": s["first_step_start"],
        "undated": r.undated,
    }


def _alike(a: Restart, b: Restart) -> bool:
    if a.cause_key is not None and b.cause_key is not None:
        ka, kb = a.cause_key, b.cause_key
        return (ka[1], ka[2]) == (kb[1], kb[2]) if ka[1] is not None or ka[2] is not None else ka[0] == kb[0]
    # the same checkpoint restored, failing again at the same step
    return (
        a.restored_iteration is not None
        and a.restored_iteration == b.restored_iteration
        and a.failed_iteration is not None
        and b.failed_iteration is not None
        and a.failed_iteration == b.failed_iteration
    )


def _runs(restarts: list[Restart]) -> Iterable[list[Restart]]:
    run: list[Restart] = []
    for r in restarts:
        if run and _alike(run[-1], r):
            run.append(r)
            continue
        if len(run) >= 2:
            yield run
        run = [r]
    if len(run) >= 2:
        yield run


def restart_loops(restarts: list[Restart], causes: dict[int, Cause | None]) -> list[RestartLoopDoc]:
    """The runs of alike restarts; `causes`: each restart's cause by its index in `restarts`."""
    out: list[RestartLoopDoc] = []
    index = {id(r): k for k, r in enumerate(restarts)}
    for run in _runs(restarts):
        cause = causes.get(index[id(run[0])])
        first = [t for r in run if (t := _first_stage(r)) is not None]
        downtime = [d for k, r in enumerate(run) if (d := _downtime(r, run[k + 1] if k + 1 < len(run) else None))]
        out.append(
            {
                "attempts": [r.attempt for r in run],
                "restarts": len(run),
                "in_place": [r.in_place for r in run],
                "cause": (
                    {"category": cause.category, "host": cause.host, "component": cause.component} if cause else None
                ),
                "restored_iteration": run[0].restored_iteration
                if len({r.restored_iteration for r in run}) == 1
                else None,
                "failed_iteration": run[0].failed_iteration if len({r.failed_iteration for r in run}) == 1 else None,
                "first_at": min(first, default=None),
                "last_at": max(first, default=None),
                "downtime_s": round(sum(downtime), 3) if downtime else None,
                "undated_restarts": len(run) - len(downtime),
            }
        )
    return out


def _downtime(r: Restart, nxt: Restart | None) -> float | None:
    """A restart's cost in wall time: from its failure to its first step; one that never trained (it failed
    again first, as a worker group restarted on a GPU that is gone does) until the next restart's failure."""
    t0 = _first_stage(r)
    t1 = r.stages.get("first_step_start") or (_first_stage(nxt) if nxt is not None else None)
    return max((t1 - t0).total_seconds(), 0.0) if t0 is not None and t1 is not None else None


def _first_stage(r: Restart) -> datetime | None:
    return next((t for name in STAGES if (t := r.stages.get(name)) is not None), None)
