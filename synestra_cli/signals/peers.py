"""Gray failures: error counters whose rate is orders of magnitude above their peers' in the same job.

Detection (signals/anomalies.py) judges each entity against its own history and the rules' floors. A GPU
whose PCIe link retries a few times a minute, under the 0.1/s rule, or whose correctable ECC errors run
at 1000x the job's other GPUs from before the job began, crosses neither: yet it is the one part of its
kind that is not like the others. Here (thresholds.PEER_RULES, docs/explain.md "Gray failures"):

1. each error counter's rate on every series of the job's hosts (and of the switch ports cabled to them),
   over the hours that touch the read windows, from one row per source, series and hour: the store's
   hourly summaries (store/summaries.py) when they cover the hours, else the same rows computed from the
   samples (`HOURS`), so that both give the same figures;
2. per metric and side (host or switch), the median and MAD of log10 rates in DuckDB, a rate under the
   metric's quiet level counted as that level (`peer_rates.sql`): the series with an hour well above the
   median are candidates;
3. the candidates' raw samples in the read windows: their rise dated by the best split into two Poisson
   rates, and the elevated rate held to the peers' median (`peer_onsets.sql`).

Each suspect is an Anomaly with `peers` set (its `before` is the peers' median): explain scores it like any
signal, and risks shows the same figures. A series that its own history already flags is left to that
signal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import duckdb

from synestra_cli.signals.anomalies import Anomaly, Peers
from synestra_cli.signals.candidates import summaries_cover
from synestra_cli.signals.counters import rates_over
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import (
    PEER_CHANGE_NATS,
    PEER_DECADES,
    PEER_MAD_FLOOR,
    PEER_MIN_EVENTS,
    PEER_MIN_SERIES,
    PEER_RISE,
    PEER_RULES,
    PEER_Z,
)
from synestra_cli.store.sql import drop_temp, insert_rows, sql_file

HOUR = timedelta(hours=1)
# The tables of one call (signals/staging.py): what is asked (PeerTables), then the rates (Rated).
RULES = TempTable("_peer_rules", ("metric", "quiet", "layer", "category", "weight"))
PORTS = TempTable("_peer_ports", ("host", "entity"))  # the switch ports cabled to the job's hosts
HOURS = TempTable("_peer_hours", ("source_id", "host", "entity", "metric", "bucket", "first_v", "last_v"))
RATES = TempTable("_peer_rates", ("host", "entity", "metric", "switch_side", "rate", "hour_rate", "quiet"))
GROUPS = TempTable("_peer_groups", ("metric", "switch_side", "n", "med", "med_rate", "top", "mad"))
CAND = TempTable("_peer_cand", ("host", "entity", "metric"))
RAW = TempTable("_peer_raw", ("ts", "host", "entity", "metric", "value"))
RULES_DDL = """
CREATE OR REPLACE TEMP TABLE {peer_rules} (metric VARCHAR, quiet DOUBLE, layer VARCHAR, category VARCHAR, weight DOUBLE)
"""
PORTS_DDL = "CREATE OR REPLACE TEMP TABLE {cabled} (host VARCHAR, entity VARCHAR)"
HOURS_DDL = """
CREATE OR REPLACE TEMP TABLE {peer_hours} (source_id INTEGER, host VARCHAR, entity VARCHAR, metric VARCHAR,
    bucket TIMESTAMP, fin_first_ts TIMESTAMP, fin_last_ts TIMESTAMP, first_v DOUBLE, last_v DOUBLE, backwards BIGINT)
"""
# The hours' rows from the summaries: the job's hosts (every entity), and the switch ports cabled to them.
_SUMMARY_HOURS = """
INSERT INTO {peer_hours}
SELECT s.source_id, s.host, s.entity, s.metric, s.bucket, s.fin_first_ts, s.fin_last_ts, s.first_v, s.last_v,
       s.backwards
FROM metric_summaries s {ports}
WHERE s.bucket BETWEEN $lo AND $hi AND list_contains($hours, s.bucket) AND s.fin_first_ts IS NOT NULL
  AND list_contains($metrics, s.metric) AND list_contains($hosts, s.host)
"""
SUMMARY_HOURS_SQL = _SUMMARY_HOURS.replace("{ports}", "")
SUMMARY_PORT_HOURS_SQL = _SUMMARY_HOURS.replace(
    "{ports}", "SEMI JOIN {cabled} p ON p.host = s.host AND p.entity = s.entity"
)
# The same rows from the samples, as store/summaries.py computes them: the previous finite sample of the
# source's series (an hour before the first, so that the first hour's pairs are whole), each pair counted in
# its later sample's hour.
_RAW_HOURS = """
INSERT INTO {peer_hours}
WITH s AS (
    SELECT m.source_id, m.host, m.entity, m.metric, m.ts, m.value, lag(m.value) OVER w AS pv
    FROM metrics m {ports}
    WHERE m.ts >= $lo - INTERVAL 1 HOUR AND m.ts < $hi + INTERVAL 1 HOUR AND isfinite(m.value)
      AND list_contains($metrics, m.metric) AND list_contains($hosts, m.host)
    WINDOW w AS (PARTITION BY m.source_id, m.host, m.entity, m.metric ORDER BY m.ts)
)
SELECT * FROM (
    SELECT source_id, host, entity, metric, time_bucket(INTERVAL 1 HOUR, ts) AS bucket, min(ts), max(ts),
           arg_min(value, ts), arg_max(value, ts), count(*) FILTER (value < pv)
    FROM s GROUP BY ALL
) WHERE list_contains($hours, bucket)
"""
RAW_HOURS_SQL = _RAW_HOURS.replace("{ports}", "")
RAW_PORT_HOURS_SQL = _RAW_HOURS.replace("{ports}", "SEMI JOIN {cabled} p ON p.host = m.host AND p.entity = m.entity")
RATES_SQL = [q for q in sql_file(__package__, "peer_rates.sql").split(";\n") if q.strip()]
# The candidates' samples in the read windows.
RAW_SQL = """
CREATE OR REPLACE TEMP TABLE {peer_raw} AS
SELECT m.ts, m.host, m.entity, m.metric, m.value FROM metrics m
SEMI JOIN {peer_cand} c ON c.host = m.host AND c.entity IS NOT DISTINCT FROM m.entity AND c.metric = m.metric
WHERE ({spans}) AND list_contains($hosts, m.host) AND list_contains($metrics, m.metric) AND m.value IS NOT NULL
"""
# The known windows' series beside their peers (the same figures as a suspect's, over the hours read).
BESIDE_SQL = """
SELECT r.host, r.entity, r.metric, g.n, g.med_rate,
       CASE WHEN r.rate >= g.top[1] THEN coalesce(g.top[2], 0) ELSE g.top[1] END,
       greatest(r.rate, r.quiet) / greatest(power(10, g.med), r.quiet)
FROM {peer_rates} r JOIN {peer_groups} g USING (metric, switch_side)
WHERE g.n >= $min_series AND list_contains($keys, r.host || chr(0) || coalesce(r.entity, '') || chr(0) || r.metric)
"""
ONSETS_SQL = sql_file(__package__, "peer_onsets.sql").replace("{rates}", rates_over("{peer_raw}"))
TEMP_TABLES = tuple(t.name for t in (RULES, PORTS, HOURS, RATES, GROUPS, CAND, RAW))


def peer_outliers(
    conn: duckdb.DuckDBPyConnection,
    hosts: list[str],
    ports: list[tuple[str, str]],
    windows: list[tuple[datetime, datetime]],
    known: list[Anomaly] | None = None,
) -> tuple[list[Anomaly], list[Anomaly]]:
    """(`known` set beside their peers, the suspects): the series of `hosts` (every entity) and of the switch
    `ports` whose error rate in the (sorted, disjoint) read windows is orders of magnitude above their
    peers', in onset order; a series `known` (windows found against their own history) already flags from
    its onset on is left to that signal, and each of `known` on a peer-ruled counter gets its series'
    figures beside its peers' (`peers`, found False)."""
    known = known or []
    if not windows or not (hosts or ports):
        return known, []
    hours = _hours(windows)
    switches = sorted({sw for sw, _ in ports} - set(hosts))
    metrics = [r.metric for r in PEER_RULES]
    args = {"lo": hours[0], "hi": hours[-1], "hours": hours, "metrics": metrics}
    asked = _load(conn, ports)
    summarised = summaries_cover(conn, hours[0], hours[-1] + HOUR)
    sql, port_sql = (SUMMARY_HOURS_SQL, SUMMARY_PORT_HOURS_SQL) if summarised else (RAW_HOURS_SQL, RAW_PORT_HOURS_SQL)
    conn.execute(staged_sql(sql, peer_hours=asked.hours), {**args, "hosts": hosts})
    if switches:
        conn.execute(staged_sql(port_sql, peer_hours=asked.hours, cabled=asked.ports), {**args, "hosts": switches})
    rated = _rated(conn, asked, switches)
    found = _judged(conn, asked, rated, windows, hosts + switches, metrics)
    beside = _beside(conn, rated, known)
    _drop(conn)
    own: dict[tuple[str, str | None, str], datetime] = {}
    for a in known:
        key = (a.host, a.entity, a.metric)
        own[key] = min(a.onset, own.get(key, a.onset))
    # its own history already dates the change (a window of it began by the time this one did): that signal
    # says it; a later burst over a rule's floor does not
    fresh = [a for a in found if own.get((a.host, a.entity, a.metric), datetime.max) > a.first_bad]
    return beside, fresh


@dataclass(frozen=True)
class PeerTables:
    """What one call asks (`_load`): the rules, the switch ports, the hours' rows (filled by peer_outliers)."""

    rules: TempTable
    ports: TempTable
    hours: TempTable


@dataclass(frozen=True)
class Rated:
    """What peer_rates.sql makes of the hours: each series' rate, its peers' figures, the candidates."""

    rates: TempTable
    groups: TempTable
    cand: TempTable


def _rated(conn: duckdb.DuckDBPyConnection, asked: PeerTables, switches: list[str]) -> Rated:
    rated = Rated(RATES, GROUPS, CAND)
    tables = {"peer_hours": asked.hours, "peer_rules": asked.rules, "peer_rates": rated.rates}
    tables |= {"peer_groups": rated.groups, "peer_cand": rated.cand}
    params = {"switches": switches, "min_series": PEER_MIN_SERIES, "reach": PEER_DECADES - 1.0}
    for q in RATES_SQL:  # one statement at a time: DuckDB binds parameters to the last statement only
        sql = staged_sql(q, **{k: t for k, t in tables.items() if "{" + k + "}" in q})
        conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in q})
    return rated


def _beside(conn: duckdb.DuckDBPyConnection, rated: Rated, known: list[Anomaly]) -> list[Anomaly]:
    """`known` with each counter window of a peer-ruled metric set beside its peers' rates (Peers.found
    False): its series' rate over the hours read against their median."""
    keys = sorted({f"{a.host}\0{a.entity or ''}\0{a.metric}" for a in known if a.is_rate})
    sql = staged_sql(BESIDE_SQL, peer_rates=rated.rates, peer_groups=rated.groups)
    rows = conn.execute(sql, {"keys": keys, "min_series": PEER_MIN_SERIES}).fetchall() if keys else []
    context = {(h, e, m): Peers(int(n), float(med), float(mx), float(r), False) for h, e, m, n, med, mx, r in rows}
    return [replace(a, peers=context[k]) if (k := (a.host, a.entity, a.metric)) in context else a for a in known]


def _hours(windows: list[tuple[datetime, datetime]]) -> list[datetime]:
    """The hours (UTC, as the summaries bucket them) that touch any window."""
    out: set[datetime] = set()
    for lo, hi in windows:
        h = lo.replace(minute=0, second=0, microsecond=0)
        while h <= hi:
            out.add(h)
            h += HOUR
    return sorted(out)


def _load(conn: duckdb.DuckDBPyConnection, ports: list[tuple[str, str]]) -> PeerTables:
    conn.execute(staged_sql(RULES_DDL, peer_rules=RULES))
    insert_rows(conn, RULES.name, [tuple(r) for r in PEER_RULES])
    conn.execute(staged_sql(PORTS_DDL, cabled=PORTS))
    conn.execute(
        f"INSERT INTO {PORTS} SELECT unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
        [[p[0] for p in ports], [p[1] for p in ports]],
    )
    conn.execute(staged_sql(HOURS_DDL, peer_hours=HOURS))
    return PeerTables(RULES, PORTS, HOURS)


def _judged(
    conn: duckdb.DuckDBPyConnection,
    asked: PeerTables,
    rated: Rated,
    windows: list[tuple[datetime, datetime]],
    hosts: list[str],
    metrics: list[str],
) -> list[Anomaly]:
    """The candidates' raw samples, their rise dated and their elevated rate held to their peers'."""
    cand = conn.execute(f"SELECT DISTINCT host FROM {rated.cand} ORDER BY 1").fetchall()
    if not cand:
        return []
    spans = " OR ".join(["m.ts BETWEEN ? AND ?"] * len(windows))
    raw = staged_sql(RAW_SQL, peer_raw=RAW, peer_cand=rated.cand).format(spans=spans)
    raw = raw.replace("$hosts", "?").replace("$metrics", "?")
    conn.execute(raw, [*(t for w in windows for t in w), [h for (h,) in cand], metrics])
    staged = {"peer_rates": rated.rates, "peer_groups": rated.groups, "peer_rules": asked.rules}
    rows = conn.execute(
        staged_sql(ONSETS_SQL, peer_raw=RAW, **staged),
        {
            "nats": PEER_CHANGE_NATS,
            "rise": PEER_RISE,
            "decades": PEER_DECADES,
            "z": PEER_Z,
            "mad_floor": PEER_MAD_FLOOR,
            "min_events": PEER_MIN_EVENTS,
        },
    ).fetchall()
    return [_anomaly(*row) for row in rows]


def _anomaly(
    host: str,
    entity: str | None,
    metric: str,
    layer: str,
    category: str,
    weight: float,
    last_normal: datetime,
    first_bad: datetime,
    last: datetime,
    rate: float,
    peak: float,
    samples: int,
    series: int,
    median: float,
    others_max: float,
    ref: float,
) -> Anomaly:
    """A suspect as a signal: its onset midway between the last sample at its old rate and the first at
    the new (an old fault: its first sample read); `before` the peers' median, `threshold` the level a
    series had to reach (PEER_DECADES above the peers' reference)."""
    onset = last_normal + (first_bad - last_normal) / 2
    peers = Peers(int(series), float(median), float(others_max), float(rate / ref))
    threshold = ref * 10**PEER_DECADES
    return Anomaly(
        host, entity, metric, layer, category, weight, onset, last, median, rate, peak, int(samples), True,
        last_normal, threshold, first_bad, peers=peers,
    )  # fmt: skip


def _drop(conn: duckdb.DuckDBPyConnection) -> None:
    drop_temp(conn, TEMP_TABLES)
