"""The telemetry of many jobs read at once: each host's rows once for all the jobs, each job's baselines
in one query (a fleet's cold tax-report).

One job at a time, explain reads its telemetry in about fifteen statements (signals/anomalies.py
`build_scope` and `anomalies`): its hourly summaries, its candidates' raw samples, their rates, their
baselines and windows. A campus's jobs follow one another on the same hosts, so 192 jobs read the same
hosts' row groups again and again (a row group holds a host's whole day: the time window prunes
nothing). Here the same steps run once for every job, with the job as the first key of every
partition, grouping and join:

1. each job's candidates from the store's summaries (signals/fleet_candidates.py): its hosts and
   switches tested on their host summaries, then the series of those that pass, as
   signals/candidates.py tests one job's;
2. the raw samples of every job's candidates inside its own read windows (`_fscope`), the clocks-event
   bits decoded: by rowid from their hours' row ranges, as signals/candidates.py reads one job's (the
   same SQL text), when that probes fewer rows than the candidates' files hold; else in one scan of
   those files;
3. every job's rates (`_fsig`) and anomaly windows against each series' healthiest read window of that
   job, in one statement: the per-job ANOMALIES_SQL with `job` added.

Each statement is the per-job one with the job added, so each job gets exactly the rows it would get
alone (tests/test_explain_batch.py compares the explanations byte for byte). A job whose telemetry
the summaries cannot settle (a source not summarised, every touching hour straddling a window's edge)
is left out, and explain reads it alone, raw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from synestra_cli import progress, settings
from synestra_cli.signals.anomalies import Anomaly, Comparable, anomaly_of
from synestra_cli.signals.baselines import (
    BAD_SAMPLE_SQL,
    BASE_SQL,
    HEALTHIEST_SQL,
    MIN_BASELINE_SAMPLES,
    ONSET_SQL,
    PER_WINDOW_SQL,
    POOLED_SQL,
    limits_sql,
    pre_onset_sql,
)
from synestra_cli.signals.candidates import CAND_HOURS, read_hours_by_rowid
from synestra_cli.signals.events import Event
from synestra_cli.signals.fleet_candidates import clock_bits, fleet_candidates
from synestra_cli.signals.fleet_events import EVENT_TABLES, EventRead, fleet_events
from synestra_cli.signals.scope import JobScope
from synestra_cli.signals.thresholds import (
    CLOCK_EVENT_METRIC,
    DISCRETE_METRICS,
    METRIC_RULES,
    MIN_ANOMALY_SAMPLES,
)
from synestra_cli.store.series import has_series_layout
from synestra_cli.store.sql import has_table, insert_rows, placeholders, scalar

Window = tuple[datetime, datetime]

RULES_DDL = """
CREATE OR REPLACE TEMP TABLE _frules (metric VARCHAR, kind VARCHAR, direction VARCHAR, floor DOUBLE,
    ratio DOUBLE, delta DOUBLE, layer VARCHAR, category VARCHAR, weight DOUBLE, discrete BOOLEAN)
"""
# Per job: its hull (first window's start to last window's end); its windows; its hosts (every entity)
# and the switch ports cabled to them.
JOBS_DDL = """
CREATE OR REPLACE TEMP TABLE _fjobs AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($lo::TIMESTAMP[]) AS lo, unnest($hi::TIMESTAMP[]) AS hi
"""
WINDOWS_DDL = """
CREATE OR REPLACE TEMP TABLE _fwin AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($w::BIGINT[]) AS w, unnest($lo::TIMESTAMP[]) AS lo,
       unnest($hi::TIMESTAMP[]) AS hi
"""
# Each job's windows as a list on its row (_SUMM tests a summary row against them without a join).
WINDOW_LISTS_SQL = """
CREATE OR REPLACE TEMP TABLE _fjobs AS
SELECT j.*, (SELECT list({'lo': w.lo, 'hi': w.hi} ORDER BY w.w) FROM _fwin w WHERE w.job = j.job) AS wins
FROM _fjobs j
"""
HOSTS_DDL = """
CREATE OR REPLACE TEMP TABLE _fhosts AS SELECT unnest($jobs::VARCHAR[]) AS job, unnest($hosts::VARCHAR[]) AS host
"""
PORTS_DDL = """
CREATE OR REPLACE TEMP TABLE _fports AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($hosts::VARCHAR[]) AS host, unnest($entities::VARCHAR[]) AS entity
"""
UNSUMMARISED_SQL = """
SELECT s.first_ts, s.last_ts FROM sources s ANTI JOIN summarised_sources u USING (source_id)
"""

# The candidates' samples inside their own job's windows (disjoint: a sample joins one window at most).
# First by rowid, as signals/candidates.py reads one job's: the candidates' hours that touch their job's
# windows, each read once however many jobs share it, checked to hold all of their samples. Else (a
# range missing or stale) in one scan of the candidates' files for all the jobs (CAND_SOURCES_SQL: the
# files whose summaries hold a candidate's hours), sources, hosts and metrics as bound lists, not
# subqueries: a list lets DuckDB skip the row groups of other files by their min/max.
CAND_HOURS_SQL = CAND_HOURS.format(
    hours="_fcand_hours", distinct="DISTINCT ", summ="_fsumm", cand="_fcand", job="c.job = s.job AND "
)
# The read by rowid scans ranges of rows, a few to a scan (signals/candidates.py read_hours_by_rowid, at most
# ROWID_MAX_RANGES of them); the read by file scans the candidates' files. A fleet's candidates lie all
# over the table (every job's hosts), so the read by rowid is also taken only when its ranges span fewer
# rows than those files hold (times ROWID_MAX_SPAN). The campus's 192 jobs: 18,228 candidates, 5.3 M
# samples over 1,552 of the table's 1,750 row groups; one `rowid IN (subquery)` read of them probed all
# 215 M rows (15 CPU s, against 13 CPU s for their files' 179 M rows).
ROWID_MAX_SPAN = 1.0
ROWID_SPAN_SQL = """
SELECT coalesce(max(row_hi) - min(row_lo) + 1
                <= $span * (SELECT sum(rows) FROM sources WHERE source_id IN (SELECT source_id FROM _fcand_hours)),
                true)
FROM _fcand_hours
"""
CAND_SOURCES_SQL = """
SELECT DISTINCT s.source_id, s.host FROM _fsumm s
SEMI JOIN _fcand c
     ON c.job = s.job AND c.host = s.host AND c.entity IS NOT DISTINCT FROM s.entity AND c.metric = s.metric
ORDER BY ALL
"""
_SCOPE = """
CREATE OR REPLACE TEMP TABLE _fscope AS
SELECT c.sid, m.ts, m.value, w.w AS win
FROM {samples} m
JOIN _fcand c ON c.host = m.host AND c.entity IS NOT DISTINCT FROM m.entity AND c.metric = m.metric
JOIN _fwin w ON w.job = c.job AND m.ts BETWEEN w.lo AND w.hi
"""
SCOPE_ROWS_SQL = _SCOPE.format(samples="_fcand_rows")
# The series layout (store/series.py): the candidates' own series by their ids, each sample joined to its job's
# windows. DuckDB pushes the candidates' ids into the scan (a filter by hash), which skips the row groups and
# rows of every other series; the jobs' hull bounds the scan in time. No summary's row range is needed.
SCOPE_SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE _fscope AS
SELECT c.sid, m.ts, m.value, w.w AS win
FROM metrics m
JOIN _fcand c ON c.series_id = m.series_id
JOIN _fwin w ON w.job = c.job AND m.ts BETWEEN w.lo AND w.hi
WHERE m.ts BETWEEN $lo AND $hi AND m.value IS NOT NULL
"""
SCOPE_SQL = _SCOPE.format(samples="metrics") + (
    "WHERE m.source_id IN ({sources}) AND m.host IN ({hosts}) AND m.metric IN ({metrics})"
    " AND m.ts BETWEEN ? AND ?\n  AND m.value IS NOT NULL\n"
)
# When those files are most of the table, one scan of it all, the join picking the rows: three long IN
# lists cost more per row than they save (the campus: 179 M of 215 M rows, 3.2 -> 1.9 s).
SCOPE_ALL_SQL = _SCOPE.format(samples="metrics") + (
    "WHERE m.ts BETWEEN ? AND ? AND m.metric IN (SELECT metric FROM _fcand) AND m.value IS NOT NULL\n"
)
LISTS_MAX_SHARE = 0.5
# The candidates' files' rows against all the rows of the files that overlap the jobs' hull.
LISTS_PAY_SQL = """
SELECT coalesce(sum(rows) FILTER (WHERE source_id IN (SELECT unnest($sources::INTEGER[]))), 0)
       <= $share * coalesce(sum(rows), 0)
FROM sources WHERE last_ts >= $lo AND first_ts <= $hi
"""
EMPTY_SCOPE_SQL = "CREATE OR REPLACE TEMP TABLE _fscope (sid BIGINT, ts TIMESTAMP, value DOUBLE, win BIGINT)"
# signals/anomalies.py CLOCK_BITS_SQL, per job.
CLOCK_BITS_SQL = """
INSERT INTO _fscope
SELECT s.sid + d.k, s.ts, CASE WHEN s.b & d.bit <> 0 AND s.b & d.unless = 0 THEN 1.0 ELSE 0.0 END, s.win
FROM (SELECT sid, ts, TRY_CAST(round(value) AS BIGINT) AS b, win FROM _fscope
      WHERE sid IN (SELECT sid FROM _fcand WHERE metric = ?)) s
CROSS JOIN (VALUES {values}) d(k, metric, bit, unless)
WHERE s.b IS NOT NULL AND s.b >= 0 AND s.sid + d.k IN (SELECT sid FROM _fseries)
"""
# signals/counters.py _RATES and signals/anomalies.py SIGNAL_SQL, per series; with each sample's number
# in its series (`rn`, for ANOMALIES_SQL's runs), taken in this sort rather than a second one of the
# flagged series' samples (1.9 -> 1.0 s on the campus's 10.9 M).
SIGNAL_SQL = """
CREATE OR REPLACE TEMP TABLE _fsig AS
SELECT s.sid, s.ts, s.prev_ts, CASE WHEN r.kind = 'counter' THEN s.rate ELSE s.value END AS x, s.win, s.rn,
       (i.hi IS NULL OR s.ts > i.hi) AS ok
FROM (
    SELECT sid, ts, value, prev_ts, win, rn,
           CASE WHEN prev IS NULL OR ts = prev_ts THEN NULL
                WHEN value < prev THEN value ELSE value - prev END / (epoch(ts) - epoch(prev_ts)) AS rate
    FROM (
        SELECT sid, ts, value, win, lag(value) OVER w AS prev, lag(ts) OVER w AS prev_ts, row_number() OVER w AS rn
        -- a sample read twice is one (signals/counters.py SCOPE_RATES_SQL); value breaks a tie in time
        FROM (SELECT DISTINCT sid, ts, value, win FROM _fscope) WHERE isfinite(value)
        WINDOW w AS (PARTITION BY sid ORDER BY ts, value)
    )
) s JOIN _fseries f USING (sid) JOIN _frules r ON r.metric = f.metric
ASOF LEFT JOIN _fidle i ON i.job = f.job AND s.ts >= i.lo
"""
# Each job's idle spans (signals/anomalies.py COMPARABLE_SQL), sorted and disjoint per job.
SPANS_DDL = """
CREATE OR REPLACE TEMP TABLE _fidle AS
SELECT unnest($jobs::VARCHAR[]) AS job, unnest($lo::TIMESTAMP[]) AS lo, unnest($hi::TIMESTAMP[]) AS hi
"""
# signals/anomalies.py ANOMALIES_SQL, per series: its baseline from the healthiest of its own job's
# read windows (`win`: the window each sample was read in, so no second join to the windows). The
# samples go through the window functions and the grouping with their numbers only, the series' names
# and rule joined to each run afterwards (the same rows, 5.4 -> 2.6 CPU s on the campus's 5x10^6).
ANOMALIES_SQL = f"""
WITH pooled AS (
    SELECT sid, {POOLED_SQL}
    FROM _fsig WHERE x IS NOT NULL GROUP BY sid
), per_window AS (
    SELECT sid, win AS w, {PER_WINDOW_SQL}
    FROM _fsig WHERE x IS NOT NULL AND ok GROUP BY sid, win HAVING count(*) >= ?
), healthiest AS (
    SELECT sid, {HEALTHIEST_SQL} FROM per_window GROUP BY sid
), base AS (
    SELECT p.sid, p.hi, p.lo, {BASE_SQL}
    FROM pooled p LEFT JOIN healthiest h USING (sid)
), cand0 AS (
    SELECT sid, f.job, f.host, f.entity, hi, lo, r.*, CASE WHEN r.direction = 'up' THEN q[1] ELSE q[2] END AS b,
           CASE WHEN r.direction = 'up' THEN p1 ELSE p2 END AS prov
    FROM base JOIN _fseries f USING (sid) JOIN _frules r ON r.metric = f.metric
), limits0 AS (
    SELECT *, {limits_sql("cand0")}
), {pre_onset_sql("_fsig", ("sid",))}, flagged AS (
    SELECT s.sid, s.ts, s.prev_ts, s.x,
           {BAD_SAMPLE_SQL}, s.rn, s.win
    FROM _fsig s JOIN limits l USING (sid)
), islands AS (
    SELECT *, rn - row_number() OVER (PARTITION BY sid ORDER BY rn) AS island
    FROM flagged WHERE bad
), pieces AS (
    SELECT *, count(*) OVER (PARTITION BY sid, island, win) AS piece FROM islands
), runs AS (
    SELECT sid, min(ts) AS first_bad, max(ts) AS last, median(x) AS after, max(x) AS x_hi, min(x) AS x_lo,
           count(*) AS n, max(piece) AS in_a_row, arg_min(prev_ts, ts) AS prev0, arg_min(x, ts) AS x0,
           list(x ORDER BY ts)[2:] AS rest
    FROM pieces GROUP BY sid, island
), windows AS (
    SELECT r.*, l.job, l.host, l.entity, l.metric, l.layer, l.category, l.weight, l.b, l.kind, l.threshold,
           l.discrete, l.prov, CASE WHEN l.direction = 'up' THEN r.x_hi ELSE r.x_lo END AS peak
    FROM runs r JOIN limits l USING (sid)
)
SELECT job, host, entity, metric, layer, category, weight,
       {ONSET_SQL},
       last, b AS before, after, peak, n, kind, coalesce(prev0, first_bad) AS last_normal, threshold, first_bad,
       prov.f, prov.t, prov.n
FROM windows
WHERE in_a_row >= ? OR discrete
ORDER BY job, onset, host, entity, metric, first_bad  -- the order of signals/anomalies.py, a total one
"""
# Dropped after the read: a big fleet's samples are not left to the threads that explain each job.
TEMP_TABLES: tuple[str, ...] = ("_frules", "_fjobs", "_fwin", "_fidle")
TEMP_TABLES += ("_fhosts", "_fports", "_fjob_hosts", "_fhost_series")
TEMP_TABLES += ("_fhost_cand", "_fsumm", "_fcand_series")
TEMP_TABLES += ("_fcand", "_fseries", "_fcand_hours", "_fcand_rows", "_fscope", "_fsig", *EVENT_TABLES)


@dataclass(frozen=True)
class JobRead:
    """What explain reads of one job's telemetry: its scope in its read windows, its events."""

    scope: JobScope
    windows: list[Window]  # sorted, disjoint
    event_read: EventRead  # hosts (and switches), from, to
    comparable: Comparable | None = None  # when its samples may make a baseline (None: all of them)


@dataclass(frozen=True)
class JobTelemetry:
    """One job's share of the fleet's telemetry (signals/anomalies.py, signals/events.py)."""

    windows: list[Window] | None  # the read windows it was read for (None: not read, read it alone)
    observed: bool  # some series of the job's hosts has samples inside the windows
    anomalies: list[Anomaly]  # in onset order
    event_read: EventRead  # explain uses the events only for this same read
    events: list[Event]


def _summarised(conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]) -> list[str]:
    """The jobs every source of whose hours has its summary (signals/candidates.py summaries_cover)."""
    if not settings.summaries() or not has_table(conn, "summarised_sources"):
        return []
    missing = conn.execute(UNSUMMARISED_SQL).fetchall()

    def covered(windows: list[Window]) -> bool:
        lo, hi = windows[0][0], windows[-1][1]
        # as UNSUMMARISED_SQL counts them: no first time, or a range overlapping the job's (NULL: no overlap)
        return not any(f is None or (last is not None and last >= lo and f <= hi) for f, last in missing)

    return [j for j, r in reads.items() if covered(r.windows)]


def _load(conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]) -> None:
    """The jobs, their windows, hosts and switch ports into the temp tables the statements read."""
    conn.execute(RULES_DDL)
    insert_rows(conn, "_frules", [(*r, r.metric in DISCRETE_METRICS) for r in METRIC_RULES])
    jobs = list(reads)
    wins = [(j, i, lo, hi) for j in jobs for i, (lo, hi) in enumerate(reads[j].windows)]
    hosts = [(j, h) for j in jobs for h in reads[j].scope.hosts]
    ports = []
    for j in jobs:
        scope = reads[j].scope
        cabled = {(lk.switch, lk.switch_port) for lk in scope.links if lk.switch and lk.switch_port}
        ports += [(j, sw, port) for sw, port in sorted(cabled) if sw not in set(scope.hosts)]
    conn.execute(
        JOBS_DDL,
        {
            "jobs": jobs,
            "lo": [reads[j].windows[0][0] for j in jobs],
            "hi": [reads[j].windows[-1][1] for j in jobs],
        },
    )
    conn.execute(WINDOWS_DDL, {k: [w[i] for w in wins] for i, k in enumerate(("jobs", "w", "lo", "hi"))})
    conn.execute(WINDOW_LISTS_SQL)
    idle = [(j, lo, hi) for j in jobs for lo, hi in (reads[j].comparable or Comparable()).idle]
    conn.execute(SPANS_DDL, {k: [x[i] for x in idle] for i, k in enumerate(("jobs", "lo", "hi"))})
    conn.execute(HOSTS_DDL, {"jobs": [h[0] for h in hosts], "hosts": [h[1] for h in hosts]})
    conn.execute(
        PORTS_DDL, {"jobs": [p[0] for p in ports], "hosts": [p[1] for p in ports], "entities": [p[2] for p in ports]}
    )


def _anomalies(
    conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]
) -> dict[str, tuple[list[Window], bool, list[Anomaly]]]:
    """Each job's anomalies as `build_scope` then `anomalies` find them for that job alone; the jobs
    the summaries cannot settle are left out."""
    reads = {j: reads[j] for j in _summarised(conn, reads)}
    if not reads:
        return {}
    _load(conn, reads)
    by_series = has_series_layout(conn)
    counts = fleet_candidates(conn, by_series)
    values, bits = clock_bits()
    if by_series:
        hull = [min(r.windows[0][0] for r in reads.values()), max(r.windows[-1][1] for r in reads.values())]
        conn.execute(SCOPE_SERIES_SQL, {"lo": hull[0], "hi": hull[1]})
    elif not _read_by_rowid(conn):
        _read_by_source(conn, reads)
    conn.execute(CLOCK_BITS_SQL.format(values=values), [CLOCK_EVENT_METRIC, *bits])
    conn.execute(SIGNAL_SQL)
    found: dict[str, list[Anomaly]] = {j: [] for j in reads}
    for j, *row in conn.execute(ANOMALIES_SQL, [MIN_BASELINE_SAMPLES, MIN_ANOMALY_SAMPLES]).fetchall():
        found[j].append(anomaly_of(tuple(row)))
    out = {}
    for j, r in reads.items():
        seen, touched = counts.get(j, (0, 0))
        if not touched or seen:  # else every touching hour straddles a window edge: read alone, raw
            out[j] = (r.windows, seen > 0, found[j])
    return out


def _read_by_rowid(conn: duckdb.DuckDBPyConnection) -> bool:
    """The candidates' samples in their jobs' windows into `_fscope` from their hours' row ranges (as
    signals/candidates.py `_read_by_rowid`); False (nothing written) when the candidates lie too far
    apart, or a range is missing, spread too thin, or no longer holds all of its hour's samples."""
    conn.execute(CAND_HOURS_SQL)
    if not scalar(conn, ROWID_SPAN_SQL, {"span": ROWID_MAX_SPAN}):
        return False
    if not read_hours_by_rowid(conn, "_fcand_hours", "_fcand_rows"):
        return False
    conn.execute(SCOPE_ROWS_SQL)
    return True


def scan_whole_table(conn: duckdb.DuckDBPyConnection, sources: list[int], hull: list[datetime]) -> bool:
    """Whether the candidates' files hold more than LISTS_MAX_SHARE of the rows in the jobs' hull."""
    pay = {"sources": sources, "share": LISTS_MAX_SHARE, "lo": hull[0], "hi": hull[1]}
    return not scalar(conn, LISTS_PAY_SQL, pay)


def _read_by_source(conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]) -> None:
    """The candidates' samples in their jobs' windows into `_fscope`, from the row groups of their files,
    or from the whole table when their files are most of it."""
    held = conn.execute(CAND_SOURCES_SQL).fetchall()
    sources = sorted({r[0] for r in held})
    hull = [min(r.windows[0][0] for r in reads.values()), max(r.windows[-1][1] for r in reads.values())]
    if sources and scan_whole_table(conn, sources, hull):
        conn.execute(SCOPE_ALL_SQL, hull)
    elif sources:  # the lists the scan prunes row groups by
        hosts = sorted({r[1] for r in held})
        names = [r[0] for r in conn.execute("SELECT DISTINCT metric FROM _fcand ORDER BY 1").fetchall()]
        marks = {"sources": placeholders(len(sources)), "hosts": placeholders(len(hosts))}
        sql = SCOPE_SQL.format(**marks, metrics=placeholders(len(names)))
        conn.execute(sql, [*sources, *hosts, *names, *hull])
    else:
        conn.execute(EMPTY_SCOPE_SQL)


def fleet_telemetry(conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]) -> dict[str, JobTelemetry]:
    """Each job's telemetry in its read windows and its events, as explain reads them for that job
    alone, for all the jobs in a dozen statements. Jobs without read windows are left out; a job whose
    anomalies the summaries cannot settle gets its events only (explain reads its telemetry alone)."""
    reads = {j: r for j, r in reads.items() if r.windows}
    if not reads:
        return {}
    steps: list[Callable[[], Any]] = [
        lambda: _anomalies(conn, reads),
        lambda: fleet_events(conn, {j: r.event_read for j, r in reads.items()}),
    ]
    try:  # the first step is most of a cold report: a bar with its elapsed time on a terminal (cli/progress.py)
        found, events = progress.track("reading the jobs' telemetry", (step() for step in steps), len(steps))
    finally:
        for t in TEMP_TABLES:
            conn.execute(f"DROP TABLE IF EXISTS temp.{t}")
    out = {}
    for j, r in reads.items():
        windows, observed, anomalies = found.get(j, (None, False, []))
        out[j] = JobTelemetry(windows, observed, anomalies, r.event_read, events[j])
    return out
