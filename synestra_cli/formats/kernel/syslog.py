"""Syslog, journal and kernel-ring-buffer exports -> events (typed kernel events, every other line as `log`).

Pipeline per file, all in DuckDB: (1) each Arrow batch of lines is split by the file's envelope into a
staging table (RFC3164/RFC3339: the fast path, then one UPDATE with the full pattern for the lines it
leaves); (2) lines the envelope does not fit are folded into the message before them when they are
continuation lines (indented, or the fabric manager's unindented dumps), kept as their own line when
they are journal markers (``-- Boot ... --``), else rejected with their line number; (3) one INSERT
places every line on the UTC clock (year inference, --timezone, uptime anchoring), classifies it and
writes the file's events ordered by (host, ts): already the stage's order for one node's log, when
the wide sort is skipped.

Memory: the staging tables live on a scratch connection of their own (autocommit), not in the file's
transaction: inside one transaction DuckDB keeps every table it replaced or emptied until COMMIT, so a
60 M-line file kept its ~100 replaced stages (spilled to disk, their bookkeeping in memory). Only the
file's rows go through its transaction, streamed from the scratch connection as Arrow batches. The
state kept across chunks is a count per file (years passed) and the hosts seen, each host once.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError, raise_if_stopped
from synestra_cli.formats import years
from synestra_cli.formats.base import Format, IngestOptions, LoadContext, LoadResult, groups_by_text_size
from synestra_cli.formats.hosts import record_full_names_sql
from synestra_cli.formats.kernel import kernel_events as kev
from synestra_cli.formats.kernel import syslog_envelope as env
from synestra_cli.formats.kernel.syslog_clock import ClockScan, clock_order
from synestra_cli.formats.kernel.syslog_loose import resolve_loose
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.store.session import SESSION_SQL
from synestra_cli.store.sql import fetch_one, one_row

STAGE_CHUNK_ROWS = 122_880
CHUNK_BYTES = 64 * 1024 * 1024  # lines staged at a time (~600k syslog lines): bounded memory
FROM_MTIME = ("uptime", "relative", "none")  # envelopes' time kinds placed from the file's last line and mtime
EVENT_BATCH_ROWS = 122_880  # a chunk's events stream into the file's transaction this many rows at a time
# Files at most this big (on disk) are staged together, one statement per step for all of them: a
# statement costs ~1-60 ms to plan whatever its rows (the classifier ~60 ms), so a small file alone
# costs its statements, not its lines.
GROUP_FILE_BYTES = 4 << 20
GROUP_LINE_BYTES = 32 << 20  # of lines staged at once for a group of small files

CREATE_STAGE_SQL = "CREATE OR REPLACE TEMP TABLE _syslog_stage (" + env.STAGE_COLUMNS + ")"
# The host names the chunks saw, each once (their full names are recorded once, for the whole file).
HOSTS_SEEN_SQL = """
CREATE TEMP TABLE IF NOT EXISTS _syslog_hosts (sid BIGINT, host VARCHAR);
INSERT INTO _syslog_hosts
SELECT DISTINCT sid, host FROM _syslog_stage s
WHERE host IS NOT NULL AND NOT EXISTS (SELECT 1 FROM _syslog_hosts h WHERE h.sid = s.sid AND h.host = s.host)
"""
HOSTS_LIST_SQL = "SELECT sid, host FROM _syslog_hosts"
CREATE_CARRY_SQL = "CREATE TEMP TABLE IF NOT EXISTS _syslog_carry AS SELECT * FROM _syslog_stage LIMIT 0"
# The last message of a chunk may go on in the next one (continuation lines): it waits for it. (Only a
# file staged alone is cut in chunks.)
CARRY_SQL = """
INSERT INTO _syslog_carry SELECT * FROM _syslog_stage
WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok);
DELETE FROM _syslog_stage WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok)
"""
# Per staged file: the year its stamps are placed from, the new years before this chunk, its mtime.
FILES_SQL = """
CREATE OR REPLACE TEMP TABLE _syslog_files AS
SELECT unnest($sids) AS sid, unnest($years) AS year, unnest(CAST($wrapped AS BIGINT[])) AS wrapped,
       unnest(CAST($mtimes AS TIMESTAMP[])) AS mtime
"""
# This chunk's new years: the line where the month goes down, and the years passed from there on.
WRAPS_SQL = "CREATE OR REPLACE TEMP TABLE _syslog_wraps AS SELECT * FROM _syslog_wrap_rows"

KINDS_SQL = "SELECT source_id, kind, count(*) FROM events WHERE list_contains($sids, source_id) GROUP BY ALL"
SLOW_COUNT_SQL = "SELECT count(*) FROM _syslog_stage WHERE ok IS NULL"

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
REBOOTS_SQL = """
SELECT sid, min(lineno), count(*)
FROM (SELECT sid, lineno, up < lag(up) OVER (PARTITION BY sid ORDER BY lineno) AS back FROM _syslog_stage)
WHERE back GROUP BY sid
"""
CHECK_TZ_SQL = "SELECT to_utc(TIMESTAMP '2000-01-01', ?)"


def sniff(head: str) -> float:
    envelope, fit = env.detect(head)
    if envelope is None or fit < 0.5:
        return 0.0
    return round(0.9 * fit, 3) if envelope is not env.NOTIME else 0.3


def load(ctx: LoadContext) -> LoadResult:
    return load_group([ctx])[0]


def load_group(ctxs: list[LoadContext]) -> list[LoadResult]:
    """load() of several files in one transaction: the small files of one envelope are staged together
    and every step is one statement over all of them, each row keyed by its source (`sid`); a large file
    is staged alone, CHUNK_BYTES at a time. Raises InputError when a file is not syslog (then ingest
    loads the files one by one, and that one fails alone)."""
    files = [_File.open(ctx) for ctx in ctxs]
    conn = ctxs[0].conn
    _check_timezone(ctxs[0])
    runs: dict[tuple[str, bool], list[_File]] = {}
    for f in files:
        small = f.ctx.path.stat().st_size <= GROUP_FILE_BYTES
        key = (f.envelope.name, f.fast) if small else (f"{f.ctx.source_id}", f.fast)
        runs.setdefault(key, []).append(f)
    for run in runs.values():
        for group in groups_by_text_size(run, GROUP_LINE_BYTES):
            work = _scratch(conn)
            try:
                _load_run(conn, work, group)
            finally:
                work.close()  # its staging tables go with it
    return [f.result for f in files]


def _scratch(conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A connection of its own for the staging tables (same database, autocommit): what a chunk replaces
    is freed at once, where the file's transaction would keep it until COMMIT."""
    work = conn.cursor()
    for sql in (*SESSION_SQL, env.MACROS_SQL, ZONED_MACRO_SQL):
        work.execute(sql)
    return work


class _File:
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
    def open(cls, ctx: LoadContext) -> _File:
        head = decode(read_head(ctx.path))
        envelope, fit = env.detect(head)
        if envelope is None or fit < 0.5:
            raise InputError(
                f"{ctx.display}: does not look like syslog or a kernel log (no known envelope fits "
                "most lines); see `synestra formats`"
            )
        return cls(ctx, envelope, env.fast_fits(envelope, head))


def _load_run(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[_File]) -> None:
    """Stage (on `work`), parse and write (on `conn`, the file's transaction) the events of files of one
    envelope (a large file alone, in chunks)."""
    first = files[0]
    envelope, fast = first.envelope, first.fast
    # A file is staged CHUNK_BYTES at a time (memory flat in its size), the message still open at the end
    # of a chunk carried into the next; clocks anchored on the file's last line (uptime) take it whole;
    # small files are staged whole, together.
    whole = envelope.time_kind in FROM_MTIME or len(files) > 1
    for batches, last in _chunks(_line_batches(files), None if whole else CHUNK_BYTES):
        raise_if_stopped()  # a stop interrupts the worker's cursor, not this scratch one: check per chunk
        _start_chunk(work)
        _stage(work, envelope, fast, batches)
        batches.clear()  # staged: the lines are not kept (here or in _chunks) while the chunk is parsed
        if not last:
            work.execute(CARRY_SQL)
        resolve_loose(work, envelope, {f.sid: f.result for f in files})
        _insert_events(conn, work, files)
        work.execute(HOSTS_SEEN_SQL)
    _finish(conn, work, files)


def _line_batches(files: list[_File]) -> Iterator[pa.Table]:
    """The files' line batches, each row with its source (sid). (map keeps no reference to the batch
    it gave: the caller frees it.)"""
    for f in files:
        yield from map(functools.partial(_with_sid, f.sid), f.ctx.line_batches())


def _with_sid(sid: int, batch: pa.Table) -> pa.Table:
    return batch.append_column("sid", pa.array(np.full(batch.num_rows, sid, dtype=np.int64)))


def _finish(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[_File]) -> None:
    """What comes once the files' events are written: years, counts, neighbour-line completions, notes."""
    envelope = files[0].envelope
    by_sid = {f.sid: f for f in files}
    sids = list(by_sid)
    if envelope.time_kind == "noyear":
        _place_years(conn, files)
    kinds: dict[int, dict[str, int]] = {sid: {} for sid in sids}
    for sid, kind, n in conn.execute(KINDS_SQL, {"sids": sids}).fetchall():
        kinds[sid][kind] = n
    for f in files:
        f.result.rows = sum(kinds[f.sid].values())
    for kind, sql, params in kev.POST_SQL:
        having = [sid for sid in sids if kind in kinds[sid]]
        if having:
            conn.execute(sql, {"sids": having, **params})
    if envelope.time_kind == "uptime":
        _note_reboots(work, by_sid)
    _syslog_hosts_seen = work.sql(HOSTS_LIST_SQL).to_arrow_table()  # noqa: F841 - read by the replacement scan
    conn.execute(record_full_names_sql("_syslog_hosts_seen AS h", "host", sid="sid"))
    if envelope.time_kind in FROM_MTIME:
        # placed from the mtime: no evidence for another's year
        years.record_many(conn, [(sid, "mtime", None) for sid in sids])
        for f in files:
            f.result.notes.append(_uptime_note(envelope))
    noted = [f for f in files if f.year_choice is not None]
    if noted:
        spans = {sid: (lo, hi) for sid, lo, hi in conn.execute(YEARS_SQL, {"sids": [f.sid for f in noted]}).fetchall()}
        for f in noted:
            f.result.notes += _year_note(f, spans.get(f.sid))


def _chunks(batches: Iterator[pa.Table], chunk_bytes: int | None) -> Iterator[tuple[list[pa.Table], bool]]:
    """Groups of line batches of about chunk_bytes (None: one group), each with whether it is the last
    (which may be empty: it then stages only the message carried from the one before). No batch is read
    ahead, and none is referenced here once the caller clears its group: one chunk of lines in memory."""
    group: list[pa.Table] = []
    size = 0
    for batch in batches:
        group.append(batch)
        size += batch.nbytes
        del batch
        if chunk_bytes is not None and size >= chunk_bytes:
            yield group, False
            group, size = [], 0
    yield group, True


def _start_chunk(conn: duckdb.DuckDBPyConnection) -> None:
    """A fresh stage holding the lines the previous chunk carried over (none for the first)."""
    conn.execute(CREATE_STAGE_SQL)
    conn.execute(CREATE_CARRY_SQL)
    conn.execute("INSERT INTO _syslog_stage SELECT * FROM _syslog_carry")
    conn.execute("DELETE FROM _syslog_carry")


YEARS_SQL = (
    "SELECT source_id, min(year(ts)), max(year(ts)) FROM events WHERE list_contains($sids, source_id) GROUP BY ALL"
)


def _year_note(f: _File, span: tuple[int, int] | None) -> list[str]:
    """Say where the year came from (formats/years.py): a log copied later is re-dated by its mtime."""
    choice = f.year_choice
    if span is None or span[0] is None or choice is None:
        return []
    first, last = span
    years_text = str(first) if first == last else f"{first}-{last}"
    advice = "if it was copied later" if choice.basis == "mtime" else "to override"
    return [
        f"no year in the time stamps: year taken from {choice.why}: {years_text}; "
        f"pass --year YEAR (the year the log starts in) {advice}"
    ]


def _check_timezone(ctx: LoadContext) -> None:
    try:
        fetch_one(ctx.conn, CHECK_TZ_SQL, [ctx.options.timezone])
    except duckdb.Error as exc:
        raise InputError(f"unknown time zone {ctx.options.timezone!r} (use an IANA name such as Europe/Paris)") from exc


def _stage(conn: duckdb.DuckDBPyConnection, envelope: env.Envelope, fast: bool, batches: list[pa.Table]) -> None:
    sql = env.stage_sql(envelope, fast)
    regex_params = {"pattern": envelope.pattern, "time_kind": envelope.time_kind}
    params = {} if envelope is env.JOURNAL_JSON else {"fast": envelope.fast} if fast else regex_params
    if len(batches) > 1 and sum(b.num_rows for b in batches) <= STAGE_CHUNK_ROWS * 8:
        batches = [pa.concat_tables(batches)]  # small files: one statement for all of them
    for batch in batches:
        # Record batches of ~one row group let DuckDB's Arrow scan parse them on several threads.
        batch = pa.Table.from_batches(batch.to_batches(max_chunksize=STAGE_CHUNK_ROWS))
        # Read by DuckDB's replacement scan of this local, not conn.register: inside a transaction a
        # registered view keeps its Arrow batch alive until COMMIT: every batch of the file in memory.
        _syslog_batch = batch  # noqa: F841
        conn.execute(sql, params)
    if fast and one_row(conn, SLOW_COUNT_SQL)[0]:
        conn.execute(env.slow_sql(envelope), regex_params)


def _insert_events(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[_File]) -> None:
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


def _place_years(conn: duckdb.DuckDBPyConnection, files: list[_File]) -> None:
    """--year is the year the file starts in (lines were placed from it). Else dated evidence in the file or
    the store decides (formats/years.py), and last the mtime: the last line falls in the mtime's year (or the
    one before, when its month is later than the mtime's). Lines were placed from the mtime's year."""
    given = [f for f in files if f.ctx.options.year]
    years.record_many(conn, [(f.sid, "option", f.ctx.options.year) for f in given])
    placing = []
    for f in files:
        if f.ctx.options.year:
            continue
        clock, mtime = f.clock, f.ctx.mtime
        shift = clock.wrapped + (1 if clock.last_month and clock.last_month > mtime.month else 0)
        placing.append(years.Placing(f.sid, -shift, mtime))
    if placing:
        choices = years.place_many(conn, placing, files[0].ctx.evidence)
        for f in files:
            f.year_choice = choices.get(f.sid)


def _note_reboots(conn: duckdb.DuckDBPyConnection, by_sid: dict[int, _File]) -> None:
    for sid, first_line, n in conn.execute(REBOOTS_SQL).fetchall():
        by_sid[sid].result.notes.append(
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


_APPENDABLE: dict[bytes, bool] = {}  # by a hash of the lines detect reads: a followed log's head is asked again
_APPENDABLE_MAX = 4096


def appendable(path: Path) -> bool:
    """A log whose lines carry their wall-clock time grows by lines that load on their own. One placed
    from the file's last line and mtime (seconds since boot, deltas, no time) moves every line when it
    grows: it is read again whole."""
    head = read_head(path)
    cut = -1
    for _ in range(env.DETECT_LINES):  # the lines detect reads: once written, they do not change
        cut = head.find(b"\n", cut + 1)
        if cut < 0:
            break
    key = hashlib.blake2b(head if cut < 0 else head[: cut + 1], digest_size=16).digest()
    if key not in _APPENDABLE:
        if len(_APPENDABLE) >= _APPENDABLE_MAX:
            _APPENDABLE.clear()
        envelope, _ = env.detect(decode(head))
        _APPENDABLE[key] = envelope is not None and envelope.time_kind not in FROM_MTIME
    return _APPENDABLE[key]


def yearless(head: str, options: IngestOptions) -> bool:
    """Stamps without a year and no --year: the year may come from other files (formats/years.py)."""
    envelope, _ = env.detect(head)
    return not options.year and envelope is not None and envelope.time_kind == "noyear"


FORMAT = Format(
    "syslog",
    (
        "syslog/journal/kernel logs: RFC3164, RFC3339 (rsyslog), RFC5424, journalctl short/short-iso/json, "
        "dmesg (raw, -T, --time-format iso, relative, -t), /dev/kmsg, nv-fabricmanager"
    ),
    sniff,
    load,
    writes=frozenset({"events", "host_names"}),
    load_group=load_group,
    appendable=appendable,
    top=0.9,
    leans_on_others=yearless,
    priority=120,
)
