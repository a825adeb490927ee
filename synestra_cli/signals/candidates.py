"""Which of a job's series could hold an anomaly, from the store's hourly summaries (store/summaries.py).

The raw read of a big job's telemetry costs a scan of every row group of its hosts: a row group holds
a host's whole day, so the time window prunes nothing. The summaries hold one row per source, series
and hour; from them each series' candidate test is decided without its samples, and only the
candidates' samples are read raw (their hosts' row groups: a few hosts, not the whole job).

Each test is a superset of the anomaly test of signals/anomalies.py, so no anomaly is lost:

- a gauge: its range over the hours that touch the read windows (wider than the windows' own range)
  crosses its rule, as the raw test;
- a counter: it moved, and the largest rate between consecutive samples can cross the rule against
  the smallest one (a baseline is a quartile of rates, never below the smallest), over every hour from
  the first window to the last: a rate across the gap between two windows is an average of the rates
  in between. A counter that went backwards (a reset) or whose sources overlap in time has no such
  bound: it stays a candidate;
- a clocks-event bitmask: one of the decoded bits is set in some sample and clear in another.

The summaries are used only when every source of the time range has one (`summarised_sources`);
else, and on a store opened read-only before migration 012, the caller reads raw.
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from synestra_cli import settings
from synestra_cli.signals.candidate_test import CANDIDATE_TEST, HOST_BITS, HOST_SERIES_COLUMNS, SERIES_BITS
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.signals.thresholds import CLOCK_EVENT_METRIC, MIN_ANOMALY_SAMPLES
from synestra_cli.store.series import SAME_SERIES, has_series_layout
from synestra_cli.store.sql import has_table, one_row, placeholders, scalar
from synestra_cli.store.summaries import BUCKET

# Row ranges (migration 018): a store opened read-only before it has none, and reads by source.
HAS_ROW_RANGES_SQL = """
SELECT count(*) FROM duckdb_columns()
WHERE database_name = current_database() AND schema_name = 'main' AND table_name = 'metric_summaries'
  AND column_name = 'row_lo'
"""
# Sources in the time range (or without one) whose summary was not written.
UNSUMMARISED_SQL = """
SELECT count(*) FROM sources s ANTI JOIN summarised_sources u USING (source_id)
WHERE s.first_ts IS NULL OR (s.last_ts >= ? AND s.first_ts <= ?)
"""

# The tables scope_from_summaries makes and hands to its steps (signals/staging.py): the series summaries'
# hours (SUMM), the candidates (CAND), the host stage's (HOST_CAND), and the candidates' hours and rows by rowid.
SUMM = TempTable("_summ", ("source_id", "bucket", "row_lo", "row_hi", "host", "entity", "metric", "touches", "n"))
CAND = TempTable("_cand", ("host", "entity", "metric"))
HOST_CAND = TempTable("_host_cand", ("host", "metric"))
HOURS = TempTable("_cand_hours", ("source_id", "host", "entity", "metric", "bucket", "n", "row_lo", "row_hi"))
ROWS = TempTable("_cand_rows", ("ts", "host", "entity", "metric", "value"))

SUMM_DDL = """
CREATE OR REPLACE TEMP TABLE {summ} (source_id INTEGER, bucket TIMESTAMP, row_lo BIGINT, row_hi BIGINT, host VARCHAR,
    entity VARCHAR, metric VARCHAR, touches BOOLEAN, seen BOOLEAN, n BIGINT, lo DOUBLE, hi DOUBLE,
    fin_first_ts TIMESTAMP, fin_last_ts TIMESTAMP, first_v DOUBLE, last_v DOUBLE, rate_lo DOUBLE, rate_hi DOUBLE,
    backwards BIGINT, repeats BIGINT, pair_hi DOUBLE, pair_lo DOUBLE, bits_or BIGINT, bits_and BIGINT)
"""
# The hours from the first window to the last; `touches`: the hour's samples overlap a window, `seen`:
# one of its samples is surely inside one (its first or last). The hosts' first and last name bound the
# scan itself (a long host list is a join after the scan): a job's hosts are mostly a range of names.
_SUMM = """
INSERT INTO {summ}
SELECT s.source_id, s.bucket, {ranges}, s.host, s.entity, s.metric, {touches}, {seen}, s.n, s.lo, s.hi,
       s.fin_first_ts, s.fin_last_ts, s.first_v, s.last_v, s.rate_lo, s.rate_hi, s.backwards, s.repeats, s.pair_hi,
       s.pair_lo, s.bits_or, s.bits_and
FROM metric_summaries s {join} {hosts_passed}
WHERE s.last_ts >= ? AND s.first_ts <= ? AND s.host BETWEEN ? AND ? AND s.host IN ({hosts}) {entities}
  AND s.metric IN ({metrics})
"""
SUMM_HOSTS_SQL = _SUMM.replace("{join}", "").replace("{entities}", "")
SUMM_PORTS_SQL = _SUMM.replace("{join}", "SEMI JOIN {cabled} p ON p.host = s.host AND p.entity = s.entity").replace(
    "{entities}", "AND s.entity IN ({ports})"
)

# Per series: its range over the hours touching a window; its rate bounds over all the hours, with
# the pairs between the hours of one source and the next source of the same series added. Within one
# source those pairs are already in the later hour's row (its summary's previous sample spans hours):
# only a series held by several sources needs the window over its hours (few do: a sort of every
# series' hours cost more than the rest of the test at 1,000 hosts).
SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE _cand_series AS
WITH series AS (
    SELECT host, entity, metric, bool_or(seen) AS seen, sum(n) FILTER (touches) AS n,
           min(lo) FILTER (touches) AS lo, max(hi) FILTER (touches) AS hi, min(rate_lo) AS rate_lo,
           max(rate_hi) AS rate_hi, sum(backwards) AS backwards, sum(repeats) AS repeats,
           max(pair_hi) FILTER (touches) AS pair_hi, min(pair_lo) FILTER (touches) AS pair_lo,
           bit_or(bits_or) FILTER (touches) AS bits_or, bit_and(bits_and) FILTER (touches) AS bits_and,
           min(source_id) <> max(source_id) AS several
    FROM {summ} GROUP BY host, entity, metric
), e AS (
    SELECT u.host, u.entity, u.metric, u.touches, u.first_v, u.fin_first_ts,
           lag(u.last_v) OVER w AS p_v, lag(u.fin_last_ts) OVER w AS p_ts
    FROM {summ} u SEMI JOIN series s
         ON s.several AND s.host IS NOT DISTINCT FROM u.host AND s.entity IS NOT DISTINCT FROM u.entity
        AND s.metric = u.metric
    WHERE u.fin_first_ts IS NOT NULL
    WINDOW w AS (PARTITION BY u.host, u.entity, u.metric ORDER BY u.fin_first_ts, u.fin_last_ts)
), edges AS (
    SELECT host, entity, metric,
           min((first_v - p_v) / (epoch(fin_first_ts) - epoch(p_ts))) FILTER (first_v >= p_v AND fin_first_ts > p_ts)
               AS e_lo,
           max((first_v - p_v) / (epoch(fin_first_ts) - epoch(p_ts))) FILTER (first_v >= p_v AND fin_first_ts > p_ts)
               AS e_hi,
           count(*) FILTER (first_v < p_v) AS e_backwards,
           count(*) FILTER (fin_first_ts <= p_ts) AS e_unordered,  -- two sources of one series overlap in time
           max(least(first_v, p_v)) FILTER (touches) AS e_pair_hi,
           min(greatest(first_v, p_v)) FILTER (touches) AS e_pair_lo
    FROM e WHERE p_ts IS NOT NULL GROUP BY ALL
)
SELECT s.host, s.entity, s.metric, s.seen, s.lo, s.hi, least(s.rate_lo, e.e_lo) AS rate_lo,
       greatest(s.rate_hi, e.e_hi) AS rate_hi, s.backwards + coalesce(e.e_backwards, 0) AS backwards,
       s.repeats + coalesce(e.e_unordered, 0) AS unordered, greatest(s.pair_hi, e.e_pair_hi) AS pair_hi,
       least(s.pair_lo, e.e_pair_lo) AS pair_lo, s.bits_or, s.bits_and
FROM series s LEFT JOIN edges e
     ON e.host IS NOT DISTINCT FROM s.host AND e.entity IS NOT DISTINCT FROM s.entity AND e.metric = s.metric
WHERE s.n > 0
"""

CANDIDATES_SQL = f"""
CREATE OR REPLACE TEMP TABLE {{cand}} AS
SELECT s.host, s.entity, s.metric FROM _cand_series s LEFT JOIN {{rules}} r USING (metric)
WHERE {CANDIDATE_TEST.format(bits=SERIES_BITS)}
"""

# The host stage (store/summaries.py host_summaries): the same test on each (host, metric), its entities'
# hours combined. Every column of a host's row bounds its entities' (the highest high, the lowest low,
# the largest rate, bits set in any and every entity), and every rule's ratio is >= 0, so an entity that
# passes the test above makes its host pass this one: a host that fails it holds no candidate, and its
# per-series summaries are not read. Which source follows which is per series: a (host, metric) held by
# several sources goes on to the per-series test, which adds the pairs between them.
HOST_SERIES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _host_series AS
SELECT host, metric, {HOST_SERIES_COLUMNS}
FROM (SELECT s.*, {{touches}} AS touches, {{seen}} AS seen FROM host_summaries s
      WHERE s.last_ts >= ? AND s.first_ts <= ? AND s.host IN ({{hosts}}) AND s.metric IN ({{metrics}}))
GROUP BY host, metric
"""
HOST_OBSERVED_SQL = "SELECT count(*) FILTER (seen AND n > 0), count(*) FILTER (n > 0) FROM _host_series"
HOST_CANDIDATES_SQL = f"""
CREATE OR REPLACE TEMP TABLE {{host_cand}} AS
SELECT s.host, s.metric FROM _host_series s LEFT JOIN {{rules}} r USING (metric)
WHERE s.n > 0 AND (s.several OR {CANDIDATE_TEST.format(bits=HOST_BITS)})
"""
# The sources that hold a candidate's samples: a candidate's samples in the windows are in hours that
# touch them, and every such hour of every source has its summary row (summaries_cover).
CAND_SOURCES_SQL = """
SELECT DISTINCT s.source_id, s.host FROM {summ} s
SEMI JOIN {cand} c ON c.host = s.host AND c.entity IS NOT DISTINCT FROM s.entity AND c.metric = s.metric
ORDER BY ALL
"""
# The candidates' hours that touch a window, with where their samples are (store/summaries.py row_lo, row_hi).
# One text for the per-job read and the fleet's (signals/fleet_telemetry.py): {distinct} and {job} are
# empty here; the fleet's summaries and candidates carry the job, and an hour several jobs share is read once.
CAND_HOURS = """
CREATE OR REPLACE TEMP TABLE {hours} AS
SELECT {distinct}s.source_id, s.host, s.entity, s.metric, s.bucket, s.n, s.row_lo, s.row_hi FROM {summ} s
SEMI JOIN {cand} c ON {job}c.host = s.host AND c.entity IS NOT DISTINCT FROM s.entity AND c.metric = s.metric
WHERE s.touches
"""
CAND_HOURS_SQL = CAND_HOURS.format(hours="{hours}", distinct="", summ="{summ}", cand="{cand}", job="")
# Those hours' samples read by rowid: a few hundred rows per candidate. Only rows of the hour's own source,
# series and hour count, so the read holds all of an hour's samples exactly when it finds `n` of them.
# The ranges are constant `rowid BETWEEN` terms: DuckDB pushes those to the table scan, which reads only
# their row groups; a join or `rowid IN (subquery)` filter only prunes by its min and max, and a 256-host
# job's hours lie all over the store (5 CPU s, a full scan, for 5,243 rows). A series' hours are adjacent
# rows of its file (written sorted by host, entity, metric and time), so near ranges are read as one.
ROWID_RANGES = """
WITH r AS (
    SELECT row_lo, row_hi,
           max(row_hi) OVER (ORDER BY row_lo ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reached
    FROM {hours}
), g AS (
    SELECT row_lo, row_hi, count(*) FILTER (WHERE NOT coalesce(row_lo - reached <= $gap, false))
                           OVER (ORDER BY row_lo) AS k
    FROM r
)
SELECT min(row_lo), max(row_hi) FROM g GROUP BY k ORDER BY 1
"""
ROWID_MERGE_GAP = 2048  # rows: DuckDB's vector
# Past this many ranges a full read of the candidates' files is cheaper (~2 ms a range, ~1 s a full scan).
ROWID_MAX_RANGES = 400
# Each scan costs ~1 ms beyond its rows (planning it and starting it against every row group of the table)
# and runs on one thread when it reads one row group: so a few ranges share a scan, as an OR of constant
# ranges that DuckDB still pushes to the table scan (it reads only their row groups, on both threads).
# An OR's cost grows with the square of its terms: 8 of them cost about what one scan does.
ROWID_RANGES_PER_SCAN = 8
ROWID_RANGE_SQL = "SELECT source_id, ts, host, entity, metric, value FROM metrics WHERE {ranges}"
ROWID_RANGE = "rowid BETWEEN ? AND ?"
ROWID_READ = f"""
CREATE OR REPLACE TEMP TABLE {{rows}} AS
SELECT m.ts, m.host, m.entity, m.metric, m.value FROM ({{ranges}}) m
SEMI JOIN {{hours}} h
     ON h.source_id = m.source_id AND h.host = m.host AND h.entity IS NOT DISTINCT FROM m.entity
    AND h.metric = m.metric AND h.bucket = time_bucket({BUCKET}, m.ts)
WHERE m.value IS NOT NULL
"""
# A file not written in series order (another tool's, a clone) spreads an hour's samples over many
# rows: past this many rows per sample, its row groups are cheaper read whole.
ROWID_MAX_SPREAD = 4
# (and every hour has its range: a store summarised before migration 018 has none)
ROWID_USABLE = """
SELECT count(*) FILTER (WHERE row_lo IS NULL) = 0 AND coalesce(sum(row_hi - row_lo + 1) <= $spread * sum(n), true)
FROM {hours}
"""
ROWID_CHECK = "SELECT (SELECT count(*) FROM {rows}) = (SELECT sum(n) FROM {hours})"
# Else the candidates' own samples in the windows: only the row groups of the files that hold them (a row
# group holds one or two files: the source list skips the host's other exporters' files as well).
RAW_SQL = """
INSERT INTO {scope} SELECT m.ts, m.host, m.entity, m.metric, m.value
FROM metrics m SEMI JOIN {cand} c
     ON c.host = m.host AND c.entity IS NOT DISTINCT FROM m.entity AND c.metric = m.metric
WHERE ({spans}) AND m.source_id IN ({sources}) AND m.host IN ({hosts}) AND m.metric IN ({metrics})
  AND m.value IS NOT NULL
"""


# The series layout (store/series.py): the candidates' samples by their series' ids (DuckDB pushes them into
# the scan), in the windows; the hull bounds the scan in time. signals/fleet_telemetry.py reads a fleet's alike.
SCOPE_BY_SERIES_SQL = f"""
INSERT INTO {{scope}} SELECT m.ts, m.host, m.entity, m.metric, m.value
FROM metrics m JOIN (SELECT d.series_id FROM {{cand}} c JOIN series d ON {SAME_SERIES.format(a="d", b="c")}) c
     ON c.series_id = m.series_id
WHERE ({{spans}}) AND m.ts BETWEEN ? AND ? AND m.value IS NOT NULL
"""


def summaries_cover(conn: duckdb.DuckDBPyConnection, lo: datetime, hi: datetime) -> bool:
    """True when the store has summaries and every source that may hold samples in [lo, hi] has one
    (and $SYNESTRA_SUMMARIES does not turn them off)."""
    if not settings.summaries() or not has_table(conn, "summarised_sources"):
        return False
    return bool(scalar(conn, UNSUMMARISED_SQL, [hi, lo]) == 0)


def scope_from_summaries(
    conn: duckdb.DuckDBPyConnection,
    samples: TempTable,
    rules: TempTable,
    ports: TempTable,
    windows: list[tuple[datetime, datetime]],
    hosts: list[str],
    switches: list[str],
    port_names: list[str],
    metrics: list[str],
    min_samples: int = MIN_ANOMALY_SAMPLES,
) -> int | None:
    """Fill `samples` with the candidates' samples in the (sorted, disjoint) windows, for anomaly windows
    of at least `min_samples` samples (discrete metrics: one), tested by `rules`; `ports`: the switch ports
    cabled to the job's hosts (signals/scope_samples.py loads both). Returns
    the series (hosts' metrics, after the host stage) observed in the windows, or None when the summaries
    cannot tell whether any sample falls inside them (the caller then reads raw)."""
    touches = " OR ".join(["(s.last_ts >= ? AND s.first_ts <= ?)"] * len(windows))
    seen = " OR ".join(["(s.first_ts BETWEEN ? AND ?) OR (s.last_ts BETWEEN ? AND ?)"] * len(windows))
    touch_args = [t for w in windows for t in w]
    seen_args = [t for w in windows for t in (*w, *w)]
    hull = [windows[0][0], windows[-1][1]]
    pairs = min_samples >= 2
    test_args = {"bitmask": CLOCK_EVENT_METRIC, "pairs": pairs}
    conn.execute(staged_sql(SUMM_DDL, summ=SUMM))
    passed = ""
    if has_table(conn, "host_summaries"):  # migration 021; a store opened read-only before it tests every host
        window_args = [*touch_args, *seen_args, *hull]
        staged = _host_stage(conn, rules, touches, seen, window_args, hosts + switches, metrics, test_args)
        if staged is None:
            return None
        observed, kept, metrics, host_cand = staged
        hosts, switches = [h for h in hosts if h in kept], [h for h in switches if h in kept]
        passed = f"SEMI JOIN {host_cand} hc ON hc.host = s.host AND hc.metric = s.metric"
    ranges = "s.row_lo, s.row_hi" if scalar(conn, HAS_ROW_RANGES_SQL) else "NULL, NULL"
    fill = {
        "touches": touches,
        "seen": seen,
        "ranges": ranges,
        "metrics": placeholders(len(metrics)),
        "hosts_passed": passed,
    }
    if hosts and metrics:
        conn.execute(
            staged_sql(SUMM_HOSTS_SQL, summ=SUMM).format(**fill, hosts=placeholders(len(hosts))),
            [*touch_args, *seen_args, *hull, min(hosts), max(hosts), *hosts, *metrics],
        )
    if switches and metrics:
        conn.execute(
            staged_sql(SUMM_PORTS_SQL, summ=SUMM, cabled=ports).format(
                **fill, hosts=placeholders(len(switches)), ports=placeholders(len(port_names))
            ),
            [*touch_args, *seen_args, *hull, min(switches), max(switches), *switches, *port_names, *metrics],
        )
    conn.execute(staged_sql(SERIES_SQL, summ=SUMM))
    if not passed:
        observed, touched = one_row(conn, "SELECT count(*) FILTER (seen), count(*) FROM _cand_series")
        if touched and not observed:
            return None
    conn.execute(staged_sql(CANDIDATES_SQL, rules=rules, cand=CAND), test_args)
    spans = " OR ".join(["m.ts BETWEEN ? AND ?"] * len(windows))
    if has_series_layout(conn):
        conn.execute(
            staged_sql(SCOPE_BY_SERIES_SQL, scope=samples, cand=CAND).format(spans=spans), [*touch_args, *hull]
        )
    elif not _read_by_rowid(conn, samples, SUMM, CAND, spans, touch_args):
        _read_by_source(conn, samples, SUMM, CAND, spans, touch_args)
    return int(observed)


def _host_stage(
    conn: duckdb.DuckDBPyConnection,
    rules: TempTable,
    touches: str,
    seen: str,
    window_args: list[datetime],
    hosts: list[str],
    metrics: list[str],
    test_args: dict[str, object],
) -> tuple[int, set[str], list[str], TempTable] | None:
    """The candidate test on each (host, metric) of host_summaries: the host-metrics observed in the
    windows, the hosts and the metrics that pass, and the table of those that pass (HOST_CAND); None when
    the summaries cannot tell whether any sample falls inside the windows."""
    marks = {"hosts": placeholders(len(hosts)), "metrics": placeholders(len(metrics))}
    conn.execute(HOST_SERIES_SQL.format(touches=touches, seen=seen, **marks), [*window_args, *hosts, *metrics])
    observed, touched = one_row(conn, HOST_OBSERVED_SQL)
    if touched and not observed:
        return None  # every touching hour straddles a window edge: whether a sample is inside is unknown
    conn.execute(staged_sql(HOST_CANDIDATES_SQL, rules=rules, host_cand=HOST_CAND), test_args)
    kept = {h for (h,) in conn.execute(f"SELECT DISTINCT host FROM {HOST_CAND}").fetchall()}
    passing = [m for (m,) in conn.execute(f"SELECT DISTINCT metric FROM {HOST_CAND} ORDER BY 1").fetchall()]
    return int(observed), kept, passing, HOST_CAND


def _read_by_rowid(
    conn: duckdb.DuckDBPyConnection,
    samples: TempTable,
    summ: TempTable,
    cand: TempTable,
    spans: str,
    span_args: list[datetime],
) -> bool:
    """The candidates' samples in the windows into `samples` from their hours' row ranges; False (nothing
    written) when read_hours_by_rowid cannot."""
    conn.execute(staged_sql(CAND_HOURS_SQL, hours=HOURS, summ=summ, cand=cand))
    if not read_hours_by_rowid(conn, HOURS.name, ROWS.name):
        return False
    conn.execute(f"INSERT INTO {samples} SELECT m.* FROM {ROWS} m WHERE {spans}", span_args)
    return True


def read_hours_by_rowid(conn: duckdb.DuckDBPyConnection, hours: str, rows: str) -> bool:
    """The samples of the candidate hours in table `hours` (CAND_HOURS) into table `rows`, by constant
    rowid ranges, ROWID_RANGES_PER_SCAN to a scan (the per-job read and the fleet's); False when `metrics`
    has no rowids (a lake's view), a range is missing, spread too thin, the ranges too many, or a range no
    longer holds all of its hour's samples (DuckDB may renumber rows)."""
    if not has_table(conn, "metrics"):  # a lake's metrics are a view over its parts: no rowids to read by
        return False
    if not scalar(conn, ROWID_USABLE.format(hours=hours), {"spread": ROWID_MAX_SPREAD}):
        return False
    ranges = conn.execute(ROWID_RANGES.format(hours=hours), {"gap": ROWID_MERGE_GAP}).fetchall()
    if len(ranges) > ROWID_MAX_RANGES:
        return False
    per = ROWID_RANGES_PER_SCAN
    scans = " UNION ALL ".join(
        ROWID_RANGE_SQL.format(ranges=" OR ".join([ROWID_RANGE] * len(ranges[i : i + per])))
        for i in range(0, len(ranges), per)
    ) or ROWID_RANGE_SQL.format(ranges="false")
    conn.execute(ROWID_READ.format(rows=rows, hours=hours, ranges=scans), [v for r in ranges for v in r])
    return bool(scalar(conn, ROWID_CHECK.format(rows=rows, hours=hours)))


def _read_by_source(
    conn: duckdb.DuckDBPyConnection,
    samples: TempTable,
    summ: TempTable,
    cand: TempTable,
    spans: str,
    span_args: list[datetime],
) -> None:
    held = conn.execute(staged_sql(CAND_SOURCES_SQL, summ=summ, cand=cand)).fetchall()
    sources = sorted({r[0] for r in held})
    hosts = sorted({r[1] for r in held})
    metrics = [r[0] for r in conn.execute(f"SELECT DISTINCT metric FROM {cand} ORDER BY 1").fetchall()]
    if sources:
        sql = staged_sql(RAW_SQL, scope=samples, cand=cand).format(
            spans=spans,
            sources=placeholders(len(sources)),
            hosts=placeholders(len(hosts)),
            metrics=placeholders(len(metrics)),
        )
        conn.execute(sql, [*span_args, *sources, *hosts, *metrics])
