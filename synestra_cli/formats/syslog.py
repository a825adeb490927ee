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

from collections.abc import Iterator

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats import kernel_events as kev
from synestra_cli.formats import syslog_envelope as env
from synestra_cli.formats import years
from synestra_cli.formats.base import Format, LoadContext, LoadResult, decode, read_head
from synestra_cli.formats.hosts import record_full_names_sql
from synestra_cli.store.sql import drop_temp, fetch_one, one_row

STAGE_CHUNK_ROWS = 122_880
CHUNK_BYTES = 64 * 1024 * 1024  # lines staged at a time (~600k syslog lines): bounded memory
CLOCK_BATCH_ROWS = 1 << 20  # the clock-order scan reads this many lines at a time: memory flat in file size

CREATE_STAGE_SQL = "CREATE OR REPLACE TEMP TABLE _syslog_stage (" + env.STAGE_COLUMNS + ")"
TEMP_TABLES = ("_syslog_stage", "_syslog_carry", "_syslog_hosts", "_syslog_loose")
# The host names every chunk saw (their full names are recorded once, for the whole file).
HOSTS_SEEN_SQL = """
CREATE TEMP TABLE IF NOT EXISTS _syslog_hosts (host VARCHAR);
INSERT INTO _syslog_hosts SELECT DISTINCT host FROM _syslog_stage WHERE host IS NOT NULL
"""
CREATE_CARRY_SQL = "CREATE TEMP TABLE IF NOT EXISTS _syslog_carry AS SELECT * FROM _syslog_stage LIMIT 0"
# The last message of a chunk may go on in the next one (continuation lines): it waits for it.
CARRY_SQL = """
INSERT INTO _syslog_carry SELECT * FROM _syslog_stage
WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok);
DELETE FROM _syslog_stage WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok)
"""

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
REJECT_COUNT_SQL = "SELECT count(*) FROM _syslog_loose WHERE what IN ('reject', 'orphan')"
REJECT_SAMPLE_SQL = """
SELECT lineno, CASE what WHEN 'reject' THEN $unmatched ELSE 'continuation line before any message' END, msg
FROM _syslog_loose WHERE what IN ('reject', 'orphan') ORDER BY lineno LIMIT 20
"""
DELETE_LOOSE_SQL = "DELETE FROM _syslog_stage WHERE NOT ok"

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
HOSTS_SQL = (
    "SELECT count(DISTINCT host) + coalesce(max(CASE WHEN host IS NULL THEN 1 ELSE 0 END), 0) FROM _syslog_stage"
)
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
        raise InputError(
            f"{ctx.display}: does not look like syslog or a kernel log (no known envelope fits "
            "most lines); see `synestra formats`"
        )
    _check_timezone(ctx)
    result = LoadResult()
    conn = ctx.conn
    conn.execute(env.MACROS_SQL)
    # The staging tables live in the file's transaction: a failure rolls them back with everything else.
    # A file is staged CHUNK_BYTES at a time (memory flat in its size), the message still open at the end
    # of a chunk carried into the next; clocks anchored on the file's last line (uptime) take it whole.
    clock = _ClockScan(envelope.time_kind == "noyear")
    fast = env.fast_fits(envelope, head)
    whole = envelope.time_kind in ("uptime", "relative", "none")
    for batches, last in _chunks(ctx.line_batches(), None if whole else CHUNK_BYTES):
        _start_chunk(conn)
        _stage(ctx, envelope, fast, batches)
        if not last:
            conn.execute(CARRY_SQL)
        _resolve_loose(conn, envelope, result)
        _insert_events(ctx, envelope, clock)
        conn.execute(HOSTS_SEEN_SQL)
    year_choice = _place_years(ctx, clock) if envelope.time_kind == "noyear" else None
    kinds = dict(conn.execute(KINDS_SQL, [ctx.source_id]).fetchall())
    result.rows = sum(kinds.values())
    for kind, sql, params in kev.POST_SQL:
        if kind in kinds:
            conn.execute(sql, {"sid": ctx.source_id, **params})
    if envelope.time_kind == "uptime":
        _note_reboots(conn, result)
    conn.execute(
        record_full_names_sql("(SELECT DISTINCT host FROM _syslog_hosts) AS h", "host"), {"sid": ctx.source_id}
    )
    drop_temp(conn, TEMP_TABLES)
    if envelope.time_kind in ("uptime", "relative", "none"):
        years.record(conn, ctx.source_id, "mtime", None)  # placed from the mtime: no evidence for another's year
        result.notes.append(_uptime_note(envelope))
    if year_choice is not None:
        result.notes += _year_note(ctx, year_choice)
    return result


def _chunks(batches: Iterator[pa.Table], chunk_bytes: int | None) -> Iterator[tuple[list[pa.Table], bool]]:
    """Groups of line batches of about chunk_bytes (None: one group), each with whether it is the last."""
    group: list[pa.Table] = []
    size = 0
    for batch in batches:
        if group and chunk_bytes is not None and size >= chunk_bytes:
            yield group, False
            group, size = [], 0
        group.append(batch)
        size += batch.nbytes
    yield group, True


def _start_chunk(conn: duckdb.DuckDBPyConnection) -> None:
    """A fresh stage holding the lines the previous chunk carried over (none for the first)."""
    conn.execute(CREATE_STAGE_SQL)
    conn.execute(CREATE_CARRY_SQL)
    conn.execute("INSERT INTO _syslog_stage SELECT * FROM _syslog_carry")
    conn.execute("DELETE FROM _syslog_carry")


YEARS_SQL = "SELECT min(year(ts)), max(year(ts)) FROM events WHERE source_id = ?"


def _year_note(ctx: LoadContext, choice: years.YearChoice) -> list[str]:
    """Say where the year came from (formats/years.py): a log copied later is re-dated by its mtime."""
    first, last = one_row(ctx.conn, YEARS_SQL, [ctx.source_id])
    if first is None:
        return []
    span = str(first) if first == last else f"{first}-{last}"
    advice = "if it was copied later" if choice.basis == "mtime" else "to override"
    return [
        f"no year in the time stamps: year taken from {choice.why}: {span}; "
        f"pass --year YEAR (the year the log starts in) {advice}"
    ]


def _check_timezone(ctx: LoadContext) -> None:
    try:
        fetch_one(ctx.conn, CHECK_TZ_SQL, [ctx.options.timezone])
    except duckdb.Error as exc:
        raise InputError(f"unknown time zone {ctx.options.timezone!r} (use an IANA name such as Europe/Paris)") from exc


def _stage(ctx: LoadContext, envelope: env.Envelope, fast: bool, batches: list[pa.Table]) -> None:
    sql = env.stage_sql(envelope, fast)
    regex_params = {"pattern": envelope.pattern, "time_kind": envelope.time_kind}
    params = {} if envelope is env.JOURNAL_JSON else {"fast": envelope.fast} if fast else regex_params
    for batch in batches:
        # Record batches of ~one row group let DuckDB's Arrow scan parse them on several threads.
        batch = pa.Table.from_batches(batch.to_batches(max_chunksize=STAGE_CHUNK_ROWS))
        # Read by DuckDB's replacement scan of this local, not conn.register: inside a transaction a
        # registered view keeps its Arrow batch alive until COMMIT: every batch of the file in memory.
        _syslog_batch = batch  # noqa: F841
        ctx.conn.execute(sql, params)
    if fast and one_row(ctx.conn, SLOW_COUNT_SQL)[0]:
        ctx.conn.execute(env.slow_sql(envelope), regex_params)


def _resolve_loose(conn: duckdb.DuckDBPyConnection, envelope: env.Envelope, result: LoadResult) -> None:
    (n,) = one_row(conn, LOOSE_SQL)
    if not n:
        return
    conn.execute(MARK_LOOSE_SQL, {"loose": envelope.loose})
    conn.execute(FOLD_SQL)
    conn.execute(MARKER_SQL)
    unmatched = f"does not match the {envelope.name} envelope of this file"
    result.rejects_from(conn, REJECT_SAMPLE_SQL, REJECT_COUNT_SQL, {"unmatched": unmatched})
    conn.execute(DELETE_LOOSE_SQL)


def _insert_events(ctx: LoadContext, envelope: env.Envelope, clock: _ClockScan) -> None:
    kind = envelope.time_kind
    available = {"tz": ctx.options.timezone, "mtime": ctx.mtime}
    in_order = False  # uptime-based clocks: always sorted (small dmesg files)
    if kind in ("noyear", "local", "utc"):
        in_order = _clock_order(ctx.conn, clock)
        if kind == "noyear":
            available.update(year=ctx.default_year, shift=0, wraps=clock.wraps)
    # Rows keep the stage's (line) order when it is already the (host, ts) order.
    sql = INSERT_SQL.format(timed=TIMED_SQL[kind], classify=kev.CLASSIFY_SQL, order="" if in_order else ORDER_BY)
    ctx.conn.execute(ZONED_MACRO_SQL)
    params = {name: available[name] for name in TIME_PARAMS[kind]}
    ctx.conn.execute(sql, {**params, **kev.PATTERNS, "host": ctx.options.host, "sid": ctx.source_id})


def _place_years(ctx: LoadContext, clock: _ClockScan) -> years.YearChoice | None:
    """--year is the year the file starts in (lines were placed from it). Else dated evidence in the file or
    the store decides (formats/years.py), and last the mtime: the last line falls in the mtime's year (or the
    one before, when its month is later than the mtime's). Lines were placed from the mtime's year."""
    if ctx.options.year:
        years.record(ctx.conn, ctx.source_id, "option", ctx.options.year)
        return None
    shift = len(clock.wraps) + (1 if clock.last_month and clock.last_month > ctx.mtime.month else 0)
    return years.place(ctx.conn, ctx.source_id, -shift, ctx.mtime, ctx.evidence)


def _clock_order(conn: duckdb.DuckDBPyConnection, clock: _ClockScan) -> bool:
    """Feed this chunk's clock to `clock` (the line numbers where the month goes down: a new year, for
    noyear files; the last line's month), and say whether the stage is stored in (host, ts) order: one
    host, lines stored in order, no time going back but at a new year. That is the norm for one node's
    log, and spares sorting the wide rows. Vectorised numpy over three narrow columns, streamed in
    batches (a window over lineno would sort them, ~0.1 s per 1M; the whole columns at once cost 24
    bytes a line: 1.4 GB at 60M lines)."""
    conn.complete()  # a relation streams only once the last execute() result is done
    before = clock.copy()
    clock.feed_all(conn.sql(CLOCK_SQL).to_arrow_reader(CLOCK_BATCH_ROWS))
    stored_in_order = clock.in_line_order
    if not stored_in_order:  # rare: rescan in line order (DuckDB sorts, spilling beyond its memory limit)
        clock.restore(before)
        clock.feed_all(conn.sql(CLOCK_SQL + " ORDER BY lineno").to_arrow_reader(CLOCK_BATCH_ROWS))
    (hosts,) = one_row(conn, HOSTS_SQL)
    return stored_in_order and not clock.back and hosts <= 1


class _ClockScan:
    """_clock_order's running state over batches: each batch is compared with the last line before it."""

    def __init__(self, noyear: bool) -> None:
        self.noyear = noyear
        self.prev: tuple[int, int, int] | None = None  # (lineno, us, month) of the last line seen
        self.in_line_order = True  # of the current chunk
        self.back = False  # of the current chunk
        self.wraps: list[int] = []
        self.last_month: int | None = None

    def copy(self) -> _ClockScan:
        other = _ClockScan(self.noyear)
        other.restore(self)
        return other

    def restore(self, other: _ClockScan) -> None:
        self.prev, self.wraps, self.last_month = other.prev, list(other.wraps), other.last_month
        self.in_line_order, self.back = True, False

    def feed_all(self, reader: pa.RecordBatchReader) -> None:
        self.in_line_order, self.back = True, False
        for batch in reader:
            self.feed(*(batch.column(name).to_numpy(zero_copy_only=False) for name in ("lineno", "us", "mon")))

    def feed(self, lineno: np.ndarray, us: np.ndarray, mon: np.ndarray) -> None:
        if not len(lineno):
            return
        if self.prev is not None:
            lineno, us, mon = (np.concatenate(([p], a)) for p, a in zip(self.prev, (lineno, us, mon), strict=True))
        self.in_line_order &= not np.any(np.diff(lineno) < 0)
        down = mon[1:] < mon[:-1]
        back = us[1:] < us[:-1]
        if self.noyear:
            back &= ~down
        self.back |= bool(back.any())
        self.wraps += lineno[1:][down].tolist()
        self.prev = (int(lineno[-1]), int(us[-1]), int(mon[-1]))
        self.last_month = int(mon[-1])


def _note_reboots(conn: duckdb.DuckDBPyConnection, result: LoadResult) -> None:
    (first_line, n) = one_row(conn, REBOOTS_SQL)
    if n:
        result.notes.append(
            f"uptime goes back {n} time(s) (a reboot; first at line {first_line}): lines before the "
            "last reboot are placed as if they belonged to the last boot, so their times are wrong"
        )


def _uptime_note(envelope: env.Envelope) -> str:
    if envelope.time_kind == "none":
        return "no timestamps in the file: every line placed at the file's modification time"
    return (
        "only seconds since boot in the file: times placed so that the last line falls at the file's "
        "modification time (assumes one boot, written just before the file was saved)"
    )


FORMAT = Format(
    "syslog",
    (
        "syslog/journal/kernel logs: RFC3164, RFC3339 (rsyslog), RFC5424, journalctl short/short-iso/json, "
        "dmesg (raw, -T, --time-format iso, relative, -t), /dev/kmsg, nv-fabricmanager"
    ),
    sniff,
    load,
    writes=frozenset({"events", "host_names"}),
    appendable=True,  # no file-level context: a grown file's new lines load on their own (ingest.py)
)
