"""`synestra risks` as a library: components degrading now, before they cost a checkpoint.

At a time T (default: the store's latest data) the fleet's telemetry and events of the LOOKBACK before
T are scanned with explain's own rules (scan.py over signals/): each series against its own baseline
in that window, counter rates from window functions with resets handled; and each error counter against
the fleet's others of its metric (signals/peers.py: a gray GPU or NIC orders of magnitude above its peers,
under every floor). An asset is at risk when a
corroborated episode of it is still active at T (its last anomalous sample within RECENT of T, or an
event within LOOKBACK): error-counter rates up, receive power down, FEC corrected codewords climbing,
temperatures up, Xid or AER events. Lemons already known from jobs that ended before T (lemons.py over
HISTORY) are listed too, as known risks. Each risk carries explain's evidence links, the jobs running
on the asset at T, the GPU-hours at stake per hour (their GPUs), and a recommended action.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import duckdb

from synestra_cli.errors import EmptyStoreError
from synestra_cli.explain.chain import ChainLink, from_signal, ordered
from synestra_cli.explain.document import link_doc
from synestra_cli.fleet.actions import action_for
from synestra_cli.fleet.assets import Asset, Inventory
from synestra_cli.fleet.lemons import asset_json, data_span, fleet_report
from synestra_cli.fleet.scan import Episode, Signal, episodes, fleet_signals, peer_signals
from synestra_cli.signals.anomalies import Anomaly

SCHEMA = "synestra.risks/1"
LOOKBACK = timedelta(hours=1)  # the baseline each series is judged against
RECENT = timedelta(minutes=10)  # an anomaly whose last bad sample is this recent is still going on
HISTORY = timedelta(days=7)  # lemons known from the jobs that ended in this span before T

RUNNING_SQL = """
SELECT job_id, max(gpus) AS gpus, list(DISTINCT host ORDER BY host) AS hosts FROM (
    SELECT job_id, gpus, unnest(nodes) AS host FROM attempts_reconciled
    WHERE start_ts <= $t AND (end_ts IS NULL OR end_ts >= $t)
) WHERE list_contains($hosts, host) GROUP BY job_id ORDER BY job_id
"""


@dataclass
class Risk:
    asset: Asset
    status: str  # degrading (active now) | known_lemon (history only)
    categories: list[str]
    since: datetime | None  # onset of the active episode
    score: float  # strength of the evidence, 0..1 (noisy-OR of the signals' weight x magnitude)
    chain: list[ChainLink] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    lemon_reasons: list[str] = field(default_factory=list)

    @property
    def gpu_hours_per_hour(self) -> float:
        return float(sum(j["gpus"] or 0 for j in self.jobs))

    @property
    def action(self) -> str:
        return action_for(self.categories, bool(self.lemon_reasons))


@dataclass
class RiskReport:
    at: datetime
    risks: list[Risk]
    latest_data: datetime | None = None  # the store's last sample or event

    @property
    def stale(self) -> bool:
        """T is past the store's data: "nothing degrading" would only mean "nothing known"."""
        return self.latest_data is None or self.at - self.latest_data > RECENT

    @property
    def degrading(self) -> list[Risk]:
        return [r for r in self.risks if r.status == "degrading"]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "at": self.at,
            "latest_data": self.latest_data,
            "stale": self.stale,
            "lookback_s": LOOKBACK.total_seconds(),
            "degrading": len(self.degrading),
            "risks": [risk_json(r) for r in self.risks],
        }


def risk_json(r: Risk) -> dict[str, Any]:
    return {
        "asset": asset_json(r.asset),
        "status": r.status,
        "categories": r.categories,
        "since": r.since,
        "score": round(r.score, 3),
        "jobs": r.jobs,
        "gpu_hours_per_hour": r.gpu_hours_per_hour,
        "action": r.action,
        "lemon_reasons": r.lemon_reasons,
        "evidence": [link_doc(lk) for lk in r.chain],
    }


def _strength(s: Signal) -> float:
    """As explain weighs a signal (attribute.py): the rule's weight x how far past its threshold."""
    if isinstance(s, Anomaly):
        return min(1.0, s.weight * min(1.0, 0.5 + 0.15 * math.log10(max(s.magnitude, 1.0))))
    return min(1.0, s.weight)


def _score(signals: list[Signal]) -> float:
    miss = 1.0
    for s in signals:
        miss *= 1.0 - _strength(s)
    return 1.0 - miss


def _active(s: Signal, at: datetime) -> bool:
    if isinstance(s, Anomaly):
        return s.end >= at - RECENT
    return True  # an event in the lookback: an Xid, an AER, a link that went down within the hour


def _categories(signals: list[Signal]) -> list[str]:
    """Ordered by the weight of their evidence, strongest first."""
    best: dict[str, float] = {}
    for s in signals:
        best[s.category] = max(best.get(s.category, 0.0), _strength(s))
    return sorted(best, key=lambda c: (-best[c], c))


def running_jobs(conn: duckdb.DuckDBPyConnection, hosts: list[str], at: datetime) -> list[dict[str, Any]]:
    if not hosts:
        return []
    rows = conn.execute(RUNNING_SQL, {"t": at, "hosts": hosts}).fetchall()
    return [{"job": j, "gpus": g, "hosts": h} for j, g, h in rows]


def _degrading(conn: duckdb.DuckDBPyConnection, at: datetime, inv: Inventory) -> list[Risk]:
    # single-scrape windows too: at a 2-minute scrape, two erring metrics at once are the earliest sign
    found = fleet_signals(conn, at - LOOKBACK, at, min_samples=1) + peer_signals(conn, at - LOOKBACK, at)
    signals = [s for s in found if _active(s, at)]
    out = []
    for eps in episodes(signals, inv).values():
        ep: Episode = eps[-1]
        out.append(
            Risk(
                ep.asset,
                "degrading",
                _categories(ep.signals),
                ep.start,
                _score(ep.signals),
                ordered([from_signal(s) for s in ep.signals]),
            )
        )
    return out


def risks_at(
    conn: duckdb.DuckDBPyConnection, at: datetime | None = None, history: timedelta | None = HISTORY
) -> RiskReport:
    """The components at risk at `at` (default: the store's latest sample or event). `history`: how far
    back known lemons are looked for (None or zero: not at all; it explains every job of the span)."""
    _lo, hi = data_span(conn)
    if hi is None:
        raise EmptyStoreError("the store holds no telemetry or events: ingest exports first")
    at = at or hi
    inv = Inventory(conn)
    risks = {r.asset.id: r for r in _degrading(conn, at, inv)}
    if history:
        known = fleet_report(conn, at - history, at, jobs_ended_by=at)
        for row in known.lemons:
            r = risks.get(row.asset.id)
            if r is None:
                r = risks[row.asset.id] = Risk(row.asset, "known_lemon", row.categories, None, 0.0)
            r.lemon_reasons = row.lemon_reasons
    for r in risks.values():
        r.jobs = running_jobs(conn, inv.hosts_of(r.asset), at)
    ranked = sorted(
        risks.values(), key=lambda r: (r.status != "degrading", -r.gpu_hours_per_hour, -r.score, r.asset.id)
    )
    return RiskReport(at, ranked, hi)
