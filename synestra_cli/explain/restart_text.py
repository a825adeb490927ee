"""A restart's stages and a restart loop in words, one line each: shared by explain's tree (cli/explain_view.py),
its Markdown ticket (explain/markdown.py) and the timeline picture (explain/timeline.py)."""

from __future__ import annotations

from datetime import datetime

from synestra_cli.explain.document import RestartDoc, RestartLoopDoc, stamp
from synestra_cli.explain.restarts import STAGES

WORDS = {
    "fault_at": "fault",
    "noticed_at": "noticed",
    "ended_at": "ended",
    "restarted_at": "restarted",
    "startup_end": "initialised",
    "load_start": "load began",
    "load_end": "loaded",
    "first_step_start": "first step",
}


def span(seconds: float) -> str:
    s = round(seconds)
    m, sec = divmod(abs(s), 60)
    h, m = divmod(m, 60)
    return ("-" if s < 0 else "") + (f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s")


def stage_times(doc: RestartDoc) -> list[tuple[str, datetime | None]]:
    return [(name, stamp(doc[name])) for name in STAGES]  # type: ignore[literal-required]


def stages_line(doc: RestartDoc) -> str:
    """`fault 01:58:13Z, noticed +10m00s, ended +3s, restarted +15m54s, initialised ?, ...`: each dated stage after
    the one dated before it, `?` where the logs do not date it."""
    parts, prev = [], None
    for name, t in stage_times(doc):
        word = WORDS[name]
        if t is None:
            parts.append(f"{word} ?")
        elif prev is None:
            parts.append(f"{word} {t:%H:%M:%SZ}")
        else:
            parts.append(f"{word} +{span((t - prev).total_seconds())}")
        prev = t if t is not None else prev
    how = "in place (torchrun)" if doc["in_place"] else "requeued"
    return f"restart of attempt {doc['attempt']}, {how}: " + ", ".join(parts)


def load_line(doc: RestartDoc) -> str | None:
    """The load alone, as the restore bucket counts it, when both its ends are dated."""
    a, b = stamp(doc["load_start"]), stamp(doc["load_end"])
    return f"load {span((b - a).total_seconds())}" if a and b else None


def loop_line(loop: RestartLoopDoc) -> str:
    c = loop["cause"]
    why = " ".join(p for p in (c["category"], c["host"], c["component"]) if p) if c else "the same failure"
    same = []
    if loop["restored_iteration"] is not None:
        same.append(f"restoring iteration {loop['restored_iteration']}")
    if loop["failed_iteration"] is not None:
        same.append(f"failing by iteration {loop['failed_iteration']}")
    cost = f", {span(loop['downtime_s'])} down" if loop["downtime_s"] is not None else ""
    undated = f" ({loop['undated_restarts']} not dated)" if loop["undated_restarts"] else ""
    attempts = ", ".join(map(str, loop["attempts"]))
    return (
        f"restart loop: {loop['restarts']} restarts (attempts {attempts}) for {why}"
        + (f", each {' and '.join(same)}" if same else "")
        + cost
        + undated
    )


# What the time before each stage was spent on (the span from the dated stage before it).
PHASES = {
    "noticed_at": "detection",
    "ended_at": "stopping",
    "restarted_at": "requeue",
    "startup_end": "start-up",
    "load_start": "start-up",
    "load_end": "load",
    "first_step_start": "warm-up",
}


def phases(doc: RestartDoc) -> list[tuple[str, datetime, datetime]]:
    """(phase, start, end) between consecutive dated stages; a span over undated stages names every phase
    in it (`start-up + load`). In place, the requeue is the worker group's restart."""
    out: list[tuple[str, datetime, datetime]] = []
    prev: datetime | None = None
    names: list[str] = []
    for name, t in stage_times(doc):
        if name in PHASES:
            word = "restart in place" if name == "restarted_at" and doc["in_place"] else PHASES[name]
            if word not in names:
                names.append(word)
        if t is None:
            continue
        if prev is not None and names:
            out.append((" + ".join(names), prev, t))
        prev, names = t, []
    return out
