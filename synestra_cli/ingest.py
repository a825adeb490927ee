"""`synestra ingest`: walk paths, detect each file's format, load it in one transaction."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import duckdb

from synestra_cli import formats
from synestra_cli.clusters import qualify_source
from synestra_cli.errors import InputError, SynestraError
from synestra_cli.formats.base import IngestOptions, LoadContext, LoadResult, content_mtime, decode, read_head
from synestra_cli.store.parallel import default_workers, map_in_threads
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
INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts, hosts)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

MAX_HOSTS_LISTED = 1000
CONFLICT_RETRIES = 5  # each round of colliding files commits at least one: enough for 4 workers
PARQUET_MAGIC = b"PAR1"  # the one binary format we read (long-form metrics)


@dataclass
class FileReport:
    path: str
    status: str                      # loaded | skipped (already in store) | failed
    format: str | None = None
    rows: int = 0
    rejected: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    hosts: list[str] = field(default_factory=list)
    error: str | None = None
    reject_samples: list[tuple[int | None, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def iter_files(paths: Iterable[Path]) -> Iterator[Path]:
    """Files as given, folders recursively (sorted, hidden files skipped)."""
    for p in paths:
        if p.is_dir():
            for root, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if not name.startswith("."):
                        yield Path(root) / name
        else:
            yield p


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_readable(path: Path) -> str:
    """Decoded head of the file, or InputError saying why it cannot be ingested."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file")
    head = read_head(path)
    if not head.strip():
        raise InputError(f"{path}: empty file")
    if b"\x00" in head[:8192] and not head.startswith(PARQUET_MAGIC):
        raise InputError(f"{path}: binary file, not a log or metric export")
    return decode(head)


def _pick_format(head: str, options: IngestOptions, path: Path):
    try:
        return formats.by_name(options.format) if options.format else formats.detect(head)
    except InputError as exc:
        raise InputError(f"{path}: {exc}") from exc


def ingest_file(conn: duckdb.DuckDBPyConnection, path: Path, options: IngestOptions,
                source_id: int | None = None) -> FileReport:
    """Load one file in one transaction. Never raises for a bad file: the report says what failed.
    `source_id`, when given, was reserved for this file (ingest_paths keeps ids in file order)."""
    report = FileReport(path=str(path), status="failed")
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            _ingest(conn, path, options, source_id, report)
        except SynestraError as exc:
            report.error = str(exc)
        except (duckdb.TransactionException, duckdb.ConstraintException) as exc:
            # Two files loading at once both added the same catalog row (or the same content): the later
            # one fails, at its insert or its commit. Retried, it sees the other's row (or is skipped).
            if attempt < CONFLICT_RETRIES:
                continue
            report.error = _driver_error(path, exc)
        except duckdb.Error as exc:
            report.error = _driver_error(path, exc)
        return report
    return report


def _driver_error(path: Path, exc: duckdb.Error) -> str:
    return f"{path}: could not be loaded ({type(exc).__name__}: {str(exc).splitlines()[0]})"


def _ingest(conn, path: Path, options: IngestOptions, source_id: int | None, report: FileReport) -> None:
    head = _check_readable(path)
    sha = file_sha256(path)
    if fetch_one(conn, "SELECT 1 FROM sources WHERE sha256 = ?", [sha]):
        report.status = "skipped"
        report.error = "already in the store (same content)"
        return
    fmt = _pick_format(head, options, path)
    report.format = fmt.NAME
    _load_in_transaction(conn, path, sha, fmt, options, report, source_id)
    report.status = "loaded"


def _load_in_transaction(conn, path: Path, sha: str, fmt, options: IngestOptions, report: FileReport,
                         source_id: int | None) -> None:
    with transaction(conn):
        if source_id is None:
            source_id = scalar(conn, "SELECT nextval('source_id_seq')")
        ctx = LoadContext(conn=conn, source_id=source_id, path=path, display=str(path), options=options,
                          mtime=content_mtime(path))
        result: LoadResult = fmt.load(ctx)
        qualify_source(conn, source_id, fmt.NAME, options.cluster)  # clusters do not merge
        if options.strict and result.rejected:
            line, reason, _ = result.reject_samples[0]
            raise InputError(f"{path}:{line}: {reason} ({result.rejected} rejected lines; --strict)")
        _record_source(conn, source_id, path, sha, fmt.NAME, result, report)


def _record_source(conn, source_id: int, path: Path, sha: str, fmt_name: str, result: LoadResult,
                   report: FileReport) -> None:
    first, last, hosts = fetch_one(conn, SOURCE_SPAN_SQL, {"sid": source_id}) or (None, None, None)
    hosts = (hosts or [])[:MAX_HOSTS_LISTED]
    if result.reject_samples:
        conn.executemany(
            "INSERT INTO rejects (source_id, line, reason, text) VALUES (?, ?, ?, ?)",
            [(source_id, line, reason, text) for line, reason, text in result.reject_samples],
        )
    conn.execute(
        INSERT_SOURCE_SQL,
        [source_id, str(path.resolve()), sha, fmt_name, path.stat().st_size, result.rows, result.rejected,
         first, last, hosts],
    )
    report.rows, report.rejected = result.rows, result.rejected
    report.first_ts, report.last_ts, report.hosts = first, last, hosts
    report.reject_samples, report.notes = result.reject_samples, result.notes


ProgressFn = Callable[[Path, int, int], None]
ReportFn = Callable[[FileReport], None]


def ingest_paths(conn: duckdb.DuckDBPyConnection, paths: Iterable[Path], options: IngestOptions,
                 on_file: ProgressFn | None = None, on_report: ReportFn | None = None,
                 workers: int | None = None) -> list[FileReport]:
    """Ingest every file under paths; one report per file, in order (each also passed to on_report as
    soon as it and the files before it are done, so that a long ingest reports as it goes).

    Files load `workers` at a time (default: $SYNESTRA_INGEST_WORKERS, else one per core up to 4), each
    in its own transaction: a gzip stream decompresses on one core, so one file at a time leaves the
    others idle. Source ids are reserved in file order, so "the latest source" is the file given last."""
    files = list(iter_files(paths))
    if not files:
        return []
    ids = sorted(r[0] for r in conn.execute("SELECT nextval('source_id_seq') FROM range(?)", [len(files)]).fetchall())
    n = (workers or default_workers("SYNESTRA_INGEST_WORKERS")) if len(files) > 1 else 1

    def load(cur: duckdb.DuckDBPyConnection, i: int) -> FileReport:
        if on_file and n <= 1:
            on_file(files[i], i, len(files))
        return ingest_file(cur, files[i], options, ids[i])

    reports = []
    for i, report in enumerate(map_in_threads(conn, load, range(len(files)), n)):
        if on_file and n > 1:  # callbacks stay on this thread: the progress bar is not thread-safe
            on_file(files[i], i, len(files))
        if on_report:
            on_report(report)
        reports.append(report)
    if on_file:
        on_file(Path(""), len(files), len(files))
    return reports
