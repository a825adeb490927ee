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

The steps pass their temp tables as handles (signals/staging.py): signals/fleet_tables.py loads what is
asked (FleetTables), signals/fleet_candidates.py returns the candidates (FleetCandidates), the read here
the candidates' samples (SCOPE), signals/fleet_anomalies.py judges them.

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
from synestra_cli.signals import fleet_candidates as fc
from synestra_cli.signals import fleet_tables as ftab
from synestra_cli.signals.anomalies import Anomaly
from synestra_cli.signals.candidates import CAND_HOURS, read_hours_by_rowid
from synestra_cli.signals.events import Event
from synestra_cli.signals.fleet_anomalies import SIG, decode_clock_bits, fleet_anomalies
from synestra_cli.signals.fleet_candidates import FleetCandidates, fleet_candidates
from synestra_cli.signals.fleet_events import EVENT_TABLES, EventRead, fleet_events
from synestra_cli.signals.fleet_tables import FleetTables, JobRead, Window, load_tables
from synestra_cli.signals.staging import TempTable, staged_sql
from synestra_cli.store.series import has_series_layout
from synestra_cli.store.sql import has_table, placeholders, scalar

# The candidates' samples in their jobs' windows, and the hours and rows they are read from by rowid.
SCOPE = TempTable("_fscope", ("sid", "ts", "value", "win"))
HOURS = TempTable("_fcand_hours", ("source_id", "host", "entity", "metric", "bucket", "n", "row_lo", "row_hi"))
ROWS = TempTable("_fcand_rows", ("ts", "host", "entity", "metric", "value"))

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
    hours="{hours}", distinct="DISTINCT ", summ="{summ}", cand="{cand}", job="c.job = s.job AND "
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
                <= $span * (SELECT sum(rows) FROM sources WHERE source_id IN (SELECT source_id FROM {hours})),
                true)
FROM {hours}
"""
CAND_SOURCES_SQL = """
SELECT DISTINCT s.source_id, s.host FROM {summ} s
SEMI JOIN {cand} c
     ON c.job = s.job AND c.host = s.host AND c.entity IS NOT DISTINCT FROM s.entity AND c.metric = s.metric
ORDER BY ALL
"""
_SCOPE = """
CREATE OR REPLACE TEMP TABLE {scope} AS
SELECT c.sid, m.ts, m.value, w.w AS win
FROM {samples} m
JOIN {cand} c ON c.host = m.host AND c.entity IS NOT DISTINCT FROM m.entity AND c.metric = m.metric
JOIN {windows} w ON w.job = c.job AND m.ts BETWEEN w.lo AND w.hi
"""
SCOPE_ROWS_SQL = _SCOPE.replace("{samples}", "{rows}")
# The series layout (store/series.py): the candidates' own series by their ids, each sample joined to its job's
# windows. DuckDB pushes the candidates' ids into the scan (a filter by hash), which skips the row groups and
# rows of every other series; the jobs' hull bounds the scan in time. No summary's row range is needed.
SCOPE_SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE {scope} AS
SELECT c.sid, m.ts, m.value, w.w AS win
FROM metrics m
JOIN {cand} c ON c.series_id = m.series_id
JOIN {windows} w ON w.job = c.job AND m.ts BETWEEN w.lo AND w.hi
WHERE m.ts BETWEEN $lo AND $hi AND m.value IS NOT NULL
"""
SCOPE_SQL = _SCOPE.replace("{samples}", "metrics") + (
    "WHERE m.source_id IN ({sources}) AND m.host IN ({hosts}) AND m.metric IN ({metrics})"
    " AND m.ts BETWEEN ? AND ?\n  AND m.value IS NOT NULL\n"
)
# When those files are most of the table, one scan of it all, the join picking the rows: three long IN
# lists cost more per row than they save (the campus: 179 M of 215 M rows, 3.2 -> 1.9 s).
SCOPE_ALL_SQL = _SCOPE.replace("{samples}", "metrics") + (
    "WHERE m.ts BETWEEN ? AND ? AND m.metric IN (SELECT metric FROM {cand}) AND m.value IS NOT NULL\n"
)
LISTS_MAX_SHARE = 0.5
# The candidates' files' rows against all the rows of the files that overlap the jobs' hull.
LISTS_PAY_SQL = """
SELECT coalesce(sum(rows) FILTER (WHERE source_id IN (SELECT unnest($sources::INTEGER[]))), 0)
       <= $share * coalesce(sum(rows), 0)
FROM sources WHERE last_ts >= $lo AND first_ts <= $hi
"""
EMPTY_SCOPE_SQL = "CREATE OR REPLACE TEMP TABLE {scope} (sid BIGINT, ts TIMESTAMP, value DOUBLE, win BIGINT)"
# Dropped after the read: a big fleet's samples are not left to the threads that explain each job.
TEMP_TABLES: tuple[str, ...] = tuple(t.name for t in (ftab.RULES, ftab.JOBS, ftab.WINDOWS, ftab.IDLE, ftab.HOSTS))
TEMP_TABLES += tuple(t.name for t in (ftab.PORTS, fc.SUMM, fc.CAND, fc.SERIES_IDS, HOURS, ROWS, SCOPE, SIG))
TEMP_TABLES += (*fc.INTERNAL, *EVENT_TABLES)


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


def _anomalies(
    conn: duckdb.DuckDBPyConnection, reads: dict[str, JobRead]
) -> dict[str, tuple[list[Window], bool, list[Anomaly]]]:
    """Each job's anomalies as `stage_scope` then `anomalies` find them for that job alone; the jobs
    the summaries cannot settle are left out."""
    reads = {j: reads[j] for j in _summarised(conn, reads)}
    if not reads:
        return {}
    tables = load_tables(conn, reads)
    by_series = has_series_layout(conn)
    cand = fleet_candidates(conn, tables, by_series)
    hull = [min(r.windows[0][0] for r in reads.values()), max(r.windows[-1][1] for r in reads.values())]
    if by_series:
        sql = staged_sql(SCOPE_SERIES_SQL, scope=SCOPE, cand=cand.cand, windows=tables.windows)
        conn.execute(sql, {"lo": hull[0], "hi": hull[1]})
        samples = SCOPE
    else:
        samples = _read_by_rowid(conn, tables, cand) or _read_by_source(conn, tables, cand, hull)
    decode_clock_bits(conn, samples, cand)
    found = fleet_anomalies(conn, tables, cand, samples)
    out = {}
    for j, r in reads.items():
        seen, touched = cand.counts.get(j, (0, 0))
        if not touched or seen:  # else every touching hour straddles a window edge: read alone, raw
            out[j] = (r.windows, seen > 0, found.get(j, []))
    return out


def _read_by_rowid(conn: duckdb.DuckDBPyConnection, tables: FleetTables, cand: FleetCandidates) -> TempTable | None:
    """The candidates' samples in their jobs' windows into SCOPE from their hours' row ranges (as
    signals/candidates.py `_read_by_rowid`); None (nothing written) when the candidates lie too far
    apart, or a range is missing, spread too thin, or no longer holds all of its hour's samples."""
    conn.execute(staged_sql(CAND_HOURS_SQL, hours=HOURS, summ=cand.summ, cand=cand.cand))
    if not scalar(conn, staged_sql(ROWID_SPAN_SQL, hours=HOURS), {"span": ROWID_MAX_SPAN}):
        return None
    if not read_hours_by_rowid(conn, HOURS.name, ROWS.name):
        return None
    conn.execute(staged_sql(SCOPE_ROWS_SQL, scope=SCOPE, rows=ROWS, cand=cand.cand, windows=tables.windows))
    return SCOPE


def scan_whole_table(conn: duckdb.DuckDBPyConnection, sources: list[int], hull: list[datetime]) -> bool:
    """Whether the candidates' files hold more than LISTS_MAX_SHARE of the rows in the jobs' hull."""
    pay = {"sources": sources, "share": LISTS_MAX_SHARE, "lo": hull[0], "hi": hull[1]}
    return not scalar(conn, LISTS_PAY_SQL, pay)


def _read_by_source(
    conn: duckdb.DuckDBPyConnection, tables: FleetTables, cand: FleetCandidates, hull: list[datetime]
) -> TempTable:
    """The candidates' samples in their jobs' windows into SCOPE, from the row groups of their files,
    or from the whole table when their files are most of it."""
    held = conn.execute(staged_sql(CAND_SOURCES_SQL, summ=cand.summ, cand=cand.cand)).fetchall()
    sources = sorted({r[0] for r in held})
    staged = {"scope": SCOPE, "cand": cand.cand, "windows": tables.windows}
    if sources and scan_whole_table(conn, sources, hull):
        conn.execute(staged_sql(SCOPE_ALL_SQL, **staged), hull)
    elif sources:  # the lists the scan prunes row groups by
        hosts = sorted({r[1] for r in held})
        names = [r[0] for r in conn.execute(f"SELECT DISTINCT metric FROM {cand.cand} ORDER BY 1").fetchall()]
        marks = {"sources": placeholders(len(sources)), "hosts": placeholders(len(hosts))}
        sql = staged_sql(SCOPE_SQL, **staged).format(**marks, metrics=placeholders(len(names)))
        conn.execute(sql, [*sources, *hosts, *names, *hull])
    else:
        conn.execute(staged_sql(EMPTY_SCOPE_SQL, scope=SCOPE))
    return SCOPE


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
