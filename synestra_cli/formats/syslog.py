"""Syslog, journal and kernel-ring-buffer exports -> events (typed kernel events, every other line as `log`).

Pipeline per file, all in DuckDB: (1) each Arrow batch of lines is split by the file's envelope into a
staging table (RFC3164/RFC3339: the fast path, then one UPDATE with the full pattern for the lines it
leaves); (2) lines the envelope does not fit are folded into the message before them when they are
continuation lines (indented, or the fabric manager's unindented dumps), kept as their own line when
they are journal markers (``-- Boot ... --``), else rejected with their line number; (3) one INSERT
places every line on the UTC clock (year inference, --timezone, uptime anchoring), classifies it and
writes the file's events ordered by (host, ts): already the stage's order for one node's log, when
the wide sort is skipped.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats import kernel_events as kev
from synestra_cli.formats import syslog_envelope as env
from synestra_cli.formats.base import LoadContext, LoadResult, decode, read_head
from synestra_cli.formats.hosts import record_full_names_sql

NAME = "syslog"
DESCRIPTION = ("syslog/journal/kernel logs: RFC3164, RFC3339 (rsyslog), RFC5424, journalctl short/short-iso/json, "
               "dmesg (raw, -T, --time-format iso, relative, -t), /dev/kmsg, nv-fabricmanager")

STAGE_CHUNK_ROWS = 122_880

CREATE_STAGE_SQL = "CREATE OR REPLACE TEMP TABLE _syslog_stage (" + env.STAGE_COLUMNS + ")"
DROP_STAGE_SQL = "DROP TABLE IF EXISTS _syslog_stage"

KINDS_SQL = "SELECT kind, count(*) FROM events WHERE source_id = ? GROUP BY kind"
SLOW_COUNT_SQL = "SELECT count(*) FROM _syslog_stage WHERE ok IS NULL"

# Lines the envelope does not fit: continuation (folded into the message before), marker, or reject.
LOOSE_SQL = """
SELECT count(*) FROM _syslog_stage WHERE NOT ok
"""
MARK_LOOSE_SQL = """
CREATE OR REPLACE TEMP TABLE _syslog_loose AS
SELECT c.lineno, c.msg, h.lineno AS head,
    CASE WHEN starts_with(c.msg, '-- ') AND ends_with(rtrim(c.msg), '--') THEN 'marker'
         WHEN h.lineno IS NULL THEN 'orphan'
         WHEN $loose OR regexp_matches(c.msg, '^\\s') THEN 'continuation'
         ELSE 'reject' END AS what
FROM (SELECT lineno, msg FROM _syslog_stage WHERE NOT ok) c
ASOF LEFT JOIN (SELECT lineno FROM _syslog_stage WHERE ok) h ON c.lineno > h.lineno
"""
FOLD_SQL = """
UPDATE _syslog_stage s SET msg = s.msg || chr(10) || f.txt
FROM (SELECT head, string_agg(msg, chr(10) ORDER BY lineno) AS txt FROM _syslog_loose
      WHERE what = 'continuation' GROUP BY head) f
WHERE s.lineno = f.head
"""
# A journal marker takes the time and host of the message that follows it (at the end: the one before).
MARKER_SQL = """
UPDATE _syslog_stage s SET ok = true, ts = n.ts, up = n.up, host = n.host
FROM (SELECT c.lineno, coalesce(nx.ts, pv.ts) AS ts, coalesce(nx.up, pv.up) AS up,
             CASE WHEN nx.nl IS NULL THEN pv.host ELSE nx.host END AS host
      FROM (SELECT lineno FROM _syslog_loose WHERE what = 'marker') c
      ASOF LEFT JOIN (SELECT lineno AS nl, ts, up, host FROM _syslog_stage WHERE ok) nx ON c.lineno <= nx.nl
      ASOF LEFT JOIN (SELECT lineno AS pl, ts, up, host FROM _syslog_stage WHERE ok) pv ON c.lineno >= pv.pl) n
WHERE s.lineno = n.lineno
"""
REJECT_COUNT_SQL = "SELECT what, count(*) FROM _syslog_loose WHERE what IN ('reject', 'orphan') GROUP BY what"
REJECT_SAMPLE_SQL = """
SELECT lineno, what, msg FROM _syslog_loose WHERE what IN ('reject', 'orphan') ORDER BY lineno LIMIT 20
"""
DELETE_LOOSE_SQL = "DELETE FROM _syslog_stage WHERE NOT ok"
DROP_LOOSE_SQL = "DROP TABLE IF EXISTS _syslog_loose"

# The UTC time of each staged message, per envelope time kind (see syslog_envelope).
# zoned: to_utc, skipped for UTC (the default), where it is the identity but costs a zone lookup per line.
ZONED_MACRO_SQL = "CREATE OR REPLACE TEMP MACRO zoned(ts, tz) AS CASE WHEN tz = 'UTC' THEN ts ELSE to_utc(ts, tz) END"
TIMED_SQL = {
    # $wraps: line numbers where the month goes down (a new year); WRAPS_SQL finds them on two narrow columns.
    "noyear": """
timed AS NOT MATERIALIZED (
    SELECT * REPLACE (zoned(ts + to_years(CAST($year - 2000 - $shift + CASE WHEN len($wraps) = 0 THEN 0
                                               ELSE len(list_filter($wraps, lambda w: w <= lineno)) END
                                               AS INTEGER)), $tz) AS ts)
    FROM _syslog_stage)""",
    "local": "timed AS NOT MATERIALIZED (SELECT * REPLACE (zoned(ts, $tz) AS ts) FROM _syslog_stage)",
    "utc": "timed AS NOT MATERIALIZED (SELECT * FROM _syslog_stage)",
    "uptime": """
timed AS NOT MATERIALIZED (
    SELECT * REPLACE ($mtime - to_microseconds(CAST(round(
        ((SELECT arg_max(up, lineno) FROM _syslog_stage) - up) * 1e6) AS BIGINT)) AS ts)
    FROM _syslog_stage)""",
    "relative": """
c AS (SELECT * REPLACE (sum(up) OVER (ORDER BY lineno) AS up) FROM _syslog_stage),
timed AS NOT MATERIALIZED (
    SELECT * REPLACE ($mtime - to_microseconds(CAST(round(((SELECT max(up) FROM c) - up) * 1e6) AS BIGINT)) AS ts)
    FROM c)""",
    "none": "timed AS NOT MATERIALIZED (SELECT * REPLACE ($mtime AS ts) FROM _syslog_stage)",
}
TIME_PARAMS = {
    "noyear": ("year", "shift", "wraps", "tz"),
    "local": ("tz",),
    "utc": (),
    "uptime": ("mtime",),
    "relative": ("mtime",),
    "none": ("mtime",),
}
INSERT_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
WITH {timed}, classified AS ({classify})
SELECT ts, host, component, kind, code, severity, message, fields, $sid, lineno
FROM classified {order}
"""
ORDER_BY = "ORDER BY host, ts, lineno"
# The stage's clock in storage order, as numpy arrays (see _clock_order), and its number of hosts.
CLOCK_SQL = "SELECT lineno, coalesce(epoch_us(ts), 0) AS us, coalesce(month(ts), 0) AS mon FROM _syslog_stage"
HOSTS_SQL = ("SELECT count(DISTINCT host) + coalesce(max(CASE WHEN host IS NULL THEN 1 ELSE 0 END), 0) "
             "FROM _syslog_stage")
REBOOTS_SQL = """
SELECT min(lineno), count(*) FROM (SELECT lineno, up < lag(up) OVER (ORDER BY lineno) AS back FROM _syslog_stage)
WHERE back
"""
CHECK_TZ_SQL = "SELECT to_utc(TIMESTAMP '2000-01-01', ?)"


def sniff(head: str) -> float:
    envelope, fit = env.detect(head)
    if envelope is None or fit < 0.5:
        return 0.0
    return round(0.9 * fit, 3) if envelope is not env.NOTIME else 0.3


def load(ctx: LoadContext) -> LoadResult:
    head = decode(read_head(ctx.path))
    envelope, fit = env.detect(head)
    if envelope is None or fit < 0.5:
        raise InputError(f"{ctx.display}: does not look like syslog or a kernel log (no known envelope fits "
                         "most lines); see `synestra formats`")
    _check_timezone(ctx)
    result = LoadResult()
    conn = ctx.conn
    # The staging tables live in the file's transaction: a failure rolls them back with everything else.
    conn.execute(CREATE_STAGE_SQL)
    _stage(ctx, envelope, env.fast_fits(envelope, head))
    _resolve_loose(conn, envelope, result)
    _insert_events(ctx, envelope)
    kinds = dict(conn.execute(KINDS_SQL, [ctx.source_id]).fetchall())
    result.rows = sum(kinds.values())
    for kind, sql, params in kev.POST_SQL:
        if kind in kinds:
            conn.execute(sql, {"sid": ctx.source_id, **params})
    if envelope.time_kind == "uptime":
        _note_reboots(conn, result)
    conn.execute(record_full_names_sql("_syslog_stage", "host"), {"sid": ctx.source_id})
    conn.execute(DROP_STAGE_SQL)
    conn.execute(DROP_LOOSE_SQL)
    if envelope.time_kind in ("uptime", "relative", "none"):
        result.notes.append(_uptime_note(envelope))
    if envelope.time_kind == "noyear" and not ctx.options.year:
        result.notes += _year_note(ctx)
    return result


YEARS_SQL = "SELECT min(year(ts)), max(year(ts)) FROM events WHERE source_id = ?"


def _year_note(ctx: LoadContext) -> list[str]:
    """Say that the year came from the file's mtime: a log copied later is re-dated without it."""
    first, last = _one(ctx.conn, YEARS_SQL, [ctx.source_id])
    if first is None:
        return []
    years = str(first) if first == last else f"{first}-{last}"
    return [f"no year in the time stamps: year taken from the file's modification time "
            f"({ctx.mtime:%Y-%m-%d}): {years}; pass --year YEAR (the year the log starts in) if it was copied later"]


def _one(conn: duckdb.DuckDBPyConnection, sql: str, params: list | dict | None = None) -> tuple:
    """The single row of an aggregate query."""
    row = conn.execute(sql, params or []).fetchone()
    assert row is not None  # an aggregate without GROUP BY always returns one row
    return row


def _check_timezone(ctx: LoadContext) -> None:
    try:
        ctx.conn.execute(CHECK_TZ_SQL, [ctx.options.timezone]).fetchone()
    except duckdb.Error as exc:
        raise InputError(f"unknown time zone {ctx.options.timezone!r} (use an IANA name such as Europe/Paris)") \
            from exc


def _stage(ctx: LoadContext, envelope: env.Envelope, fast: bool) -> None:
    sql = env.stage_sql(envelope, fast)
    regex_params = {"pattern": envelope.pattern, "time_kind": envelope.time_kind}
    params = {} if envelope is env.JOURNAL_JSON else {"fast": envelope.fast} if fast else regex_params
    for batch in ctx.line_batches():
        # Record batches of ~one row group let DuckDB's Arrow scan parse them on several threads.
        batch = pa.Table.from_batches(batch.to_batches(max_chunksize=STAGE_CHUNK_ROWS))
        ctx.conn.register("_syslog_batch", batch)
        try:
            ctx.conn.execute(sql, params)
        finally:
            ctx.conn.unregister("_syslog_batch")
    if fast and _one(ctx.conn, SLOW_COUNT_SQL)[0]:
        ctx.conn.execute(env.slow_sql(envelope), regex_params)


def _resolve_loose(conn: duckdb.DuckDBPyConnection, envelope: env.Envelope, result: LoadResult) -> None:
    (n,) = _one(conn, LOOSE_SQL)
    if not n:
        return
    conn.execute(MARK_LOOSE_SQL, {"loose": envelope.loose})
    conn.execute(FOLD_SQL)
    conn.execute(MARKER_SQL)
    reasons = {
        "reject": f"does not match the {envelope.name} envelope of this file",
        "orphan": "continuation line before any message",
    }
    for lineno, what, text in conn.execute(REJECT_SAMPLE_SQL).fetchall():
        result.reject(lineno, reasons[what], text)
    counted = sum(c for _, c in conn.execute(REJECT_COUNT_SQL).fetchall())
    result.rejected += counted - len(result.reject_samples)
    conn.execute(DELETE_LOOSE_SQL)


def _insert_events(ctx: LoadContext, envelope: env.Envelope) -> None:
    kind = envelope.time_kind
    available = {"tz": ctx.options.timezone, "mtime": ctx.mtime}
    in_order = False  # uptime-based clocks: always sorted (small dmesg files)
    if kind in ("noyear", "local", "utc"):
        wraps, last_month, in_order = _clock_order(ctx.conn, kind == "noyear")
        if kind == "noyear":
            available.update(_year_params(ctx, wraps, last_month))
    # Rows keep the stage's (line) order when it is already the (host, ts) order.
    sql = INSERT_SQL.format(timed=TIMED_SQL[kind], classify=kev.CLASSIFY_SQL, order="" if in_order else ORDER_BY)
    ctx.conn.execute(ZONED_MACRO_SQL)
    params = {name: available[name] for name in TIME_PARAMS[kind]}
    ctx.conn.execute(sql, {**params, **kev.PATTERNS, "host": ctx.options.host, "sid": ctx.source_id})


def _clock_order(conn: duckdb.DuckDBPyConnection, noyear: bool) -> tuple[list[int], int | None, bool]:
    """The line numbers where the month goes down (a new year, for noyear files), the last line's month,
    and whether the stage is stored in (host, ts) order: one host, lines stored in order, no time going
    back but at a new year. That is the norm for one node's log, and spares sorting the wide rows.
    Vectorised numpy over three narrow columns: a window over lineno would sort them (~0.1 s per 1M)."""
    cols = conn.execute(CLOCK_SQL).fetchnumpy()
    lineno, us, mon = (np.asarray(cols[name]) for name in ("lineno", "us", "mon"))
    stored_in_order = not np.any(np.diff(lineno) < 0)
    if not stored_in_order:
        by_line = np.argsort(lineno, kind="stable")
        lineno, us, mon = lineno[by_line], us[by_line], mon[by_line]
    down = mon[1:] < mon[:-1]
    back = us[1:] < us[:-1]
    if noyear:
        back &= ~down
    (hosts,) = _one(conn, HOSTS_SQL)
    last_month = int(mon[-1]) if len(mon) else None
    return lineno[1:][down].tolist(), last_month, stored_in_order and not back.any() and hosts <= 1


def _year_params(ctx: LoadContext, wraps: list[int], last_month: int | None) -> dict:
    """--year is the year the file starts in; else its last line falls in the mtime's year (or the one before)."""
    if ctx.options.year:
        return {"year": ctx.options.year, "shift": 0, "wraps": wraps}
    shift = len(wraps) + (1 if last_month and last_month > ctx.mtime.month else 0)
    return {"year": ctx.mtime.year, "shift": shift, "wraps": wraps}


def _note_reboots(conn: duckdb.DuckDBPyConnection, result: LoadResult) -> None:
    (first_line, n) = _one(conn, REBOOTS_SQL)
    if n:
        result.notes.append(f"uptime goes back {n} time(s) (a reboot; first at line {first_line}): lines before the "
                            "last reboot are placed as if they belonged to the last boot, so their times are wrong")


def _uptime_note(envelope: env.Envelope) -> str:
    if envelope.time_kind == "none":
        return "no timestamps in the file: every line placed at the file's modification time"
    return ("only seconds since boot in the file: times placed so that the last line falls at the file's "
            "modification time (assumes one boot, written just before the file was saved)")
