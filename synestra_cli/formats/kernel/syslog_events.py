"""A chunk of staged syslog lines placed on the UTC clock, classified and written as events.

syslog.py stages each chunk's lines (on a scratch connection); here one statement per chunk gives every
line its UTC time by the envelope's time kind (the year of yearless stamps, --timezone, seconds since
boot anchored on the file's mtime), classifies it (kernel_events.py) and streams the events into the
file's transaction.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats import years
from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.formats.kernel import kernel_events as kev
from synestra_cli.formats.kernel import syslog_envelope as env
from synestra_cli.formats.kernel.syslog_clock import ClockScan, clock_order
from synestra_cli.formats.reading import decode, read_head

FROM_MTIME = ("uptime", "relative", "none")  # envelopes' time kinds placed from the file's last line and mtime
EVENT_BATCH_ROWS = 122_880  # a chunk's events stream into the file's transaction this many rows at a time

# Per staged file: the year its stamps are placed from, the new years before this chunk, its mtime.
FILES_SQL = """
CREATE OR REPLACE TEMP TABLE _syslog_files AS
SELECT unnest($sids) AS sid, unnest($years) AS year, unnest(CAST($wrapped AS BIGINT[])) AS wrapped,
       unnest(CAST($mtimes AS TIMESTAMP[])) AS mtime
"""
# This chunk's new years: the line where the month goes down, and the years passed from there on.
WRAPS_SQL = "CREATE OR REPLACE TEMP TABLE _syslog_wraps AS SELECT * FROM _syslog_wrap_rows"

# The UTC time of each staged message, per envelope time kind (see syslog_envelope); per-file values
# (year, new years before the chunk, mtime) from _syslog_files.
# zoned: to_utc, skipped for UTC (the default), where it is the identity but costs a zone lookup per line.
ZONED_MACRO_SQL = "CREATE OR REPLACE TEMP MACRO zoned(ts, tz) AS CASE WHEN tz = 'UTC' THEN ts ELSE to_utc(ts, tz) END"
TIMED_SQL = {
    # The years passed: those before the chunk (wrapped), else from the last new year at or before the
    # line (_syslog_wraps: where the month goes down; syslog_clock.py finds them on two narrow columns).
    "noyear": """
timed AS NOT MATERIALIZED (
    SELECT s.* REPLACE (zoned(s.ts + to_years(CAST(f.year - 2000 + f.wrapped AS INTEGER)), $tz) AS ts)
    FROM _syslog_stage s JOIN _syslog_files f ON f.sid = s.sid)""",
    "noyear_wraps": """
timed AS NOT MATERIALIZED (
    SELECT s.* REPLACE (zoned(s.ts + to_years(CAST(f.year - 2000 + coalesce(w.k, f.wrapped) AS INTEGER)), $tz) AS ts)
    FROM _syslog_stage s JOIN _syslog_files f ON f.sid = s.sid
    ASOF LEFT JOIN _syslog_wraps w ON w.sid = s.sid AND s.lineno >= w.lineno)""",
    "local": "timed AS NOT MATERIALIZED (SELECT * REPLACE (zoned(ts, $tz) AS ts) FROM _syslog_stage)",
    "utc": "timed AS NOT MATERIALIZED (SELECT * FROM _syslog_stage)",
    "uptime": """
timed AS NOT MATERIALIZED (
    SELECT s.* REPLACE (f.mtime - to_microseconds(CAST(round((l.last_up - s.up) * 1e6) AS BIGINT)) AS ts)
    FROM _syslog_stage s JOIN _syslog_files f ON f.sid = s.sid
    JOIN (SELECT sid, arg_max(up, lineno) AS last_up FROM _syslog_stage GROUP BY sid) l ON l.sid = s.sid)""",
    "relative": """
c AS (SELECT * REPLACE (sum(up) OVER (PARTITION BY sid ORDER BY lineno) AS up) FROM _syslog_stage),
timed AS NOT MATERIALIZED (
    SELECT c.* REPLACE (f.mtime - to_microseconds(CAST(round((l.top - c.up) * 1e6) AS BIGINT)) AS ts)
    FROM c JOIN _syslog_files f ON f.sid = c.sid
    JOIN (SELECT sid, max(up) AS top FROM c GROUP BY sid) l ON l.sid = c.sid)""",
    "none": """
timed AS NOT MATERIALIZED (
    SELECT s.* REPLACE (f.mtime AS ts) FROM _syslog_stage s JOIN _syslog_files f ON f.sid = s.sid)""",
}
TIME_PARAMS = {"noyear": ("tz",), "local": ("tz",), "utc": (), "uptime": (), "relative": (), "none": ()}
# A chunk's events, read on the scratch connection; inserted by the file's (EVENTS_INSERT_SQL).
EVENTS_SQL = """
WITH {timed}, classified AS ({classify})
SELECT ts, host, component, kind, code, severity, message, fields, sid, lineno
FROM classified {order}
"""
EVENTS_INSERT_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
SELECT * FROM _syslog_events
"""
ORDER_BY = "ORDER BY sid, host, ts, lineno"


class SyslogFile:
    """One file of a group: its context, envelope, clock scan and result."""

    def __init__(self, ctx: LoadContext, envelope: env.Envelope, fast: bool) -> None:
        self.ctx, self.envelope, self.fast = ctx, envelope, fast
        self.sid = ctx.source_id
        self.clock = ClockScan(envelope.time_kind == "noyear")
        self.result = LoadResult()
        self.year_choice: years.YearChoice | None = None
        # the options this file's parser reads (ingest keys the source on them): the zone, the host,
        # the year of yearless stamps
        self.tz, self.host = ctx.options.timezone, ctx.fallback_host
        self.year = ctx.default_year if envelope.time_kind == "noyear" else None

    @classmethod
    def open(cls, ctx: LoadContext) -> SyslogFile:
        head = decode(read_head(ctx.path))
        envelope, fit = env.detect(head)
        if envelope is None or fit < 0.5:
            raise InputError(
                f"{ctx.display}: does not look like syslog or a kernel log (no known envelope fits "
                "most lines); see `synestra formats`"
            )
        return cls(ctx, envelope, env.fast_fits(envelope, head))


def insert_events(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[SyslogFile]) -> None:
    """The chunk's events, computed on `work` from its stage, streamed into the file's transaction."""
    first = files[0]
    kind = first.envelope.time_kind
    in_order = False  # uptime-based clocks: always sorted (small dmesg files)
    if kind in ("noyear", "local", "utc"):
        in_order = clock_order(work, {f.sid: f.clock for f in files})
    timed = TIMED_SQL[kind]
    if kind != "local" and kind != "utc":
        wraps = [f.clock.take_wraps() for f in files]
        work.execute(
            FILES_SQL,
            {
                "sids": [f.sid for f in files],
                "years": [f.year for f in files],
                "wrapped": [before for before, _ in wraps],
                "mtimes": [f.ctx.mtime for f in files],
            },
        )
        if any(len(found) for _, found in wraps):  # a new year in this chunk (rare): its lines looked up
            _write_wraps(work, [f.sid for f in files], wraps)
            timed, in_order = TIMED_SQL["noyear_wraps"], False  # (the as-of join does not keep the order)
    # Rows keep the stage's (line) order when it is already the (host, ts) order.
    sql = EVENTS_SQL.format(timed=timed, classify=kev.CLASSIFY_SQL, order="" if in_order else ORDER_BY)
    params = {name: {"tz": first.tz}[name] for name in TIME_PARAMS[kind]}
    work.complete()
    _syslog_events = work.sql(sql, params={**params, **kev.PATTERNS, "host": first.host}).to_arrow_reader(  # noqa: F841
        EVENT_BATCH_ROWS
    )
    conn.execute(EVENTS_INSERT_SQL)


def _write_wraps(work: duckdb.DuckDBPyConnection, sids: list[int], wraps: list[tuple[int, np.ndarray]]) -> None:
    """_syslog_wraps: per file, each line of this chunk where the month goes down and the years passed
    from there on (those before the chunk included)."""
    counts = [len(found) for _, found in wraps]
    _syslog_wrap_rows = pa.table(  # noqa: F841 - read by the replacement scan
        {
            "sid": np.repeat(np.asarray(sids, dtype=np.int64), counts),
            "lineno": np.concatenate([found for _, found in wraps]).astype(np.int64),
            "k": np.concatenate([before + np.arange(1, len(found) + 1) for before, found in wraps]).astype(np.int64),
        }
    )
    work.execute(WRAPS_SQL)
