"""The data behind `synestra timeline`: a job's attempts, checkpoints, degradation windows, causes, its
step time and the key signals of each cause, as plain rows (the chart is drawn in cli/timeline_chart.py).

Key signals are the metric series the cause's own chain names (at most MAX_SERIES_PER_CAUSE per cause):
gauges as sampled, counters as their per-second rate (window function, resets dropped). A counter of
discrete events (link downs, Xids: wording.COUNTED) is not a rate: its chain links are drawn as events,
with the log lines (`events`). The tax buckets are spans on the time axis (`bands`, timeline_bands.py).
The picture renders the same explanation as every other view (the caller's `job`, with its tax).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.explain.job import explain_job
from synestra_cli.explain.restart_text import phases
from synestra_cli.explain.rules import LOOKBACK_S, METRIC_RULES
from synestra_cli.explain.timeline_bands import bands_of, events_of, headline_of
from synestra_cli.explain.wording import COUNTED, GAUGE_NAMES, RATE_NAMES
from synestra_cli.signals.scope import load_scope
from synestra_cli.signals.steps import degradation_windows

MAX_SERIES_PER_CAUSE = 2
SIGNAL_LAYERS = ("physical", "link", "traffic", "gpu")
KIND = {r.metric: r.kind for r in METRIC_RULES}

STEPS_SQL = """
SELECT attempt, ts, iteration, step_time_s FROM steps_reconciled
WHERE job_id = ? AND ts IS NOT NULL AND step_time_s > 0 ORDER BY ts
"""
# Counters as rates: the difference to the previous sample over the time between, resets (a drop) dropped.
SERIES_SQL = """
SELECT ts, CASE WHEN $counter THEN (value - lag(value) OVER w) / nullif(epoch(ts) - epoch(lag(ts) OVER w), 0)
                ELSE value END AS y
FROM metrics WHERE host = $host AND entity IS NOT DISTINCT FROM $entity AND metric = $metric
  AND ts BETWEEN $start AND $end
WINDOW w AS (ORDER BY ts)
QUALIFY y IS NOT NULL AND (NOT $counter OR y >= 0)
ORDER BY ts
"""


@dataclass
class Series:
    label: str  # gpu-002:gpu0 GPU temperature (C)
    cause: str
    points: list[tuple[datetime, float]]


@dataclass
class Timeline:
    job: JobExplanation
    attempts: list[dict[str, Any]]
    windows: list[dict[str, Any]]
    steps: list[dict[str, Any]]
    causes: list[dict[str, Any]]
    series: list[Series] = field(default_factory=list)
    start: datetime | None = None
    restarts: list[dict[str, Any]] = field(default_factory=list)  # each restart's phases (explain/restarts.py)
    end: datetime | None = None
    # where the time went: {bucket, start, end, attempt} per span (save, restore, startup, hang, requeue,
    # lost_work, degraded_throughput); a later `restarts` list (restart stages) draws beside it
    bands: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # {time, layer, where, signal, source}
    headline: dict[str, str] = field(default_factory=dict)  # title, verdict, action, tax


def _label(metric: str, host: str, entity: str | None) -> str:
    if metric in GAUGE_NAMES:
        name, unit = GAUGE_NAMES[metric]
        name += f" ({unit.strip()})" if unit.strip() else ""
    elif metric in COUNTED:
        name = f"{COUNTED[metric][1]} per s"
    else:
        name = f"{RATE_NAMES.get(metric, metric)} per s" if KIND.get(metric) == "counter" else metric
    return f"{':'.join(p for p in (host, entity) if p)} {name}"


def _named(lk: Any) -> str:
    where = ":".join(p for p in (lk.host, lk.entity) if p)
    return f"{where} {lk.signal}".strip()


def _causes(job: JobExplanation) -> list[dict[str, Any]]:
    """Each distinct cause once (one event is one cause), with the metric links of its chain."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for cp in job.checkpoints:
        c = cp.cause
        if c is None or c.first_signal is None:
            continue
        key = (c.category, c.host, c.component, c.first_signal)
        if key in seen:
            continue
        where = " ".join(dict.fromkeys(p for p in (c.host, c.component) if p))
        metrics = [
            (lk.host, lk.entity, lk.evidence["metric"])
            for lk in cp.chain
            if lk.evidence.get("type") == "metric"
            and lk.host
            and lk.evidence.get("metric") in KIND
            and lk.evidence.get("metric") not in COUNTED  # discrete events: drawn as marks (events_of)
        ]
        own = [lk for lk in cp.chain if lk.layer in SIGNAL_LAYERS and lk.time is not None]
        first = own[0] if own else None  # the chain is in time order
        seen[key] = {
            "label": f"{c.category} {where}".strip(),
            "first_signal": c.first_signal,
            "first_text": _named(first) if first else "no signal: from the job's own log",
            "signals": [(lk.time, _named(lk)) for lk in own],
            "checkpoint": cp.start or cp.end,
            "action": (c.action or {}).get("text", ""),
            "metrics": list(dict.fromkeys(metrics))[:MAX_SERIES_PER_CAUSE],
        }
    return list(seen.values())


def _restart_phases(job: JobExplanation) -> list[dict[str, Any]]:
    """One row per phase of each restart: detection, stopping, requeue, start-up, load, warm-up."""
    return [
        {"restart": f"restart {k + 1} (attempt {r['attempt']})", "phase": name, "start": a, "end": b}
        for k, r in enumerate(job.restarts)
        for name, a, b in phases(r)
    ]


def build(conn: duckdb.DuckDBPyConnection, job_id: str, job: JobExplanation | None = None) -> Timeline:
    """The job's timeline; `job`: its explanation (with its tax) when the caller has it, else explained here."""
    job = job or explain_job(conn, job_id)
    scope = load_scope(conn, job_id)
    attempts = [
        {"attempt": a.attempt, "start": a.start, "end": a.end, "state": a.state or "?"}
        for a in scope.attempts
        if a.start and a.end
    ]
    windows = [
        {"attempt": w.attempt, "start": w.first_slow, "end": w.end, "factor": round(w.factor, 2)}
        for w in degradation_windows(conn, job_id)
    ]
    steps = [
        {"attempt": a, "ts": ts, "iteration": it, "step_time_s": s}
        for a, ts, it, s in conn.execute(STEPS_SQL, [job_id]).fetchall()
    ]
    times: list[datetime] = [a.start for a in scope.attempts if a.start] + [a.end for a in scope.attempts if a.end]
    times += [s["ts"] for s in steps] + [cp.start for cp in job.checkpoints if cp.start]
    start, end = (min(times), max(times)) if times else (None, None)
    causes = _causes(job)
    tl = Timeline(job, attempts, windows, steps, causes, start=start, end=end, restarts=_restart_phases(job))
    tl.bands = bands_of(job, attempts, windows, steps)
    tl.events = events_of(job)
    tl.headline = headline_of(job, start, end)
    if start and end:
        lo = start - timedelta(seconds=LOOKBACK_S)
        for c in causes:
            for host, entity, metric in c["metrics"]:
                params = {
                    "host": host,
                    "entity": entity,
                    "metric": metric,
                    "start": lo,
                    "end": end,
                    "counter": KIND[metric] == "counter",
                }
                pts = conn.execute(SERIES_SQL, params).fetchall()
                tl.series.append(Series(_label(metric, host, entity), c["label"], pts))
    return tl
