"""Which series of every job could hold an anomaly, from the store's summaries: step 1 of
signals/fleet_telemetry.py, the per-job tests of signals/candidates.py run once for all the jobs.

Each job's hosts and switches are tested on their host summaries over its own hours (`_fhost_cand`),
the series summaries of those that pass are read (`_fsumm`), each job's series are tested on them
(`_fcand_series`, `_fcand`), and every series of the scope gets an integer id (`_fseries`). The tables
the statements read (the rules, each job's hull and windows, hosts and switch ports) are loaded by
signals/fleet_tables.py and passed in as handles (signals/staging.py); `fleet_candidates` returns the
handles of what the next steps read (FleetCandidates). signals/fleet_telemetry.py drops every table after
its read.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from synestra_cli.signals.candidate_test import CANDIDATE_TEST, HOST_BITS, HOST_SERIES_COLUMNS, SERIES_BITS
from synestra_cli.signals.candidates import HAS_ROW_RANGES_SQL
from synestra_cli.signals.fleet_tables import FleetTables
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import (
    CLOCK_EVENT_METRIC,
    CLOCK_EVENT_SIGNALS,
    METRIC_RULES,
    MIN_ANOMALY_SAMPLES,
)
from synestra_cli.store.series import SAME_SERIES
from synestra_cli.store.sql import has_table, scalar

# A summary row's hour against each of its job's windows (`_fjobs.wins`), in the row itself: its samples
# overlap one (`touches`), one of them is surely inside one (`seen`: its first or last).
TOUCHES = "list_bool_or([s.last_ts >= w.lo AND s.first_ts <= w.hi FOR w IN j.wins])"
SEEN = "list_bool_or([(s.first_ts BETWEEN w.lo AND w.hi) OR (s.last_ts BETWEEN w.lo AND w.hi) FOR w IN j.wins])"
# signals/candidates.py's host stage for every job: each job's (host, metric) from host_summaries (a
# host's entities combined), its switches included; only those that pass the candidate test (or that
# several sources hold) have their per-series summaries read (`_fhost_cand`).
JOB_HOSTS_SQL = """
CREATE OR REPLACE TEMP TABLE _fjob_hosts AS SELECT job, host FROM {hosts} UNION SELECT job, host FROM {ports}
"""
HOST_SERIES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _fhost_series AS
SELECT job, host, metric, {HOST_SERIES_COLUMNS}
FROM (SELECT h.job, s.*, {TOUCHES} AS touches, {SEEN} AS seen
      FROM host_summaries s JOIN _fjob_hosts h ON h.host = s.host
      JOIN {{jobs}} j ON j.job = h.job AND s.last_ts >= j.lo AND s.first_ts <= j.hi
      WHERE s.host IN (SELECT host FROM _fjob_hosts) AND s.metric IN (SELECT unnest($metrics::VARCHAR[])))
GROUP BY job, host, metric
"""
HOST_CANDIDATES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _fhost_cand AS
SELECT s.job, s.host, s.metric FROM _fhost_series s LEFT JOIN {{rules}} r USING (metric)
WHERE s.n > 0 AND (s.several OR {CANDIDATE_TEST.format(bits=HOST_BITS)})
"""
HOST_OBSERVED_SQL = """
SELECT job, count(*) FILTER (seen AND n > 0), count(*) FILTER (n > 0) FROM _fhost_series GROUP BY job
"""
HOSTS_PASSED = "SEMI JOIN _fhost_cand hc ON hc.job = h.job AND hc.host = s.host AND hc.metric = s.metric"

# signals/candidates.py _SUMM for every job: a summary row once per job whose hull it falls in, with
# `touches` and `seen` in the row itself. A row is one source, series and hour (its key), so nothing is
# grouped: a join to the windows and a GROUP BY job and key took 2.0 of the campus's 17 s, the list 0.65 s.
_SUMM = f"""
INSERT INTO _fsumm
SELECT h.job, s.source_id, s.host, s.entity, s.metric, s.bucket, {{ranges}}, {TOUCHES}, {SEEN},
       s.n, s.lo, s.hi, s.fin_first_ts, s.fin_last_ts, s.first_v, s.last_v, s.rate_lo, s.rate_hi, s.backwards,
       s.repeats, s.pair_hi, s.pair_lo, s.bits_or, s.bits_and
FROM metric_summaries s {{join}}
JOIN {{jobs}} j ON j.job = h.job AND s.last_ts >= j.lo AND s.first_ts <= j.hi {{passed}}
WHERE s.host IN (SELECT host FROM {{table}}) AND s.metric IN (SELECT unnest($metrics::VARCHAR[]))
"""
SUMM_DDL = """
CREATE OR REPLACE TEMP TABLE _fsumm (job VARCHAR, source_id INTEGER, host VARCHAR, entity VARCHAR, metric VARCHAR,
    bucket TIMESTAMP, row_lo BIGINT, row_hi BIGINT, touches BOOLEAN, seen BOOLEAN, n BIGINT, lo DOUBLE, hi DOUBLE,
    fin_first_ts TIMESTAMP, fin_last_ts TIMESTAMP, first_v DOUBLE, last_v DOUBLE, rate_lo DOUBLE, rate_hi DOUBLE,
    backwards BIGINT, repeats BIGINT, pair_hi DOUBLE, pair_lo DOUBLE, bits_or BIGINT, bits_and BIGINT)
"""
SUMM_HOSTS_SQL = _SUMM.format(
    join="JOIN {hosts} h ON h.host = s.host", table="{hosts}", ranges="{ranges}", passed="{passed}", jobs="{jobs}"
)
SUMM_PORTS_SQL = _SUMM.format(
    join="JOIN {ports} h ON h.host = s.host AND h.entity = s.entity",
    table="{ports}",
    jobs="{jobs}",
    ranges="{ranges}",
    passed="{passed}",
)
# Where each hour's samples are (migration 018); a store opened read-only before it reads by file.
ROW_RANGES = "s.row_lo, s.row_hi"
NO_ROW_RANGES = "NULL, NULL"

# signals/candidates.py SERIES_SQL, per job (the window over the hours only for series several sources hold).
SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE _fcand_series AS
WITH series AS (
    SELECT job, host, entity, metric, bool_or(seen) AS seen, sum(n) FILTER (touches) AS n,
           min(lo) FILTER (touches) AS lo, max(hi) FILTER (touches) AS hi, min(rate_lo) AS rate_lo,
           max(rate_hi) AS rate_hi, sum(backwards) AS backwards, sum(repeats) AS repeats,
           max(pair_hi) FILTER (touches) AS pair_hi, min(pair_lo) FILTER (touches) AS pair_lo,
           bit_or(bits_or) FILTER (touches) AS bits_or, bit_and(bits_and) FILTER (touches) AS bits_and,
           min(source_id) <> max(source_id) AS several
    FROM _fsumm GROUP BY job, host, entity, metric
), e AS (
    SELECT u.job, u.host, u.entity, u.metric, u.touches, u.first_v, u.fin_first_ts,
           lag(u.last_v) OVER w AS p_v, lag(u.fin_last_ts) OVER w AS p_ts
    FROM _fsumm u SEMI JOIN series s
         ON s.several AND s.job = u.job AND s.host IS NOT DISTINCT FROM u.host
        AND s.entity IS NOT DISTINCT FROM u.entity AND s.metric = u.metric
    WHERE u.fin_first_ts IS NOT NULL
    WINDOW w AS (PARTITION BY u.job, u.host, u.entity, u.metric ORDER BY u.fin_first_ts, u.fin_last_ts)
), edges AS (
    SELECT job, host, entity, metric,
           min((first_v - p_v) / (epoch(fin_first_ts) - epoch(p_ts))) FILTER (first_v >= p_v AND fin_first_ts > p_ts)
               AS e_lo,
           max((first_v - p_v) / (epoch(fin_first_ts) - epoch(p_ts))) FILTER (first_v >= p_v AND fin_first_ts > p_ts)
               AS e_hi,
           count(*) FILTER (first_v < p_v) AS e_backwards,
           count(*) FILTER (fin_first_ts <= p_ts) AS e_unordered,
           max(least(first_v, p_v)) FILTER (touches) AS e_pair_hi,
           min(greatest(first_v, p_v)) FILTER (touches) AS e_pair_lo
    FROM e WHERE p_ts IS NOT NULL GROUP BY ALL
)
SELECT s.job, s.host, s.entity, s.metric, s.seen, s.lo, s.hi, least(s.rate_lo, e.e_lo) AS rate_lo,
       greatest(s.rate_hi, e.e_hi) AS rate_hi, s.backwards + coalesce(e.e_backwards, 0) AS backwards,
       s.repeats + coalesce(e.e_unordered, 0) AS unordered, greatest(s.pair_hi, e.e_pair_hi) AS pair_hi,
       least(s.pair_lo, e.e_pair_lo) AS pair_lo, s.bits_or, s.bits_and
FROM series s LEFT JOIN edges e
     ON e.job = s.job AND e.host IS NOT DISTINCT FROM s.host AND e.entity IS NOT DISTINCT FROM s.entity
        AND e.metric = s.metric
WHERE s.n > 0
"""
OBSERVED_SQL = "SELECT job, count(*) FILTER (seen), count(*) FROM _fcand_series GROUP BY job"

# signals/candidates.py CANDIDATES_SQL, per job. Each candidate gets a series
# id (`sid`, with room after it for the bits decoded from a clocks-event bitmask): every later step
# partitions and joins by one integer, not by job, host, entity and metric.
CANDIDATES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _fcand AS
SELECT row_number() OVER (ORDER BY s.job, s.host, s.entity, s.metric) * $stride AS sid, s.job, s.host, s.entity,
       s.metric
FROM _fcand_series s LEFT JOIN {{rules}} r USING (metric)
WHERE {CANDIDATE_TEST.format(bits=SERIES_BITS)}
"""
# Each candidate's series id in the store's dictionary (the series layout: its samples are read by it).
SERIES_OF_CANDIDATES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _fcand AS
SELECT c.*, d.series_id FROM _fcand c JOIN series d ON {SAME_SERIES.format(a="d", b="c")}
"""
# Every series of the scope: the candidates, and each bit decoded from a bitmask candidate (sid + k).
# A bit that never changes in the candidate's hours (never set; or always set, its `unless` never) decodes
# to a constant series, which no baseline finds anomalous: it is not read (half the campus's decoded rows).
# Bits the summaries could not tell (bits_or NULL) are all read.
SERIES_IDS_SQL = """
CREATE OR REPLACE TEMP TABLE _fseries AS
SELECT sid, job, host, entity, metric FROM _fcand
UNION ALL
SELECT c.sid + d.k, c.job, c.host, c.entity, d.metric
FROM _fcand c
JOIN _fcand_series s ON s.job = c.job AND s.host IS NOT DISTINCT FROM c.host
     AND s.entity IS NOT DISTINCT FROM c.entity AND s.metric = c.metric
CROSS JOIN (VALUES {values}) d(k, metric, bit, unless)
WHERE c.metric = ? AND (s.bits_or IS NULL OR (s.bits_or & d.bit <> 0
                        AND (coalesce(s.bits_and, 0) & d.bit = 0 OR s.bits_or & d.unless <> 0)))
"""


def _metrics() -> list[str]:
    derived = {name for name, _, _ in CLOCK_EVENT_SIGNALS}
    return [r.metric for r in METRIC_RULES if r.metric not in derived] + [CLOCK_EVENT_METRIC]


def clock_bits() -> tuple[str, list[object]]:
    """The VALUES rows of the decoded clocks-event bits (k, metric, bit, unless) and their parameters."""
    values = ", ".join(["(?, ?, ?, ?)"] * len(CLOCK_EVENT_SIGNALS))
    return values, [v for k, signal in enumerate(CLOCK_EVENT_SIGNALS, 1) for v in (k, *signal)]


# What the next steps read (signals/fleet_telemetry.py): each job's series summaries' hours (SUMM: where the
# candidates' samples are), its candidates (CAND: with their `sid`, and in the series layout their store id) and
# every series of the scope (SERIES_IDS: the candidates and their decoded bits).
SUMM = TempTable("_fsumm", ("job", "source_id", "host", "entity", "metric", "bucket", "row_lo", "row_hi", "touches"))
CAND = TempTable("_fcand", ("sid", "job", "host", "entity", "metric"))
SERIES_IDS = TempTable("_fseries", ("sid", "job", "host", "entity", "metric"))
INTERNAL = ("_fjob_hosts", "_fhost_series", "_fhost_cand", "_fcand_series")  # read only here


@dataclass(frozen=True)
class FleetCandidates:
    summ: TempTable
    cand: TempTable
    series: TempTable
    counts: dict[str, tuple[int, int]]  # per job: the series (or host-metrics) seen inside its windows, touching them


def fleet_candidates(conn: duckdb.DuckDBPyConnection, tables: FleetTables, by_series: bool = False) -> FleetCandidates:
    """Every job's candidates (`by_series`: with the store's id of each, store/series.py) and every series of
    the scope, from the jobs, windows, hosts and ports in `tables`."""
    metrics = {"metrics": _metrics()}
    ranges = ROW_RANGES if scalar(conn, HAS_ROW_RANGES_SQL) else NO_ROW_RANGES
    test = {"bitmask": CLOCK_EVENT_METRIC, "pairs": MIN_ANOMALY_SAMPLES >= 2}
    staged = has_table(conn, "host_summaries")  # migration 021; a store opened read-only before it tests every host
    if staged:
        conn.execute(staged_sql(JOB_HOSTS_SQL, hosts=tables.hosts, ports=tables.ports))
        conn.execute(staged_sql(HOST_SERIES_SQL, jobs=tables.jobs), metrics)
        conn.execute(staged_sql(HOST_CANDIDATES_SQL, rules=tables.rules), test)
    fill = {"ranges": ranges, "passed": HOSTS_PASSED if staged else ""}
    conn.execute(SUMM_DDL)
    conn.execute(staged_sql(SUMM_HOSTS_SQL, hosts=tables.hosts, jobs=tables.jobs).format(**fill), metrics)
    conn.execute(staged_sql(SUMM_PORTS_SQL, ports=tables.ports, jobs=tables.jobs).format(**fill), metrics)
    conn.execute(SERIES_SQL)
    observed = conn.execute(HOST_OBSERVED_SQL if staged else OBSERVED_SQL).fetchall()
    conn.execute(staged_sql(CANDIDATES_SQL, rules=tables.rules), {**test, "stride": len(CLOCK_EVENT_SIGNALS) + 1})
    if by_series:
        conn.execute(SERIES_OF_CANDIDATES_SQL)
    values, bits = clock_bits()
    conn.execute(SERIES_IDS_SQL.format(values=values), [*bits, CLOCK_EVENT_METRIC])
    return FleetCandidates(SUMM, CAND, SERIES_IDS, {j: (seen, touched) for j, seen, touched in observed})
