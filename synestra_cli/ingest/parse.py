"""Files into a stage: each file planned (its format, and whether the store holds it already), parsed
into an in-memory stage in its own transaction, and every failure of one file turned into its report
(ingest/failures.py); the files come in units of work (ingest/units.py).

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

import duckdb
import pyarrow as pa

from synestra_cli.errors import (
    StoreWriteError,
    is_interrupt,
    raise_if_stopped,
)
from synestra_cli.formats import envelope_sql
from synestra_cli.formats.base import Format, IngestOptions, LoadContext, LoadResult, TrackedOptions
from synestra_cli.formats.envelope import Envelope
from synestra_cli.formats.reading import content_mtime, is_gzip, transcode_to_utf8
from synestra_cli.ingest.batch import Staged
from synestra_cli.ingest.failures import guarded, store_write_message
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
from synestra_cli.query.clusters import prefix_hosts
from synestra_cli.store.connect import is_store_write_failure
from synestra_cli.store.sql import quote_ident, transaction

ProgressFn = Callable[[Path, int, int], None]


@dataclass(frozen=True)
class Later:
    """A file left for the run's second pass (it leans on other files): its index says which."""


Result = FileReport | Staged | Later


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
        planned = guarded(stores, path, report, lambda: _plan(path, options, known, report))  # noqa: B023
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
    return guarded(stores, p.path, p.report, lambda: _load(cur, stores, stage, p, options))


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

    return guarded(stores, path, report, attempt)


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
