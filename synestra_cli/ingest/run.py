"""The ingest run: files parsed into stages (a few at a time, in threads), batches committed.

A batch closes after BATCH_SECONDS of parsing (or BATCH_FILES files, or BATCH_BYTES of input), then
commits as soon as the files in flight for it are done and the store is free. While a reader holds
the store, parsing goes on into the next stage and the commit is tried again after the next file;
only when PENDING_BATCHES batches (or PENDING_BYTES of input) wait does ingest wait for the store.

A file that may take a fact from other files (Format.leans_on_others: a yearless log's year, a hostless
scrape's host) is parsed in a second pass, once every other file of the run is committed: what it
takes then does not depend on which files the threads and the readers let in first.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import NoReturn

import duckdb

from synestra_cli.errors import (
    StoreWriteError,
    is_interrupt,
    raise_if_stopped,
)
from synestra_cli.formats.base import (
    IngestOptions,
)
from synestra_cli.ingest.batch import Batch, Staged, commit, prepare
from synestra_cli.ingest.failures import store_write_message
from synestra_cli.ingest.parse import (
    Later,
    ProgressFn,
    Result,
    stage_file,
    stage_unit,
)
from synestra_cli.ingest.plan import (
    Known,
)
from synestra_cli.ingest.report import FileReport
from synestra_cli.ingest.staging import Stores
from synestra_cli.ingest.units import work_units
from synestra_cli.ingest.walk import WalkIssue, iter_inputs
from synestra_cli.store.connect import as_store_error, is_store_write_failure
from synestra_cli.store.parallel import default_workers, map_in_threads
from synestra_cli.store.sql import quote_ident

BATCH_SECONDS = 2.0  # of parsing per commit: readers wait at most a commit, never the whole ingest
BATCH_FILES = 2000
BATCH_BYTES = 64 << 20  # of input
PENDING_BATCHES = 4  # closed batches waiting for the store before ingest waits for it
PENDING_BYTES = 256 << 20
RESTAGE_MAX = 3  # a file whose plan keeps changing (another ingest of the same path): then it fails
RESERVE_IDS_SQL = "SELECT nextval('{store}.main.source_id_seq') FROM range(?)"

ReportFn = Callable[[FileReport], None]
Store = duckdb.DuckDBPyConnection | str | Path | None


def ingest_paths(
    store: Store,
    paths: Iterable[Path],
    options: IngestOptions,
    on_file: ProgressFn | None = None,
    on_report: ReportFn | None = None,
    workers: int | None = None,
) -> list[FileReport]:
    """Ingest every file under paths into `store`; one report per file (and per folder that could not
    be read or held nothing), in order (each also passed to on_report once it is final: committed,
    skipped or failed). Raises StoreWriteError at the first write the store refuses.

    `store`: an open connection (the store stays attached the whole run), or a path (None: $SYNESTRA_DB,
    ./synestra.duckdb): then the store is attached only for each batch's commit, so that readers get in
    between. Files parse `workers` at a time (default: $SYNESTRA_INGEST_WORKERS, else one per core up
    to 4): a gzip stream decompresses on one core. Source ids are reserved in file order, so "the latest
    source" is the file given last."""
    stores = Stores.open(store)
    try:
        return ingest_into(stores, paths, options, on_file, on_report, workers)
    finally:
        stores.close()


def ingest_into(
    stores: Stores,
    paths: Iterable[Path],
    options: IngestOptions,
    on_file: ProgressFn | None = None,
    on_report: ReportFn | None = None,
    workers: int | None = None,
) -> list[FileReport]:
    """ingest_paths on Stores the caller keeps across runs (`ingest --follow`: one connection for hours,
    the store attached only for each commit)."""
    return _Run(stores, options, on_report).run(list(paths), on_file, workers)


def ingest_file(store: Store, path: Path, options: IngestOptions, source_id: int | None = None) -> FileReport:
    """Load one file, all of it or nothing. Never raises for a bad file: the report says what failed;
    raises StoreWriteError when the store cannot be written. `source_id`: the id to give it."""
    stores = Stores.open(store)
    try:
        reports = _Run(stores, options, None).run([path], None, 1, [source_id] if source_id else None)
    finally:
        stores.close()
    return reports[0] if reports else FileReport(str(path), "skipped", error="the store's own file")


class _Run:
    def __init__(self, stores: Stores, options: IngestOptions, on_report: ReportFn | None) -> None:
        self.stores, self.options, self.on_report = stores, options, on_report
        self.conn = stores.conn
        self.lock = threading.Lock()  # the open batch, as worker threads pick it
        self.batches: list[Batch] = []  # closed ones waiting to commit, then the open one
        self.dispatched: Counter[str] = Counter()  # files started per stage
        self.consumed: Counter[str] = Counter()  # files back per stage
        self.reports: dict[int, FileReport] = {}
        self.known = Known()
        self.opened = time.monotonic()

    def run(
        self, paths: list[Path], on_file: ProgressFn | None, workers: int | None, ids: list[int] | None = None
    ) -> list[FileReport]:
        items = list(iter_inputs(paths, self.stores.skip()))
        if not items:
            return []
        self.ids = ids or self._start(len(items))
        workers = workers or default_workers("SYNESTRA_INGEST_WORKERS")  # read (and checked) even for one unit
        self.done = self.shown = 0  # files back from the workers; files shown parsing (one worker)
        try:
            self._open_batch()
            later = self._pass(items, list(range(len(items))), on_file, workers, defer=True)
            if later:  # their evidence committed first, whatever the order the threads took
                self._finish()
                self._pass(items, later, on_file, workers, defer=False)
            self._finish()
        finally:
            for batch in self.batches:
                self.stores.drop_stage(batch.stage)
        if on_file:
            on_file(Path(""), len(items), len(items))
        return [self.reports[i] for i in sorted(self.reports)]

    def _pass(
        self, items: list[Path | WalkIssue], chosen: list[int], on_file: ProgressFn | None, workers: int, defer: bool
    ) -> list[int]:
        """Parse the chosen inputs into stages, committing batches as they fill; the files left for a
        second pass (`defer`: those that lean on others), by index."""
        units = work_units(items, chosen)
        n = workers if len(units) > 1 else 1
        later: list[int] = []

        def work(cur: duckdb.DuckDBPyConnection, unit: list[int]) -> tuple[str | None, list[tuple[int, Result]]]:
            first = items[unit[0]]
            if isinstance(first, WalkIssue):
                return None, [(unit[0], FileReport(path=str(first.path), status=first.status, error=first.error))]
            with self.lock:
                stage = self.batches[-1].stage
                self.dispatched[stage] += len(unit)
            files = [(i, path, self.ids[i]) for i in unit if isinstance(path := items[i], Path)]
            progress = self._counted(on_file) if on_file and n <= 1 else None
            return stage, stage_unit(
                cur, self.stores, stage, files, self.options, self.known, progress, len(items), defer
            )

        for stage, results in map_in_threads(self.conn, work, units, n):
            for i, result in results:
                raise_if_stopped()  # a stop a parser's broad except swallowed ends the run here
                if isinstance(result, Later):
                    later.append(i)  # shown and counted in its own pass
                else:
                    if on_file and n > 1:  # callbacks stay on this thread: the progress bar is not thread-safe
                        on_file(Path(getattr(result, "path", "")), self.done, len(items))
                    self.done += 1
                self._take(stage, i, result)
        return later

    def _counted(self, on_file: ProgressFn) -> ProgressFn:
        """One worker's progress: each file as it is parsed, numbered across both passes."""

        def show(path: Path, _index: int, total: int) -> None:
            on_file(path, self.shown, total)
            self.shown += 1

        return show

    def _start(self, n: int) -> list[int]:
        """Reserve the run's source ids (in file order) and read what the store holds."""
        with self._store(wait=True):
            sql = RESERVE_IDS_SQL.format(store=quote_ident(self.stores.store))
            ids = sorted(r[0] for r in self.conn.execute(sql, [n]).fetchall())
            self.known = Known.load(self.conn, self.stores.store)
            self.stores.refresh_evidence()
        return ids

    @contextmanager
    def _store(self, wait: bool) -> Iterator[bool]:
        """The store attached (yields False when it is busy and wait is false), then detached; a write
        the store refuses (in a commit, or the checkpoint on detaching) is StoreWriteError."""
        try:
            attached = self.stores.attach(wait)
        except duckdb.Error as exc:
            self._raise_mapped(exc)
        try:
            yield attached
            if attached:
                self.stores.detach()
        except BaseException as exc:
            if attached:
                with suppress(duckdb.Error):
                    self.stores.detach()
            if isinstance(exc, duckdb.Error):
                self._raise_mapped(exc)
            raise

    def _raise_mapped(self, exc: duckdb.Error) -> NoReturn:
        if is_interrupt(exc):
            raise exc
        if is_store_write_failure(exc):
            raise StoreWriteError(store_write_message(self.stores, exc)) from exc
        mapped = as_store_error(exc, self.stores.path)
        if mapped:
            raise mapped from exc
        raise exc

    def _open_batch(self) -> None:
        stage = self.stores.new_stage()
        batch = Batch(stage, self.stores.tables or [])
        with self.lock:
            self.batches.append(batch)
        self.opened = time.monotonic()

    def _final(self, index: int, report: FileReport) -> None:
        self.reports[index] = report
        if self.on_report:
            self.on_report(report)

    def _take(self, stage: str | None, index: int, result: Result) -> None:
        if stage is not None:
            self.consumed[stage] += 1  # back from its worker (a file left for the second pass too)
        if isinstance(result, Later):
            return
        if isinstance(result, Staged):
            next(b for b in self.batches if b.stage == stage).add(result)
        else:
            self._final(index, result)
        current = self.batches[-1]
        due = (
            len(current.files) >= BATCH_FILES
            or current.input_bytes >= BATCH_BYTES
            or (current.files and time.monotonic() - self.opened >= BATCH_SECONDS)
        )
        if due:
            self._open_batch()
        waiting = self.batches[:-1]
        overdue = len(waiting) >= PENDING_BATCHES or sum(b.input_bytes for b in waiting) >= PENDING_BYTES
        self._commit_ready(wait=overdue)

    def _commit_ready(self, wait: bool) -> None:
        """Commit the closed batches whose files are all back, if the store is free (or once it is)."""
        ready = []
        for batch in self.batches[:-1]:
            if self.consumed[batch.stage] != self.dispatched[batch.stage]:
                break
            ready.append(batch)
        if not ready:
            return
        for batch in ready:
            for failed in prepare(self.conn, batch, self.options, self.stores.evidence):
                self._final(failed.index, failed.report)
        again: list[Staged] = []
        with self._store(wait) as attached:
            if not attached:
                return
            store = self.stores.store
            for batch in ready:
                done, changed = commit(self.conn, store, batch, self.options)
                self.batches.remove(batch)
                self.stores.drop_stage(batch.stage)
                for s in done:
                    self._final(s.index, s.report)
                again += changed
            self.known = Known.load(self.conn, store)
            self.stores.refresh_evidence()
        for s in again:
            self._restage(s)

    def _restage(self, old: Staged) -> None:
        """Parse again a file whose plan changed at commit (another ingest loaded its path meanwhile)."""
        if old.restaged >= RESTAGE_MAX:
            old.report.status = "failed"
            old.report.error = f"{old.path}: another ingest keeps changing what this path holds; ingest it again"
            self._final(old.index, old.report)
            return
        batch = self.batches[-1]
        self.dispatched[batch.stage] += 1
        result = stage_file(
            self.conn, self.stores, batch.stage, old.path, self.options, old.source_id, self.known, old.index
        )
        if isinstance(result, Staged):
            result.restaged = old.restaged + 1
        self._take(batch.stage, old.index, result)

    def _finish(self) -> None:
        while len(self.batches) > 1 or self.batches[-1].files:
            if self.batches[-1].files:
                self._open_batch()
            self._commit_ready(wait=True)
