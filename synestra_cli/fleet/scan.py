"""Fleet-wide signals in a time window: every anomaly and typed event of every host and switch port,
and the episodes they form per asset.

The same rules and SQL as explain (signals/anomalies.py, signals/events.py), over the whole fleet
instead of one job's scope: the window's telemetry goes into the scope's samples (SCOPE), each series'
baseline is its own low quantile in the window, counter rates come from window functions with resets
handled. Episodes are formed per asset: signals whose windows lie within EPISODE_GAP of each other are
one episode, so a link that keeps erring over days is several, one fault seen by many metrics is one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb

from synestra_cli.explain.rules import DISCRETE_METRICS, METRIC_RULES, MIN_ANOMALY_SAMPLES, RACK_CATEGORIES, XID_APP
from synestra_cli.fleet.assets import Asset, Inventory
from synestra_cli.signals import anomalies as an
from synestra_cli.signals.candidates import summaries_cover
from synestra_cli.signals.events import Event, typed_events
from synestra_cli.signals.peers import peer_outliers
from synestra_cli.signals.scope import JobScope
from synestra_cli.signals.scope_samples import empty_scope, load_rules, stage_scope
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import PEER_RULES
from synestra_cli.store.sql import placeholders

Signal = an.Anomaly | Event

EPISODE_GAP = timedelta(hours=1)  # signals of one asset closer than this are one episode
# A noisy-but-healthy link shows a symbol error every scrape or two, and nothing else (FEC corrects
# them): two erring scrapes in a row make an anomaly window, not a failing part. Two metrics erring at
# once (symbol and receive errors, FEC climbing) are a failing part from the first scrape on: risks
# scans with single-scrape windows for that lead time. A part is erring when
# the evidence is a logged event, a discrete counter (a link went down, a DBE), a change far past its
# threshold (magnitude: ~2 for a symbol error per scrape, thousands for a dying optic), or when two
# metrics or two entities agree (FEC and symbol errors on one port; several GPUs of one rack).
STRONG_MAGNITUDE = 10.0
# A reading that barely crossed its threshold for the shortest window counted (a memory temperature
# touching 85 C for two scrapes as a job starts) is a blip, not evidence.
BLIP_MAGNITUDE = 1.5

# The window's telemetry, a batch of hosts (and switches) at a time: a row group holds one host's day,
# so the host list prunes, and the rate and quantile work stays within memory on a 1,000-host store.
HOST_BATCH = 64
SERIES_HOSTS_SQL = """
SELECT DISTINCT host FROM metrics WHERE ts BETWEEN ? AND ? AND metric IN ({metrics}) ORDER BY host
"""
FLEET_SCOPE_SQL = """
INSERT INTO {scope} (ts, host, entity, metric, value) SELECT ts, host, entity, metric, value FROM metrics
WHERE ts BETWEEN ? AND ? AND metric IN ({metrics}) AND host IN ({hosts})
"""
# The hosts (and switches) with telemetry of these metrics in the window, from their hourly summaries.
SUMMARY_HOSTS_SQL = """
SELECT DISTINCT host FROM host_summaries WHERE last_ts >= ? AND first_ts <= ? AND metric IN ({metrics}) ORDER BY host
"""
EVENT_HOSTS_SQL = "SELECT DISTINCT host FROM events WHERE ts BETWEEN ? AND ? AND host IS NOT NULL ORDER BY host"


@dataclass
class Episode:
    asset: Asset
    start: datetime
    end: datetime
    signals: list[Signal] = field(default_factory=list)

    @property
    def categories(self) -> list[str]:
        return sorted({s.category for s in self.signals})


def signal_start(s: Signal) -> datetime:
    return s.onset if isinstance(s, an.Anomaly) else s.ts


def signal_order(s: Signal) -> tuple[datetime | str | int, ...]:
    """A total order of signals, time first: two at one second (an Xid 79 and the "fallen off the bus"
    line beside it) come in the same order whatever order the threads read them in."""
    if isinstance(s, an.Anomaly):
        return (s.onset, s.host, s.entity or "", s.category, s.metric, "", 0)
    return (s.ts, s.host, s.entity or "", s.category, f"{s.kind} {s.code}", s.path or "", s.line or 0)


def fleet_signals(
    conn: duckdb.DuckDBPyConnection, start: datetime, end: datetime, min_samples: int = MIN_ANOMALY_SAMPLES
) -> list[Signal]:
    """Anomaly windows and typed events of the whole fleet in [start, end], in time order. Xid 13/31
    (the application's own faults, NVIDIA's catalog) are left out: they say nothing of the part.
    `min_samples` 1 (risks) also returns single-scrape windows; an episode needs them corroborated."""
    metrics = [r.metric for r in METRIC_RULES]
    found: list[Signal] = []
    if summaries_cover(conn, start, end):
        found += _from_summaries(conn, start, end, metrics, min_samples)
    else:
        found += _from_samples(conn, load_rules(conn), start, end, metrics, min_samples)
    hosts = [r[0] for r in conn.execute(EVENT_HOSTS_SQL, [start, end]).fetchall()]
    found += [e for e in typed_events(conn, hosts, start, end) if not (e.kind == "xid" and e.code in XID_APP)]
    return sorted(found, key=signal_order)


def _from_summaries(
    conn: duckdb.DuckDBPyConnection, start: datetime, end: datetime, metrics: list[str], min_samples: int
) -> list[Signal]:
    """The window's anomalies as one job's are found (signals/scope_samples.py stage_scope): every host and
    switch a job of the whole fleet and the whole window, its series tested on the hourly summaries and
    only the candidates' samples read (by series id in the series layout). A series that is no candidate
    holds no anomaly window, so these are the anomalies of every sample (_from_samples)."""
    hosts = [
        r[0]
        for r in conn.execute(
            SUMMARY_HOSTS_SQL.format(metrics=placeholders(len(metrics))), [start, end, *metrics]
        ).fetchall()
    ]
    found: list[Signal] = []
    for i in range(0, len(hosts), HOST_BATCH):  # a month's candidates of every host would not fit in memory
        scope = JobScope("fleet", [], hosts[i : i + HOST_BATCH])
        read = stage_scope(conn, scope, [(start, end)], min_samples, clock_events=False)
        found += an.anomalies(conn, min_samples, samples=read.samples, rules=read.rules)
    return found


def _from_samples(
    conn: duckdb.DuckDBPyConnection,
    rules: TempTable,
    start: datetime,
    end: datetime,
    metrics: list[str],
    min_samples: int,
) -> list[Signal]:
    """Without summaries for the whole window: every sample of the window, a batch of hosts at a time,
    judged by `rules` (signals/scope_samples.py load_rules)."""
    marks = placeholders(len(metrics))
    series_hosts = [
        r[0] for r in conn.execute(SERIES_HOSTS_SQL.format(metrics=marks), [start, end, *metrics]).fetchall()
    ]
    found: list[Signal] = []
    for i in range(0, len(series_hosts), HOST_BATCH):
        batch = series_hosts[i : i + HOST_BATCH]
        samples = empty_scope(conn)
        sql = staged_sql(FLEET_SCOPE_SQL, scope=samples).format(metrics=marks, hosts=placeholders(len(batch)))
        conn.execute(sql, [start, end, *metrics, *batch])
        found += an.anomalies(conn, min_samples, samples=samples, rules=rules)
    return found


# The hosts and switch ports whose error counters are compared (signals/peers.py): every one in the window.
PEER_HOSTS_SQL = "SELECT DISTINCT host FROM metrics WHERE ts BETWEEN ? AND ? AND metric IN ({metrics}) ORDER BY host"
PEER_PORTS_SQL = """
SELECT DISTINCT switch, switch_port FROM topology WHERE switch IS NOT NULL AND switch_port IS NOT NULL ORDER BY ALL
"""


def peer_signals(conn: duckdb.DuckDBPyConnection, start: datetime, end: datetime) -> list[Signal]:
    """Series far above their peers in [start, end] (signals/peers.py), the fleet's series of the same metric
    and side being the peers: a GPU whose correctable ECC errors run at 1000x the fleet's, a NIC whose FEC
    corrects 10^4x more than its neighbours', under every rule's floor."""
    metrics = [r.metric for r in PEER_RULES]
    hosts = [
        h
        for (h,) in conn.execute(
            PEER_HOSTS_SQL.format(metrics=placeholders(len(metrics))), [start, end, *metrics]
        ).fetchall()
    ]
    ports = [(sw, port) for sw, port in conn.execute(PEER_PORTS_SQL).fetchall()]
    switches = {sw for sw, _ in ports}
    _, found = peer_outliers(conn, [h for h in hosts if h not in switches], ports, [(start, end)])
    return list(found)


def asset_of(s: Signal, inv: Inventory) -> Asset | None:
    return inv.of(
        s.category, s.host, s.component if isinstance(s, Event) and s.category == "storage.slow" else s.entity
    )


def blip(s: Signal) -> bool:
    return isinstance(s, an.Anomaly) and s.samples <= MIN_ANOMALY_SAMPLES and s.magnitude < BLIP_MAGNITUDE


def substantive(s: Signal) -> bool:
    """Enough alone: an event, a discrete counter, a sustained change far past its threshold (a single
    scrape, however large, may be a one-off burst), or a series orders of magnitude above its peers."""
    return (
        isinstance(s, Event)
        or s.metric in DISCRETE_METRICS
        or (s.magnitude >= STRONG_MAGNITUDE and s.samples >= MIN_ANOMALY_SAMPLES)
        or (s.peers is not None and s.peers.found)  # 100x its peers over PEER_MIN_EVENTS events at least
    )


def corroborated(signals: list[Signal]) -> bool:
    """A part is erring, not noisy: one substantive signal, or two metrics or two entities that agree."""
    names = {s.metric if isinstance(s, an.Anomaly) else f"{s.kind} {s.code}" for s in signals}
    return any(substantive(s) for s in signals) or len(names) >= 2 or len({(s.host, s.entity) for s in signals}) >= 2


def _merge(asset: Asset, signals: list[Signal]) -> list[Episode]:
    out: list[Episode] = []
    for s in sorted(signals, key=signal_order):
        t0, t1 = signal_start(s), max(s.end, signal_start(s))
        if out and t0 <= out[-1].end + EPISODE_GAP:
            out[-1].end = max(out[-1].end, t1)
            out[-1].signals.append(s)
        else:
            out.append(Episode(asset, t0, t1, [s]))
    return [e for e in out if corroborated(e.signals)]


def episodes(signals: list[Signal], inv: Inventory) -> dict[str, list[Episode]]:
    """Per asset id, its episodes in time order. Thermal or power trouble on two or more hosts of one
    rack at once is the rack's episode (one rack event, counted once); on several GPUs of one host the
    host's; on one GPU that GPU's."""
    by_asset: dict[str, tuple[Asset, list[Signal]]] = {}
    rack_sigs: dict[tuple[str, str], list[Signal]] = {}
    for s in (s for s in signals if not blip(s)):
        rack = inv.rack.get(s.host) if s.category in RACK_CATEGORIES else None
        if rack:
            rack_sigs.setdefault((rack, s.category), []).append(s)
            continue
        asset = asset_of(s, inv)
        if asset is not None:
            by_asset.setdefault(asset.id, (asset, []))[1].append(s)
    out: dict[str, list[Episode]] = {}
    for (rack, _cat), sigs in sorted(rack_sigs.items()):
        rack_asset = Asset("rack", rack, None, None, {"hosts": inv.rack_hosts(rack)})
        for ep in _merge(rack_asset, sigs):
            if len({s.host for s in ep.signals}) >= 2:
                out.setdefault(rack, []).append(ep)
                continue
            several = len({s.entity for s in ep.signals}) >= 2  # several GPUs of one host: the host's
            for s in ep.signals:
                a = inv.of(s.category, s.host, None if several else s.entity)
                if a is not None:
                    by_asset.setdefault(a.id, (a, []))[1].append(s)
    for aid, (asset, sigs) in by_asset.items():
        if asset.kind == "filesystem":  # every client complains: the clients are the evidence
            clients = sorted({s.host for s in sigs})
            asset = Asset(asset.kind, asset.id, None, None, {"clients": clients})
        out.setdefault(aid, []).extend(_merge(asset, sigs))
    for eps in out.values():
        eps.sort(key=lambda e: e.start)
    return {aid: eps for aid, eps in out.items() if eps}
