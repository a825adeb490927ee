"""The straggler's host: in synchronous training the slow rank's GPUs stay busy while its peers wait.

Every rank waits for the slowest at each collective, so when a job slows without an infrastructure
fault the GPU that sets the pace keeps its tensor/SM activity and power, while every other GPU's
activity falls by the slowdown factor (they spend the difference waiting in NCCL). Per GPU, DuckDB
averages each activity metric before the slowdown (the baseline) and during it, up to the checkpoint;
the GPU's `kept` is the mean over the metrics of during / before (the level against the job's median
GPU when there is no baseline). A host scores its busiest GPU's; the host that kept clearly more than
its peers is named (thresholds.STRAGGLER_*), with a confidence that grows with how far it stands out of
their spread and how far ahead of the runner-up. One summary row per GPU, never per sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from synestra_cli.signals.thresholds import (
    ACTIVITY_METRICS,
    LOOKBACK_S,
    STRAGGLER_MIN_GAP,
    STRAGGLER_MIN_Z,
    STRAGGLER_NOISE_FLOOR,
)
from synestra_cli.store.sql import fetch_one, placeholders

KEPT_SQL = """
WITH s AS (
    SELECT host, entity, metric,
           avg(value) FILTER (WHERE ts < ?) AS before, avg(value) FILTER (WHERE ts >= ?) AS during
    FROM metrics
    WHERE ts BETWEEN ? AND ? AND host IN ({hosts}) AND metric IN ({metrics})
      AND value IS NOT NULL AND NOT isnan(value)
    GROUP BY ALL
), r AS (
    SELECT host, entity,
           coalesce(CASE WHEN before > 0 THEN during / before END,
                    during / nullif(median(during) OVER (PARTITION BY metric), 0)) AS kept
    FROM s WHERE during IS NOT NULL
), gpu AS (
    SELECT host, entity, avg(kept) AS kept FROM r WHERE kept IS NOT NULL GROUP BY ALL
), h AS (
    SELECT host, arg_max(entity, kept) AS entity, max(kept) AS kept FROM gpu GROUP BY host
), ranked AS (
    SELECT *, row_number() OVER (ORDER BY kept DESC, host) AS rk FROM h
), peers AS (
    SELECT median(kept) AS med, count(*) AS n FROM ranked WHERE rk > 1
), spread AS (
    SELECT median(abs(r.kept - p.med)) AS mad FROM ranked r, peers p WHERE r.rk > 1
)
SELECT r.host, r.entity, r.kept, p.med, s.mad, p.n,
       (SELECT kept FROM ranked WHERE rk = 2) AS runner_up
FROM ranked r, peers p, spread s WHERE r.rk = 1
"""


@dataclass(frozen=True)
class StragglerHost:
    host: str
    gpu: str | None
    kept: float  # the share of its own activity the host's busiest GPU kept during the slowdown
    peers_kept: float  # the median over the other hosts
    confidence: float


def straggler_host(
    conn: duckdb.DuckDBPyConnection,
    hosts: list[str],
    healthy_until: datetime,
    slow_from: datetime,
    until: datetime,
    since: datetime | None = None,
) -> StragglerHost | None:
    """The host that kept its GPUs busy while its peers' activity fell, when that is clear; else None.
    Baseline: up to LOOKBACK_S before `healthy_until` (the last healthy step line; not before `since`,
    the attempt's start); slowdown: from `slow_from` (the first slow line) to `until` (the checkpoint)."""
    if len(hosts) < 2:
        return None
    lo = max(healthy_until - timedelta(seconds=LOOKBACK_S), since or datetime.min)
    sql = KEPT_SQL.format(hosts=placeholders(len(hosts)), metrics=placeholders(len(ACTIVITY_METRICS)))
    row = fetch_one(conn, sql, [healthy_until, slow_from, lo, until, *hosts, *ACTIVITY_METRICS])
    if row is None or row[3] is None:
        return None
    host, gpu, kept, med, mad, _n, runner_up = row
    gap = kept - med
    noise = max(mad or 0.0, STRAGGLER_NOISE_FLOOR)
    ahead = kept - (runner_up if runner_up is not None else med)
    if gap < STRAGGLER_MIN_GAP or gap < STRAGGLER_MIN_Z * noise or ahead < gap / 2:
        return None
    clarity = min(1.0, gap / (2 * STRAGGLER_MIN_Z * noise))
    confidence = round(0.5 + 0.35 * clarity * min(1.0, ahead / gap), 3)
    return StragglerHost(host, gpu, round(kept, 3), round(med, 3), confidence)
