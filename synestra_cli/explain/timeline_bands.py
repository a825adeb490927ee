"""What the timeline draws besides its series: where the job's time went as spans on the time axis,
the events of its causes as marks, and the headline a picture needs to stand alone.

The spans follow accounting/buckets.py's cuts (docs/accounting.md), from the same facts: a save or a
restore is its own span; start-up runs from an attempt's start to its first iteration line; an attempt
that did not end cleanly lost the work from its last completed save to its last iteration line, then
hung until it ended; the gap to the next attempt is requeue; step-time degradation windows are degraded
throughput. Each span is a plain row (bucket, start, end, attempt), so that another kind of span (a
restart's stages) is one more list beside it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.shown import iso

# Attempt states after which nothing was lost (accounting/buckets.py CLEAN_END_STATES).
CLEAN_END_STATES = ("COMPLETED", "RUNNING")
# The buckets drawn, in legend order, with the words a reader sees.
BUCKETS = {
    "checkpoint_save": "save",
    "checkpoint_restore": "restore",
    "startup": "start-up",
    "lost_work": "lost work",
    "hang": "hang",
    "requeue": "requeue",
    "degraded_throughput": "degraded",
}
EVENT_LAYERS = ("physical", "link", "traffic", "gpu", "collective", "job", "node", "storage")


def _span(bucket: str, start: datetime | None, end: datetime | None, attempt: int | None) -> list[dict[str, Any]]:
    if start is None or end is None or end <= start:
        return []
    return [{"bucket": BUCKETS[bucket], "start": start, "end": end, "attempt": attempt}]


def bands_of(
    job: JobExplanation, attempts: list[dict[str, Any]], windows: list[dict[str, Any]], steps: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Every tax bucket's spans, in time order."""
    out: list[dict[str, Any]] = []
    for cp in job.checkpoints:
        out += _span("checkpoint_save" if cp.kind == "save" else "checkpoint_restore", cp.start, cp.end, cp.attempt)
    ordered = sorted(attempts, key=lambda a: a["start"])
    for i, a in enumerate(ordered):
        lines = [s["ts"] for s in steps if s["attempt"] == a["attempt"]]
        first, last = (min(lines), max(lines)) if lines else (None, None)
        out += _span("startup", a["start"], first, a["attempt"])
        if not str(a["state"]).upper().startswith(CLEAN_END_STATES) and last is not None:
            saves = [
                cp.end
                for cp in job.checkpoints
                if cp.kind == "save" and cp.attempt == a["attempt"] and cp.end and cp.end <= last
            ]
            resume = max(saves, default=first)
            out += _span("lost_work", resume, last, a["attempt"]) + _span("hang", last, a["end"], a["attempt"])
        if i + 1 < len(ordered):
            out += _span("requeue", a["end"], ordered[i + 1]["start"], a["attempt"])
    for w in windows:
        out += _span("degraded_throughput", w["start"], w["end"], w["attempt"])
    return sorted(out, key=lambda b: (b["start"], list(BUCKETS.values()).index(b["bucket"])))


def events_of(job: JobExplanation) -> list[dict[str, Any]]:
    """The logged events of every cause's chain (an Xid, a link down, a watchdog timeout), once each."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for cp in job.checkpoints:
        for lk in cp.chain if cp.cause else []:
            ev = lk.evidence
            counted = ev.get("type") == "metric" and ev.get("count")  # a counter of discrete events
            if lk.time is None or lk.layer not in EVENT_LAYERS or not (ev.get("type") == "log" or counted):
                continue
            where = ":".join(p for p in (lk.host, lk.entity) if p)
            key = (lk.time, where, lk.signal)
            seen.setdefault(
                key, {"time": lk.time, "layer": lk.layer, "where": where, "signal": lk.signal, "line": ev.get("line")}
            )
    return sorted(seen.values(), key=lambda e: (e["time"], e["where"], e["signal"]))


def headline_of(job: JobExplanation, start: datetime | None = None, end: datetime | None = None) -> dict[str, str]:
    """Title, verdict, action and tax: what a picture pasted alone into a ticket must say. `start`..`end`:
    the job's span as drawn (its attempts, steps and checkpoints); else its checkpoints'."""
    hot = [cp for cp in job.checkpoints if cp.cause]
    verdicts = []
    for cp in hot:
        c = cp.cause
        assert c is not None
        where = " ".join(dict.fromkeys(p for p in (c.host, c.component) if p)) or "no host named"
        verdicts.append(f"{cp.trigger} {cp.kind} at iteration {cp.iteration}: {c.category} on {where}")
    first = hot[0].cause if hot else None
    action = (first.action or {}).get("text", "") if first else ""
    tax = ""
    if job.tax:
        t = job.tax
        tax = (
            f"checkpoint tax {t['checkpoint_tax']:.1%}, hidden {t['hidden_tax']:.1%}, goodput {t['goodput']:.1%} "
            f"of {t['gpu_hours']:,.1f} GPU-h ({t['gpus']} GPU{'' if t['gpus'] == 1 else 's'})"
        )
    # the job's own span, not its first save's (job 1003's title began at 09:23, its start-up at 09:05)
    span = [t for t in (start, end) if t] or [cp.start for cp in job.checkpoints if cp.start]
    when = f"{iso(min(span))} .. {iso(max(span))}" if span else ""
    attempts = f"{job.attempts} attempt{'' if job.attempts == 1 else 's'}"
    return {
        "title": f"Job {job.job}: {attempts} on {', '.join(job.hosts)}" + (f", {when}" if when else ""),
        "verdict": "; ".join(verdicts) or "every checkpoint routine: no cause to name",
        "action": f"Action: {action}" if action else "",
        "tax": tax,
    }
