"""Files into a stage: each file planned (its format, and whether the store holds it already), parsed
into an in-memory stage in its own transaction, and every failure of one file turned into its report.

ingest/run.py hands units of files to threads and commits the stages; this module never touches the
store itself (ingest/staging.py: what a parser may read of it).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from synestra_cli.errors import (
    SettingsError,
    StoreWriteError,
    SynestraError,
    is_interrupt,
    is_out_of_memory,
    out_of_memory_message,
    raise_if_stopped,
)
from synestra_cli.formats import envelope_sql
from synestra_cli.formats.base import Format, IngestOptions, LoadContext, LoadResult, TrackedOptions
from synestra_cli.formats.envelope import Envelope
from synestra_cli.formats.reading import content_mtime, is_gzip, text_bytes, transcode_to_utf8
from synestra_cli.ingest.batch import Staged
from synestra_cli.ingest.plan import (
    SKIP,
    Known,
    Plan,
    check_readable,
    check_unchanged,
    decide,
    digest_for,
    pick_format,
)
from synestra_cli.ingest.report import FileReport
from synestra_cli.ingest.staging import Stores
from synestra_cli.ingest.walk import WalkIssue
from synestra_cli.query.clusters import prefix_hosts
from synestra_cli.store.connect import is_store_write_failure
from synestra_cli.store.sql import quote_ident, transaction

CONFLICT_RETRIES = 5  # each round of colliding files commits at least one: enough for 4 workers
R = TypeVar("R")
ProgressFn = Callable[[Path, int, int], None]


@dataclass(frozen=True)
class Later:
    """A file left for the run's second pass (it leans on other files): its index says which."""


Result = FileReport | Staged | Later
# Consecutive small files are handed to a worker together, up to UNIT_FILES or UNIT_TEXT_BYTES of text: those
# of a format that loads many at once (Format.load_group) are then parsed by the same statements. Text, not
# bytes on disk: a unit's memory is its lines, and gzip holds ~9x more per byte. Units of 16 MB of gzipped
# optics CSV (~140 MB of lines), two at once, spilled DuckDB's pool to disk: the campus's 512 files took 24 s
# with two workers, 16 s with one; 32 MB of text: 16 s with two, 1.1 GB peak instead of 1.5. A file over
# UNIT_ALONE_BYTES on disk is a unit of its own: the workers share the big files.
UNIT_FILES = 256
UNIT_TEXT_BYTES = 32 << 20
UNIT_ALONE_BYTES = 1 << 20


def work_units(items: list[Path | WalkIssue], chosen: list[int] | None = None) -> list[list[int]]:
    """The indices of the inputs (those chosen, in order), cut into units of work (a WalkIssue alone)."""
    units: list[list[int]] = []
    unit: list[int] = []
    size = 0
    for i in range(len(items)) if chosen is None else chosen:
        item = items[i]
        on_disk, text = (0, 0) if isinstance(item, WalkIssue) else _sizes(item)
        if isinstance(item, WalkIssue) or on_disk > UNIT_ALONE_BYTES:  # alone, in order
            units += [unit, [i]] if unit else [[i]]
            unit, size = [], 0
            continue
        if unit and (len(unit) >= UNIT_FILES or size + text > UNIT_TEXT_BYTES):
            units.append(unit)
            unit, size = [], 0
        unit.append(i)
        size += text
    return units + [unit] if unit else units


def _sizes(path: Path) -> tuple[int, int]:
    """The file's bytes on disk and of text (0, 0: unreadable, it fails when planned)."""
    try:
        return path.stat().st_size, text_bytes(path)
    except OSError:
        return 0, 0


@dataclass
class _Planned:
    """A file read far enough to know its format and plan, not yet parsed."""

    index: int
    path: Path
    source_id: int
    fmt: Format
    codec: str | None
    plan: Plan
    report: FileReport
    leans: bool = False  # on other files (Format.leans_on_others): parsed once the run's others are committed
    envelope: Envelope | None = None  # taken off before it loads: it is read from a normalised copy

    @property
    def rewritten(self) -> str | None:
        """How the parser's copy differs from the bytes (a codec, an envelope), None: it reads the file.
        Such a file is parsed alone and never loads only its new lines (ingest/plan.py decide)."""
        return self.codec or ("envelope" if self.envelope is not None else None)


def stage_unit(
    cur: duckdb.DuckDBPyConnection,
    stores: Stores,
    stage: str,
    files: list[tuple[int, Path, int]],
    options: IngestOptions,
    known: Known,
    progress: ProgressFn | None = None,
    total: int = 0,
    defer: bool = False,
) -> list[tuple[int, Result]]:
    """Parse files (index, path, source id) into `stage`: those of a format with a load_group together,
    in one transaction of the stage; if that fails, each on its own (a bad file fails alone). The
    others one by one. Each file's Staged, or its report (skipped or failed); with `defer`, Later for
    a file that leans on others, not parsed."""
    out: dict[int, Result] = {}
    groups: dict[object, list[_Planned]] = {}
    for index, path, source_id in files:
        report = FileReport(path=str(path), status="failed")
        planned = _guarded(stores, path, report, lambda: _plan(path, options, known, report))  # noqa: B023
        if isinstance(planned, _Planned) and defer and planned.leans:
            out[index] = Later()
            continue  # shown when its pass comes
        if progress:
            progress(path, index, total)
        if isinstance(planned, _Planned):
            planned.index, planned.source_id = index, source_id
            groups.setdefault(_group_key(planned), []).append(planned)
        else:
            out[index] = planned
    for group in groups.values():
        staged = _stage_group(cur, stores, stage, group, options) if len(group) > 1 else None
        for p in group:
            out[p.index] = staged[p.index] if staged else _stage_one(cur, stores, stage, p, options)
    return sorted(out.items())


def _group_key(p: _Planned) -> object:
    """Files of formats sharing a load_group (every job-log format shares one) are parsed together; a
    file to transcode (UTF-16) or take an envelope off is parsed alone, from its copy."""
    return p.fmt.load_group if p.fmt.load_group and p.rewritten is None else f"#{p.index}"


def _stage_one(
    cur: duckdb.DuckDBPyConnection, stores: Stores, stage: str, p: _Planned, options: IngestOptions
) -> FileReport | Staged:
    p.report.status = "failed"
    return _guarded(stores, p.path, p.report, lambda: _load(cur, stores, stage, p, options))


def stage_file(
    cur: duckdb.DuckDBPyConnection,
    stores: Stores,
    stage: str,
    path: Path,
    options: IngestOptions,
    source_id: int,
    known: Known,
    index: int,
) -> FileReport | Staged:
    """Parse one file into `stage`, in one transaction of the stage: the Staged file, or its report
    (skipped: the store holds it; failed: why). Raises StoreWriteError when the stage's spill folder
    cannot be written."""
    report = FileReport(path=str(path), status="failed")

    def attempt() -> FileReport | Staged:
        planned = _plan(path, options, known, report)
        if isinstance(planned, FileReport):
            return planned
        planned.index, planned.source_id = index, source_id
        return _load(cur, stores, stage, planned, options)

    return _guarded(stores, path, report, attempt)


def _guarded(stores: Stores, path: Path, report: FileReport, fn: Callable[[], R]) -> R | FileReport:
    """fn(), or `report` saying why it failed: every error of one file is that file's failure, but a
    Ctrl-C and a spill folder that cannot be written (StoreWriteError). A catalog row another file
    added first is retried. An error while a signal asked to stop is the stop (a library may have
    wrapped its exception: errors.request_stop)."""
    for attempt in range(CONFLICT_RETRIES + 1):
        try:
            return fn()
        except SettingsError:
            raise  # a malformed variable is the command's usage error (exit 2), not this file's
        except SynestraError as exc:
            raise_if_stopped(exc)
            report.error = str(exc)
        except duckdb.Error as exc:
            raise_if_stopped(exc)
            if is_interrupt(exc):  # Ctrl-C stops the whole run; this file's transaction is rolled back
                raise
            if is_store_write_failure(exc):
                raise StoreWriteError(store_write_message(stores, exc)) from exc
            # Two files parsing at once both added the same catalog row to the stage: the later one
            # fails, at its insert or its commit. Retried, it sees the other's row.
            if _is_conflict(exc) and attempt < CONFLICT_RETRIES:
                continue
            report.error = _out_of_memory(path, exc) if is_out_of_memory(exc) else _driver_error(path, exc)
        except Exception as exc:  # noqa: BLE001 - a parser bug or an input it did not foresee
            raise_if_stopped(exc)
            if is_interrupt(exc):  # DuckDB 2 reports a Ctrl-C inside a query as a RuntimeError
                raise
            if is_out_of_memory(exc):  # (an Arrow scan wraps DuckDB's): the limit's fault, not the file's
                report.error = _out_of_memory(path, exc)
                return report
            if isinstance(exc, OSError):  # removed, replaced or made unreadable since it was walked
                report.error = f"{path}: cannot be read ({exc.strerror or exc})"
                return report
            # (TypeError on a null, RecursionError on deep nesting, a date Python cannot hold): this
            # file fails, rolled back, and the others still load.
            report.error = f"{path}: could not be loaded ({_first_line(exc)}); please report this file"
        return report
    return report


def _plan(path: Path, options: IngestOptions, known: Known, report: FileReport) -> _Planned | FileReport:
    """Read the file's head and digest: its format and plan (index and source id left to the caller), or
    its report when the store holds it already."""
    head, codec = check_readable(path)
    fmt, env = pick_format(head, options, path)
    report.format = fmt.name
    rewritten = codec or ("envelope" if env is not None else None)
    plan = decide(known, path, fmt, options, rewritten, digest_for(known, path, fmt.name, options))
    if plan is SKIP:
        report.status, report.error = "skipped", "already in the store (same content)"
        return report
    if env is not None:
        plan.notes.append(f"read as {fmt.name} once its envelope is taken off: {env.describe()}")
        head = envelope_sql.normalise_head(head, env)
    leans = fmt.leans_on_others is not None and fmt.leans_on_others(head, options)
    return _Planned(-1, path, -1, fmt, codec, plan, report, leans, env)


def _context(
    cur: duckdb.DuckDBPyConnection,
    stores: Stores,
    p: _Planned,
    readable: Path,
    tracked: TrackedOptions,
    columns: pa.Table | None = None,
) -> LoadContext:
    codec, plan = p.rewritten, p.plan
    return LoadContext(
        conn=cur,
        source_id=p.source_id,
        path=readable,
        display=str(p.path),
        options=tracked,
        mtime=content_mtime(p.path),
        offset=plan.offset,
        first_line=plan.first_line,
        # the bytes hashed, not what a writer appended since: the next load starts where this one ended
        end=plan.digest.size if codec is None and not is_gzip(p.path) else None,
        evidence=stores.evidence,
        envelope=p.envelope,
        envelope_columns=columns,
        origin=p.path if readable != p.path else None,
    )


def _load(cur: duckdb.DuckDBPyConnection, stores: Stores, stage: str, p: _Planned, options: IngestOptions) -> Staged:
    """Parse one planned file into `stage`, in one transaction of the stage."""
    tracked = TrackedOptions.wrap(options)
    cur.execute(f"USE {quote_ident(stage)}")  # the formats write to the unqualified tables: the stage's
    try:
        with transaction(cur), _readable_copy(cur, p) as (readable, columns):
            try:
                result: LoadResult = p.fmt.load(_context(cur, stores, p, readable, tracked, columns))
            except Exception:
                check_unchanged(p.path, p.plan.digest)  # a parse of another file: say so, not why it failed
                raise
            check_unchanged(p.path, p.plan.digest)
            # with --cluster its hosts become CLUSTER:host here; the commit qualifies its jobs
            prefix_hosts(cur, p.source_id, tracked.cluster)
    finally:
        cur.execute(f"USE {quote_ident(stores.home)}")
    return _staged(p, result, tracked)


def _staged(p: _Planned, result: LoadResult, tracked: TrackedOptions) -> Staged:
    return Staged(
        p.index, p.source_id, p.path, p.fmt, p.rewritten, p.plan, result, json.dumps(tracked.read_values()), p.report
    )


def _stage_group(
    cur: duckdb.DuckDBPyConnection, stores: Stores, stage: str, group: list[_Planned], options: IngestOptions
) -> dict[int, Result] | None:
    """Parse files of one format (none to transcode) into `stage` with its load_group, in one transaction
    of the stage; None when that fails (rolled back: the caller loads them one by one)."""
    load_group = group[0].fmt.load_group
    assert load_group is not None and all(p.rewritten is None for p in group)
    tracked = [TrackedOptions.wrap(options) for _ in group]
    cur.execute(f"USE {quote_ident(stage)}")
    try:
        with transaction(cur):
            results = load_group([_context(cur, stores, p, p.path, t) for p, t in zip(group, tracked, strict=True)])
            for p, t in zip(group, tracked, strict=True):
                check_unchanged(p.path, p.plan.digest)  # else each loads alone, the changed one fails
                prefix_hosts(cur, p.source_id, t.cluster)
    except duckdb.Error as exc:
        raise_if_stopped(exc)
        if is_interrupt(exc):
            raise
        if is_store_write_failure(exc):
            raise StoreWriteError(store_write_message(stores, exc)) from exc
        return None
    except Exception as exc:  # noqa: BLE001 - one file of the group is bad: each is loaded alone
        raise_if_stopped(exc)
        if is_interrupt(exc):
            raise
        return None
    finally:
        cur.execute(f"USE {quote_ident(stores.home)}")
    return {p.index: _staged(p, r, t) for p, r, t in zip(group, results, tracked, strict=True)}


@contextmanager
def _readable_copy(cur: duckdb.DuckDBPyConnection, p: _Planned) -> Iterator[tuple[Path, pa.Table | None]]:
    """The file itself, or a copy under the same name: for UTF-16 / BOM-prefixed UTF-8 a plain UTF-8 copy,
    for a file with an envelope the normalised text, with the columns its prefix gave (parsers that hand
    the path to DuckDB's readers then see the same text as those reading lines)."""
    path, codec = p.path, p.codec
    if p.rewritten is None:
        yield path, None
        return
    with tempfile.TemporaryDirectory(prefix="synestra-") as tmp:
        name = path.name[:-3] if path.name.endswith(".gz") else path.name
        copy, columns = Path(tmp) / name, None
        if codec is not None:
            transcode_to_utf8(path, codec, Path(tmp) / f"utf8-{name}")
        if p.envelope is not None:
            columns = envelope_sql.write_copy(cur, Path(tmp) / f"utf8-{name}" if codec else path, copy, p.envelope)
        else:
            os.replace(Path(tmp) / f"utf8-{name}", copy)
        os.utime(copy, (path.stat().st_atime, path.stat().st_mtime))
        yield copy, columns


def _is_conflict(exc: duckdb.Error) -> bool:
    """A row another file's transaction wrote first (at insert, or at commit). Not "transaction is
    aborted": that follows an error of this file's own, and retrying it would only repeat it."""
    if isinstance(exc, duckdb.ConstraintException):
        return True
    return isinstance(exc, duckdb.TransactionException) and "transaction is aborted" not in str(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _out_of_memory(path: Path, exc: BaseException) -> str:
    return f"{path}: {out_of_memory_message(exc)}, then ingest again"


def _driver_error(path: Path, exc: duckdb.Error) -> str:
    # A statement after a failed one (an unregister in a finally block) reports only "transaction is
    # aborted": the error that aborted it is the one to show.
    cause = exc.__context__ if "transaction is aborted" in str(exc) and exc.__context__ else exc
    return f"{path}: could not be loaded ({_first_line(cause)})"


def store_write_message(stores: Stores, exc: duckdb.Error) -> str:
    store = str(stores.path or "in memory")
    return (
        f"the store ({store}) cannot be written ({_first_line(exc)}): free space, or use another --db; "
        "the files reported as loaded are in, and re-running the ingest loads the rest"
    )
