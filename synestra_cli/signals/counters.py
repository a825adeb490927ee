"""Rates from cumulative counters, with window functions; a counter reset is a negative delta.

Exporters report counters as totals since boot (or since the last clear): the increase between two
samples is value - previous, unless the counter went backwards (a reboot, a driver reload, a
`perfquery -x -R`), in which case the counter restarted from zero and the increase is the new value.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.store.sql import placeholders

# Over any relation with (ts, host, entity, metric, value): per-sample delta and rate.
_RATES = """
SELECT ts, host, entity, metric, value, prev_ts,
       CASE WHEN prev IS NULL THEN NULL WHEN value < prev THEN value ELSE value - prev END AS delta,
       epoch(ts) - epoch(prev_ts) AS dt_s,
       CASE WHEN prev IS NULL OR ts = prev_ts THEN NULL
            WHEN value < prev THEN value ELSE value - prev END / (epoch(ts) - epoch(prev_ts)) AS rate
FROM (
    SELECT ts, host, entity, metric, value,
           lag(value) OVER w AS prev, lag(ts) OVER w AS prev_ts
    FROM {source} WHERE isfinite(value)  -- NaN (a scrape's "no value", a staleness marker) is no evidence
    -- value breaks a tie in time (two exports of one series at one second): the same rates on every run
    WINDOW w AS (PARTITION BY host, entity, metric ORDER BY ts, value)
)
"""


def rates_over(source: str) -> str:
    """The per-sample delta and rate SQL over a relation (a table name or a parenthesised SELECT) with
    (ts, host, entity, metric, value)."""
    return _RATES.format(source=source)


# The scoped telemetry of one explanation (the samples signals/scope_samples.py stages). A sample read
# twice (two exported files that overlap, or the reads of two windows that touch) is one sample: its
# copy would be a zero-second step whose place among the samples, and so the runs of anomalous samples,
# depended on the order the threads delivered them.
def distinct_rates_sql(samples: str) -> str:
    """rates_over the distinct samples of `samples` (a table with ts, host, entity, metric, value)."""
    return rates_over(f"(SELECT DISTINCT ts, host, entity, metric, value FROM {samples})")


SCOPE_RATES_SQL = distinct_rates_sql("_scope")  # over one job's scope (signals/scope_samples.py SCOPE)

METRIC_RATES_SQL = (
    _RATES.format(
        source="(SELECT ts, host, entity, metric, value FROM metrics "
        "WHERE metric = ? AND ts BETWEEN ? AND ? AND host IN ({hosts}))"
    )
    + " ORDER BY host, entity, ts"
)


@dataclass(frozen=True)
class Rate:
    ts: datetime
    host: str
    entity: str | None
    delta: float
    rate: float


def counter_rates(
    conn: duckdb.DuckDBPyConnection, metric: str, hosts: list[str], start: datetime, end: datetime
) -> list[Rate]:
    """Per-sample increase and rate (per second) of one counter on the given hosts in [start, end]."""
    if not hosts:
        return []
    sql = METRIC_RATES_SQL.format(hosts=placeholders(len(hosts)))
    rows = conn.execute(sql, [metric, start, end, *hosts]).fetchall()
    return [
        Rate(ts, host, entity, delta, rate)
        for ts, host, entity, _m, _v, _prev, delta, _dt, rate in rows
        if delta is not None
    ]
