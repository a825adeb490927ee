"""`synestra ingest`: walk paths, detect each file's format, load it in one transaction.

A source is keyed on its content (sha256 of the file's bytes), its format and the ingest options its
parser read (--timezone, --year, --host, --job): the same bytes read another way are another source.
The same path seen again with the same reading is the same file, later:
- its old content is a prefix and it ends a line: it grew. A line-oriented format (Format.appendable) loads
  only the new lines; any other is read again whole and replaces the old source(s);
- else it changed: the new content replaces the old source(s) and every row they wrote.
Either way, in the file's one transaction. Every exception inside one file's load is that file's
failure and the rest go on; a store that cannot be written stops the run (StoreWriteError).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Generator, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb

from synestra_cli import formats
from synestra_cli.clusters import qualify_source
from synestra_cli.errors import InputError, StoreWriteError, SynestraError, is_interrupt
from synestra_cli.formats.base import (
    UTF8_BOM,
    Format,
    IngestOptions,
    LoadContext,
    LoadResult,
    TrackedOptions,
    content_mtime,
    decode,
    read_head,
    transcode_to_utf8,
    utf16_codec,
)
from synestra_cli.store.checks import check_source
from synestra_cli.store.connect import is_store_write_failure
from synestra_cli.store.parallel import default_workers, map_in_threads
from synestra_cli.store.sources import delete_sources
from synestra_cli.store.sql import fetch_one, scalar, transaction

SOURCE_SPAN_SQL = """
WITH t AS (
    SELECT ts, host FROM events WHERE source_id = $sid
    UNION ALL SELECT ts, host FROM metrics WHERE source_id = $sid
    UNION ALL SELECT ts, NULL FROM steps WHERE source_id = $sid
    UNION ALL SELECT start_ts, NULL FROM checkpoints WHERE source_id = $sid
    UNION ALL SELECT ts, NULL FROM job_incidents WHERE source_id = $sid
    UNION ALL SELECT start_ts, NULL FROM attempts WHERE source_id = $sid
    UNION ALL SELECT end_ts, NULL FROM attempts WHERE source_id = $sid
    UNION ALL SELECT NULL, host FROM topology WHERE source_id = $sid
    UNION ALL SELECT NULL, host FROM job_nodes WHERE source_id = $sid
)
SELECT min(ts), max(ts), list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL) FROM t
"""

INSERT_SOURCE_SQL = """
INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts, hosts,
                     options, offset_bytes, first_line, source_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
SAME_CONTENT_SQL = "SELECT source_id, options FROM sources WHERE sha256 = ? AND format = ? ORDER BY source_id"
SAME_PATH_SQL = "SELECT source_id, sha256, bytes, options FROM sources WHERE path = ? AND format = ? ORDER BY source_id"
STORE_PATH_SQL = "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"

MAX_HOSTS_LISTED = 1000
CONFLICT_RETRIES = 5  # each round of colliding files commits at least one: enough for 4 workers
PARQUET_MAGIC = b"PAR1"  # the one binary format we read (long-form metrics)


@dataclass
class FileReport:
    path: str
    status: str  # loaded | skipped (already in store) | failed | empty (a folder)
    format: str | None = None
    rows: int = 0
    rejected: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    hosts: list[str] = field(default_factory=list)
    error: str | None = None
    reject_samples: list[tuple[int | None, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source_id: int | None = None
    replaced: list[int] = field(default_factory=list)  # sources this file replaced (it changed)


# --- finding the files ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WalkIssue:
    """A folder that could not be read (reported like a failed file), or that holds nothing to ingest
    (status "empty": a warning; `ingest empty/ --explain` still only explains)."""

    path: Path
    error: str
    status: str = "failed"


def iter_inputs(paths: Iterable[Path], skip: frozenset[Path] = frozenset()) -> Iterator[Path | WalkIssue]:
    """Files as given, folders recursively (sorted, hidden names skipped, symlinked folders followed once),
    then a WalkIssue for every folder that could not be read and every given folder with nothing to load.
    `skip`: resolved paths never read as input (the store itself, its WAL and spill folder)."""
    for p in paths:
        if p.is_dir():
            found = yield from _walk(p, skip)
            if not found:
                yield WalkIssue(p, f"{p}: no files to ingest in this folder{found.hidden_note()}", "empty")
        elif p.resolve() not in skip:
            yield p


@dataclass
class _Found:
    files: int = 0
    hidden: int = 0

    def __bool__(self) -> bool:
        return self.files > 0

    def hidden_note(self) -> str:
        return f" ({self.hidden} hidden name(s) skipped: they start with '.')" if self.hidden else ""


def _walk(top: Path, skip: frozenset[Path]) -> Generator[Path | WalkIssue, None, _Found]:
    found, seen, errors = _Found(), set(), list[OSError]()
    for root, dirs, files in os.walk(top, followlinks=True, onerror=errors.append):
        yield from (
            WalkIssue(Path(e.filename or top), f"{e.filename}: folder cannot be read ({e.strerror})") for e in errors
        )
        errors.clear()
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in seen:  # a symlink back up the tree: walked once
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        found.hidden += sum(name.startswith(".") for name in dirs + files)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (Path(root) / d).resolve() not in skip)
        for name in sorted(files):
            path = Path(root) / name
            if not name.startswith(".") and path.resolve() not in skip:
                found.files += 1
                yield path
    yield from (
        WalkIssue(Path(e.filename or top), f"{e.filename}: folder cannot be read ({e.strerror})") for e in errors
    )
    return found


def _store_path(conn: duckdb.DuckDBPyConnection) -> Path | None:
    row = fetch_one(conn, STORE_PATH_SQL)
    return Path(row[0]).resolve() if row and row[0] else None


def _store_files(conn: duckdb.DuckDBPyConnection) -> frozenset[Path]:
    db = _store_path(conn)
    return frozenset({db, Path(f"{db}.wal"), Path(f"{db}.tmp")}) if db else frozenset()


# --- what the file is and how it relates to what the store holds --------------------------------------


@dataclass(frozen=True)
class Digest:
    sha: str
    size: int
    prefix_sha: str | None = None  # of the first `prefix` bytes, when asked and the file is that long
    prefix_lines: int = 0  # newlines in them
    prefix_ends_line: bool = False  # they end with a newline


def file_digest(path: Path, prefix: int | None = None) -> Digest:
    """sha256 of the file's bytes, and of its first `prefix` bytes (one pass: is the old content a prefix?)."""
    h, size, lines, prefix_sha, last = hashlib.sha256(), 0, 0, None, b""
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            if prefix is not None and prefix_sha is None and size + len(block) >= prefix:
                cut = prefix - size
                h.update(block[:cut])
                lines += block.count(b"\n", 0, cut)
                prefix_sha = h.hexdigest()
                last = block[cut - 1 : cut] if cut else last
                h.update(block[cut:])
            else:
                h.update(block)
                if prefix is not None and prefix_sha is None:
                    lines += block.count(b"\n")
                    last = block[-1:]
            size += len(block)
    return Digest(h.hexdigest(), size, prefix_sha, lines, last == b"\n")


def _check_readable(path: Path) -> tuple[str, str | None]:
    """Decoded head of the file and the codec to transcode it with (None: UTF-8 already), or InputError
    saying why it cannot be ingested."""
    try:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{path}: permission denied")
        if path.stat().st_size == 0:
            raise InputError(f"{path}: empty file")
        head = read_head(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    codec = utf16_codec(head)
    if codec:
        text = head.decode(codec, errors="replace")
    elif head.startswith(UTF8_BOM):
        codec, text = "utf-8-sig", decode(head)
    else:
        text = None
    if text is None:
        if b"\x00" in head[:8192] and not head.startswith(PARQUET_MAGIC):
            raise InputError(f"{path}: binary file, not a log or metric export")
        text = decode(head)
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text, codec


def _pick_format(head: str, options: IngestOptions, path: Path) -> Format:
    try:
        return formats.by_name(options.format) if options.format else formats.detect(head)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from exc


def _reads_the_same(stored: str | None, options: IngestOptions) -> bool:
    """Whether a source read with `stored` options (the keyed ones its parser read) reads the same with
    these. {} (a source from before source keys) matches any."""
    return all(getattr(options, name, None) == value for name, value in json.loads(stored or "{}").items())


def _describe(stored: str) -> str:
    opts = json.loads(stored or "{}")
    shown = [f"--{name.replace('_id', '')} {value}" for name, value in opts.items() if value is not None]
    return " ".join(shown) or "default options"


@dataclass
class Plan:
    """How to load one file: from where, and which earlier sources it replaces."""

    digest: Digest
    offset: int = 0
    first_line: int = 1
    replaces: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _plan(conn, path: Path, fmt, options: IngestOptions, codec: str | None, report: FileReport) -> Plan | None:
    """The plan, or None when the store already holds this file read this way (then report says so)."""
    earlier = [
        r
        for r in conn.execute(SAME_PATH_SQL, [str(path.resolve()), fmt.name]).fetchall()
        if _reads_the_same(r[3], options)
    ]
    digest = file_digest(path, earlier[-1][2] if earlier else None)
    same = conn.execute(SAME_CONTENT_SQL, [digest.sha, fmt.name]).fetchall()
    if any(_reads_the_same(stored, options) for _, stored in same):
        report.status = "skipped"
        report.error = "already in the store (same content)"
        return None
    plan = Plan(digest)
    plan.notes += [
        f"the store also holds this content read with {_describe(stored)} (source {sid}): "
        f"`synestra forget {sid}` if this load corrects it"
        for sid, stored in same
    ]
    if not earlier:
        return plan
    last_id, last_sha, last_bytes, _ = earlier[-1]
    grew = digest.size > last_bytes and digest.prefix_sha == last_sha and digest.prefix_ends_line
    line_oriented = fmt.appendable and codec is None and not _is_gzip(path)
    if grew and line_oriented:
        plan.offset, plan.first_line = last_bytes, digest.prefix_lines + 1
        plan.notes.append(
            f"grew since source {last_id} was loaded: only its new lines (from line {plan.first_line}) are loaded"
        )
        return plan
    plan.replaces = [r[0] for r in earlier]
    ids = ", ".join(map(str, plan.replaces))
    plan.notes.append(
        f"grew since source {ids} was loaded: read again whole, replacing it"
        if grew
        else f"changed since source(s) {ids} were loaded from this path: replaces them"
    )
    return plan


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


@contextmanager
def _readable_copy(path: Path, codec: str | None) -> Iterator[Path]:
    """The file itself, or for UTF-16 / BOM-prefixed UTF-8 a plain UTF-8 copy under the same name
    (parsers that hand the path to DuckDB's readers then see UTF-8 too)."""
    if codec is None:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="synestra-") as tmp:
        name = path.name[:-3] if path.name.endswith(".gz") else path.name
        copy = Path(tmp) / name
        transcode_to_utf8(path, codec, copy)
        os.utime(copy, (path.stat().st_atime, path.stat().st_mtime))
        yield copy


# --- loading --------------------------------------------------------------------------------------------


def ingest_file(
    conn: duckdb.DuckDBPyConnection, path: Path, options: IngestOptions, source_id: int | None = None
) -> FileReport:
    """Load one file in one transaction. Never raises for a bad file: the report says what failed; raises
    StoreWriteError when the store cannot be written (nothing more can load). `source_id`, when given,
    was reserved for this file (ingest_paths keeps ids in file order)."""
    report = FileReport(path=str(path), status="failed")
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            _ingest(conn, path, options, source_id, report)
        except SynestraError as exc:
            report.error = str(exc)
        except duckdb.Error as exc:
            if is_interrupt(exc):  # Ctrl-C stops the whole run; this file's transaction is rolled back
                raise
            if is_store_write_failure(exc):
                raise StoreWriteError(_store_write_message(conn, exc)) from exc
            # Two files loading at once both added the same catalog row (or the same content): the later
            # one fails, at its insert or its commit. Retried, it sees the other's row (or is skipped).
            if _is_conflict(exc) and attempt < CONFLICT_RETRIES:
                continue
            report.error = _driver_error(path, exc)
        except Exception as exc:  # noqa: BLE001 - a parser bug or an input it did not foresee
            if is_interrupt(exc):  # DuckDB 2 reports a Ctrl-C inside a query as a RuntimeError
                raise
            # (TypeError on a null, RecursionError on deep nesting, a date Python cannot hold): this
            # file fails, rolled back, and the others still load.
            report.error = f"{path}: could not be loaded ({_first_line(exc)}); please report this file"
        return report
    return report


def _is_conflict(exc: duckdb.Error) -> bool:
    """A row another file's transaction wrote first (at insert, or at commit). Not "transaction is
    aborted": that follows an error of this file's own, and retrying it would only repeat it."""
    if isinstance(exc, duckdb.ConstraintException):
        return True
    return isinstance(exc, duckdb.TransactionException) and "transaction is aborted" not in str(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _driver_error(path: Path, exc: duckdb.Error) -> str:
    # A statement after a failed one (an unregister in a finally block) reports only "transaction is
    # aborted": the error that aborted it is the one to show.
    cause = exc.__context__ if "transaction is aborted" in str(exc) and exc.__context__ else exc
    return f"{path}: could not be loaded ({_first_line(cause)})"


def _store_write_message(conn, exc: duckdb.Error) -> str:
    try:
        store = str(_store_path(conn) or "in memory")
    except duckdb.Error:  # an invalidated database refuses even this
        store = "file"
    return (
        f"the store ({store}) cannot be written ({_first_line(exc)}): free space, or use another --db; "
        "the files reported as loaded are in, and re-running the ingest loads the rest"
    )


def _ingest(conn, path: Path, options: IngestOptions, source_id: int | None, report: FileReport) -> None:
    head, codec = _check_readable(path)
    fmt = _pick_format(head, options, path)
    report.format = fmt.name
    plan = _plan(conn, path, fmt, options, codec, report)
    if plan is None:
        return
    _load_in_transaction(conn, path, fmt, options, plan, codec, report, source_id)
    report.status = "loaded"


def _load_in_transaction(
    conn,
    path: Path,
    fmt,
    options: IngestOptions,
    plan: Plan,
    codec: str | None,
    report: FileReport,
    source_id: int | None,
) -> None:
    with transaction(conn):
        if source_id is None:
            source_id = scalar(conn, "SELECT nextval('source_id_seq')")
        delete_sources(conn, plan.replaces)
        tracked = TrackedOptions.wrap(options)
        with _readable_copy(path, codec) as readable:
            ctx = LoadContext(
                conn=conn,
                source_id=source_id,
                path=readable,
                display=str(path),
                options=tracked,
                mtime=content_mtime(path),
                offset=plan.offset,
                first_line=plan.first_line,
            )
            result: LoadResult = fmt.load(ctx)
        qualify_source(conn, source_id, fmt.name, tracked.cluster)  # clusters do not merge
        _apply_checks(conn, source_id, result)
        if options.strict and result.rejected:
            line, reason, _ = result.reject_samples[0]
            raise InputError(f"{path}:{line}: {reason} ({result.rejected} rejected lines; --strict)")
        if result.rejected and not result.rows:
            line, reason, _ = result.reject_samples[0] if result.reject_samples else (None, "rejected", "")
            hint = "" if not options.format else f"; is it really {fmt.name}? (--format forced it)"
            raise InputError(
                f"{path}: nothing could be read as {fmt.name}: all {result.rejected} line(s) "
                f"rejected, the first at line {line}: {reason}{hint}"
            )
        result.notes[:0] = plan.notes
        _record_source(conn, source_id, path, fmt.name, plan, tracked, result, report)


def _apply_checks(conn, source_id: int, result: LoadResult) -> None:
    checked = check_source(conn, source_id)
    result.rows = max(0, result.rows - checked.deleted)
    for line, reason, text in checked.rejects:
        result.reject(line, reason, text)
    result.rejected += checked.rejected - len(checked.rejects)
    result.notes += checked.notes


def _record_source(
    conn,
    source_id: int,
    path: Path,
    fmt_name: str,
    plan: Plan,
    tracked: TrackedOptions,
    result: LoadResult,
    report: FileReport,
) -> None:
    first, last, hosts = fetch_one(conn, SOURCE_SPAN_SQL, {"sid": source_id}) or (None, None, None)
    hosts = (hosts or [])[:MAX_HOSTS_LISTED]
    if result.reject_samples:
        conn.executemany(
            "INSERT INTO rejects (source_id, line, reason, text) VALUES (?, ?, ?, ?)",
            [(source_id, line, reason, text) for line, reason, text in result.reject_samples],
        )
    options = json.dumps(tracked.read_values())
    conn.execute(
        INSERT_SOURCE_SQL,
        [
            source_id,
            str(path.resolve()),
            plan.digest.sha,
            fmt_name,
            plan.digest.size,
            result.rows,
            result.rejected,
            first,
            last,
            hosts,
            options,
            plan.offset,
            plan.first_line,
            f"{plan.digest.sha}|{fmt_name}|{options}",
        ],
    )
    report.rows, report.rejected = result.rows, result.rejected
    report.first_ts, report.last_ts, report.hosts = first, last, hosts
    report.reject_samples, report.notes = result.reject_samples, result.notes
    report.source_id, report.replaced = source_id, plan.replaces


ProgressFn = Callable[[Path, int, int], None]
ReportFn = Callable[[FileReport], None]


def _issue_report(issue: WalkIssue) -> FileReport:
    return FileReport(path=str(issue.path), status=issue.status, error=issue.error)


def ingest_paths(
    conn: duckdb.DuckDBPyConnection,
    paths: Iterable[Path],
    options: IngestOptions,
    on_file: ProgressFn | None = None,
    on_report: ReportFn | None = None,
    workers: int | None = None,
) -> list[FileReport]:
    """Ingest every file under paths; one report per file (and per folder that could not be read or held
    nothing), in order (each also passed to on_report as soon as it and the files before it are done, so
    that a long ingest reports as it goes). Raises StoreWriteError at the first write the store refuses.

    Files load `workers` at a time (default: $SYNESTRA_INGEST_WORKERS, else one per core up to 4), each
    in its own transaction: a gzip stream decompresses on one core, so one file at a time leaves the
    others idle. Source ids are reserved in file order, so "the latest source" is the file given last."""
    items = list(iter_inputs(paths, _store_files(conn)))
    if not items:
        return []
    ids = sorted(r[0] for r in conn.execute("SELECT nextval('source_id_seq') FROM range(?)", [len(items)]).fetchall())
    n_files = sum(isinstance(item, Path) for item in items)
    n = (workers or default_workers("SYNESTRA_INGEST_WORKERS")) if n_files > 1 else 1

    def load(cur: duckdb.DuckDBPyConnection, i: int) -> FileReport:
        item = items[i]
        if isinstance(item, WalkIssue):
            return _issue_report(item)
        if on_file and n <= 1:
            on_file(item, i, len(items))
        return ingest_file(cur, item, options, ids[i])

    reports = []
    for i, report in enumerate(map_in_threads(conn, load, range(len(items)), n)):
        if on_file and n > 1:  # callbacks stay on this thread: the progress bar is not thread-safe
            on_file(Path(report.path), i, len(items))
        if on_report:
            on_report(report)
        reports.append(report)
    if on_file:
        on_file(Path(""), len(items), len(items))
    return reports
