"""`synestra fleet` as a library: components ranked by what they cost across jobs, and the lemons.

Two kinds of evidence meet per asset (assets.py):
- hits: every non-routine checkpoint and every attempt failure that explain attributed to the asset,
  in any job of the window (explain/ is the one place causes are decided; this module never re-derives
  one), with the GPU-hours tax-report charges to that cause (accounting/attribution.py);
- episodes: the asset's own error reports in the window, fleet-wide (scan.py), whether or not a job
  was hurt: a link that errs on an idle node is still a bad link.
Preemptions, routine saves, crashes of the job's own code, stragglers and OOMs are never a
component's fault. One rack event that hit two jobs is one incident of the rack.

A lemon has hurt LEMON_JOBS or more jobs, or has reported errors in LEMON_EPISODES or more separate
episodes; each row says which, with the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.explain.chain import ChainLink, from_signal
from synestra_cli.explain.document import link_doc
from synestra_cli.fleet.assets import Asset, Inventory
from synestra_cli.fleet.scan import Episode, episodes, fleet_signals
from synestra_cli.shown import iso
from synestra_cli.store.sql import one_row

SCHEMA = "synestra.fleet/1"

# Causes that are never a part's fault: the scheduler's, the job's own code or memory, a slow rank, and
# what explain could not name.
NOT_A_COMPONENT = (
    "scheduler.preemption",
    "software.crash",
    "workload.straggler",
    "host.oom",
    "unknown",
    "checkpoint.routine",
)
LEMON_JOBS = 2
LEMON_EPISODES = 2
INCIDENT_GAP = timedelta(hours=1)  # hits of one asset closer than this are one incident (a rack event)
EPISODE_SIGNALS_SHOWN = 5

SPAN_SQL = """
SELECT min(lo), max(hi) FROM (SELECT min(ts) AS lo, max(ts) AS hi FROM metrics
                              UNION ALL SELECT min(ts), max(ts) FROM events)
"""


@dataclass(frozen=True)
class Hit:
    """One time explain blamed the asset: a checkpoint or an attempt failure of one job."""

    job: str
    attempt: int | None
    what: str  # restart | failure | reactive save | slow save | ...
    at: datetime | None  # the cause's first signal
    category: str
    confidence: float
    chain: tuple[ChainLink, ...] = ()

    @property
    def failure(self) -> bool:
        return self.what in ("restart", "failure")


@dataclass
class FleetRow:
    asset: Asset
    hits: list[Hit] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)
    gpu_hours: float = 0.0

    @property
    def jobs(self) -> list[str]:
        return sorted({h.job for h in self.hits})

    @property
    def failures(self) -> int:
        return len({(h.job, h.attempt) for h in self.hits if h.failure})

    @property
    def incidents(self) -> int:
        """Distinct events that hurt jobs: hits within INCIDENT_GAP of each other are one."""
        times = sorted(h.at for h in self.hits if h.at)
        untimed = sum(1 for h in self.hits if not h.at)
        gaps = sum(1 for a, b in zip(times, times[1:], strict=False) if b - a > INCIDENT_GAP)
        return (1 + gaps if times else 0) + untimed

    @property
    def categories(self) -> list[str]:
        return sorted({h.category for h in self.hits} | {c for e in self.episodes for c in e.categories})

    @property
    def first_seen(self) -> datetime | None:
        return min([h.at for h in self.hits if h.at] + [e.start for e in self.episodes], default=None)

    @property
    def last_seen(self) -> datetime | None:
        return max([h.at for h in self.hits if h.at] + [e.end for e in self.episodes], default=None)

    @property
    def lemon_reasons(self) -> list[str]:
        out = []
        if len(self.jobs) >= LEMON_JOBS:
            out.append(f"hurt {len(self.jobs)} job{'' if len(self.jobs) == 1 else 's'}: {', '.join(self.jobs)}")
        if len(self.episodes) >= LEMON_EPISODES:
            spans = ", ".join(iso(e.start, minutes=True) for e in self.episodes[:6])
            out.append(f"reported errors in {len(self.episodes)} separate episodes (from {spans})")
        return out

    @property
    def lemon(self) -> bool:
        return bool(self.lemon_reasons)


@dataclass
class FleetReport:
    since: datetime | None
    until: datetime | None
    jobs: list[str]
    rows: list[FleetRow]
    computed: list = field(default_factory=list)  # explanations to keep (explain.memo.save_to)
    key: str = ""
    by: str = "component"  # component | host | rack (rollup)

    @property
    def lemons(self) -> list[FleetRow]:
        return [r for r in self.rows if r.lemon]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "since": self.since,
            "until": self.until,
            "jobs": len(self.jobs),
            "by": self.by,
            "components": [row_json(r) for r in self.rows],
        }


def _hit_json(h: Hit) -> dict[str, Any]:
    return {
        "job": h.job,
        "attempt": h.attempt,
        "what": h.what,
        "at": h.at,
        "category": h.category,
        "confidence": h.confidence,
        "chain": [link_doc(lk) for lk in h.chain],
    }


def episode_json(e: Episode) -> dict[str, Any]:
    return {
        "start": e.start,
        "end": e.end,
        "categories": e.categories,
        "signals": len(e.signals),
        "evidence": [link_doc(from_signal(s)) for s in e.signals[:EPISODE_SIGNALS_SHOWN]],
    }


def asset_json(a: Asset) -> dict[str, Any]:
    return {"kind": a.kind, "id": a.id, "host": a.host, "component": a.component, **a.identity}


def row_json(r: FleetRow) -> dict[str, Any]:
    return {
        "asset": asset_json(r.asset),
        "categories": r.categories,
        "failures": r.failures,
        "incidents": r.incidents,
        "gpu_hours": r.gpu_hours,
        "jobs": r.jobs,
        "first_seen": r.first_seen,
        "last_seen": r.last_seen,
        "lemon": r.lemon,
        "lemon_reasons": r.lemon_reasons,
        "hits": [_hit_json(h) for h in r.hits],
        "episodes": [episode_json(e) for e in r.episodes],
    }


ROLLUPS = ("component", "host", "rack")


def _ranked(rows) -> list[FleetRow]:
    """Costliest first: GPU-hours, then failures, incidents, episodes; ties by name."""
    return sorted(rows, key=lambda r: (-r.gpu_hours, -r.failures, -r.incidents, -len(r.episodes), r.asset.id))


def _parent(a: Asset, by: str, inv: Inventory) -> Asset:
    """The host or rack a component sits in (itself when it has none: a filesystem, a switch port)."""
    rack = a.identity.get("rack") or (inv.rack.get(a.host) if a.host else None)
    if by == "host" and a.host and a.kind != "host":
        return inv.host(a.host)
    if by == "rack" and rack and a.kind != "rack":
        return Asset("rack", rack, None, None, {"hosts": inv.rack_hosts(rack)})
    return a


def rollup(report: FleetReport, by: str, inv: Inventory) -> FleetReport:
    """The report by host or by rack: each part's hits, episodes and GPU-hours summed into what holds it,
    so a node whose GPU and NIC each hurt one job is seen to have hurt two."""
    if by not in ROLLUPS:
        raise ValueError(f"by must be one of {ROLLUPS}")
    if by == "component":
        return report
    rows: dict[str, FleetRow] = {}
    for r in report.rows:
        parent = _parent(r.asset, by, inv)
        row = rows.setdefault(parent.id, FleetRow(parent))
        row.hits += r.hits
        row.episodes = sorted(row.episodes + r.episodes, key=lambda e: e.start)
        row.gpu_hours += r.gpu_hours
    ranked = _ranked(rows.values())
    return FleetReport(report.since, report.until, report.jobs, ranked, report.computed, report.key, by)


def _what(cp) -> str:
    if cp.trigger == "restart":
        return "restart"
    return "slow save" if cp.slow and cp.trigger not in ("reactive",) else f"{cp.trigger} {cp.kind}"


def _blamable(cause) -> bool:
    return cause is not None and cause.category not in NOT_A_COMPONENT


def hits_of(ex, inv: Inventory) -> list[tuple[Asset, Hit]]:
    """What one job's explanation blames on components: its caused checkpoints and attempt failures."""
    out = []
    for cp in ex.checkpoints:
        if cp.trigger != "preemption" and _blamable(cp.cause):
            c = cp.cause
            asset = inv.of(c.category, c.host, c.component)
            if asset is not None:
                out.append(
                    (
                        asset,
                        Hit(
                            ex.job,
                            cp.attempt,
                            _what(cp),
                            c.first_signal or cp.start,
                            c.category,
                            c.confidence,
                            tuple(cp.chain),
                        ),
                    )
                )
    for f in ex.failures:
        if _blamable(f.cause):
            c = f.cause
            asset = inv.of(c.category, c.host, c.component)
            if asset is not None:
                out.append(
                    (
                        asset,
                        Hit(
                            ex.job,
                            f.attempt,
                            "failure",
                            c.first_signal or f.at,
                            c.category,
                            c.confidence,
                            tuple(f.chain),
                        ),
                    )
                )
    return out


def data_span(conn: duckdb.DuckDBPyConnection) -> tuple[datetime | None, datetime | None]:
    lo, hi = one_row(conn, SPAN_SQL)  # an aggregate: one row, NULLs when the store is empty
    return lo, hi


def _job_costs(conn: duckdb.DuckDBPyConnection, since: datetime | None, until: datetime | None):
    """tax-report's whole report over the window (explanations reused from the store when kept)."""
    from synestra_cli.accounting.attribution import build_report

    try:
        return build_report(conn, None, since, until, None, None)
    except (EmptyStoreError, NotFoundError):  # no job at all, or none in the window: no costs, still a fleet
        return None


def fleet_report(
    conn: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    until: datetime | None = None,
    jobs_ended_by: datetime | None = None,
    by: str = "component",
) -> FleetReport:
    """Every asset that cost a job or reported errors in [since, until], costliest first; `by` host or
    rack sums the parts into what holds them (rollup).
    `jobs_ended_by`: only jobs whose every attempt ended by then (risks: no knowledge from the future)."""
    if by not in ROLLUPS:
        raise ValueError(f"by must be one of {ROLLUPS}")
    lo, hi = data_span(conn)
    full = _job_costs(conn, since, until)
    if lo is None and full is None:
        raise EmptyStoreError("the store holds no telemetry, events or jobs: ingest exports first")
    inv = Inventory(conn)
    rows: dict[str, FleetRow] = {}

    def row(a: Asset) -> FleetRow:
        return rows.setdefault(a.id, FleetRow(a))

    jobs: list[str] = []
    if full is not None:
        for jt in full.report.jobs:
            b = jt.buckets
            if jobs_ended_by is not None and max(c["end_ts"] for c in b.attempts) > jobs_ended_by:
                continue
            jobs.append(b.job_id)
            for asset, hit in hits_of(full.explanations[b.job_id], inv):
                row(asset).hits.append(hit)
            for charge in jt.by_cause:
                charged = inv.of(charge["category"], charge["host"], charge["component"])
                if charge["category"] not in NOT_A_COMPONENT and charged is not None:
                    row(charged).gpu_hours += charge["gpu_hours"]
    start, end = since or lo, until or hi
    if start is not None and end is not None:
        for aid, eps in episodes(fleet_signals(conn, start, end), inv).items():
            r = rows.get(aid) or row(eps[0].asset)
            r.episodes = eps
            if r.asset.kind == "filesystem" and eps[0].asset.identity.get("clients"):
                r.asset = eps[0].asset  # the clients that complained
    ranked = _ranked(rows.values())
    report = FleetReport(
        since or lo, until or hi, jobs, ranked, full.computed if full else [], full.key if full else ""
    )
    return rollup(report, by, inv)
