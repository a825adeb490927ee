"""Syslog, journal and kernel-ring-buffer exports -> events (typed kernel events, every other line as `log`).

Pipeline per file, all in DuckDB: (1) each Arrow batch of lines is split by the file's envelope into a
staging table (RFC3164/RFC3339: the fast path, then one UPDATE with the full pattern for the lines it
leaves); (2) lines the envelope does not fit are folded into the message before them when they are
continuation lines (indented, or the fabric manager's unindented dumps), kept as their own line when
they are journal markers (``-- Boot ... --``), else rejected with their line number; (3) one INSERT
places every line on the UTC clock (year inference, --timezone, uptime anchoring), classifies it and
writes the file's events ordered by (host, ts): already the stage's order for one node's log, when
the wide sort is skipped (syslog_events.py); (4) the year of yearless stamps, counts and notes
(syslog_finish.py).

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
from synestra_cli.formats.base import Format, IngestOptions, LoadContext, LoadResult, groups_by_text_size
from synestra_cli.formats.kernel import syslog_envelope as env
from synestra_cli.formats.kernel.syslog_events import FROM_MTIME, ZONED_MACRO_SQL, SyslogFile, insert_events
from synestra_cli.formats.kernel.syslog_finish import finish
from synestra_cli.formats.kernel.syslog_loose import resolve_loose
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.store.session import SESSION_SQL
from synestra_cli.store.sql import fetch_one, one_row

STAGE_CHUNK_ROWS = 122_880
CHUNK_BYTES = 64 * 1024 * 1024  # lines staged at a time (~600k syslog lines): bounded memory
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
CREATE_CARRY_SQL = "CREATE TEMP TABLE IF NOT EXISTS _syslog_carry AS SELECT * FROM _syslog_stage LIMIT 0"
# The last message of a chunk may go on in the next one (continuation lines): it waits for it. (Only a
# file staged alone is cut in chunks.)
CARRY_SQL = """
INSERT INTO _syslog_carry SELECT * FROM _syslog_stage
WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok);
DELETE FROM _syslog_stage WHERE lineno >= (SELECT max(lineno) FROM _syslog_stage WHERE ok)
"""
SLOW_COUNT_SQL = "SELECT count(*) FROM _syslog_stage WHERE ok IS NULL"

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
    files = [SyslogFile.open(ctx) for ctx in ctxs]
    conn = ctxs[0].conn
    _check_timezone(ctxs[0])
    runs: dict[tuple[str, bool], list[SyslogFile]] = {}
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


def _load_run(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[SyslogFile]) -> None:
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
        insert_events(conn, work, files)
        work.execute(HOSTS_SEEN_SQL)
    finish(conn, work, files)


def _line_batches(files: list[SyslogFile]) -> Iterator[pa.Table]:
    """The files' line batches, each row with its source (sid). (map keeps no reference to the batch
    it gave: the caller frees it.)"""
    for f in files:
        yield from map(functools.partial(_with_sid, f.sid), f.ctx.line_batches())


def _with_sid(sid: int, batch: pa.Table) -> pa.Table:
    return batch.append_column("sid", pa.array(np.full(batch.num_rows, sid, dtype=np.int64)))


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
