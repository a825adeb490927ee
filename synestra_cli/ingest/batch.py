"""A batch of staged files: checked in the stage (no store needed), then committed in one short
transaction of the store, every file whole or not at all.

prepare(): the checks of store/checks.py over the whole batch, each file's verdict (--strict, nothing
readable), the sources' spans and their `sources` / `rejects` rows: one statement per table for the
batch, not per file. commit() (the store attached): each file's plan checked against the store as it
is now (SKIP: another ingest loaded it meanwhile; a changed plan: parse it again), the jobs' cluster,
the replaced sources deleted and the stage's rows appended, then the stage dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from synestra_cli.errors import InputError, out_of_memory_message
from synestra_cli.formats.base import Format, IngestOptions, LoadResult
from synestra_cli.ingest.plan import SKIP, Known, Plan, Source, decide, waits_for_pending
from synestra_cli.ingest.report import FileReport
from synestra_cli.ingest.resume import chain_duplicates
from synestra_cli.query.clusters import other_form_notes, qualify_batch
from synestra_cli.store.checks import CheckResult, check_sources
from synestra_cli.store.series import copy_by_series, has_series_layout
from synestra_cli.store.sources import SourcedTable, delete_sources, qualified
from synestra_cli.store.sql import quote_ident, scalar, transaction
from synestra_cli.store.summaries import (
    DERIVED_TABLES,
    copy_stage_summaries,
    repeatable_sources,
    summarise_sources,
    summarise_stage,
)

MAX_HOSTS_LISTED = 1000
SHARED_TABLES = ("metric_catalog",)  # rows every source may add once (ON CONFLICT DO NOTHING)

SPAN_SQL = """
WITH t AS (
    SELECT source_id, ts, host FROM {c}.events WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, ts, host FROM {c}.metrics WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, ts, NULL FROM {c}.steps WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, start_ts, NULL FROM {c}.checkpoints WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, ts, NULL FROM {c}.job_incidents WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, start_ts, NULL FROM {c}.attempts WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, end_ts, NULL FROM {c}.attempts WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, NULL, host FROM {c}.topology WHERE list_contains($ids, source_id)
    UNION ALL SELECT source_id, NULL, host FROM {c}.job_nodes WHERE list_contains($ids, source_id)
)
SELECT source_id, min(ts), max(ts), list(DISTINCT host ORDER BY host) FILTER (WHERE host IS NOT NULL)
FROM t GROUP BY source_id
"""
# The batch's sources and rejects, each one statement over an Arrow table (executemany is a statement a row).
SOURCE_COLUMNS = pa.schema(
    [
        ("source_id", pa.int32()),
        ("path", pa.string()),
        ("sha256", pa.string()),
        ("format", pa.string()),
        ("bytes", pa.int64()),
        ("rows", pa.int64()),
        ("rejected", pa.int64()),
        ("first_ts", pa.timestamp("us")),
        ("last_ts", pa.timestamp("us")),
        ("hosts", pa.list_(pa.string())),
        ("options", pa.string()),
        ("offset_bytes", pa.int64()),
        ("first_line", pa.int64()),
        ("source_key", pa.string()),
    ]
)
REJECT_COLUMNS = pa.schema(
    [("source_id", pa.int32()), ("line", pa.int64()), ("reason", pa.string()), ("text", pa.string())]
)
INSERT_ROWS_SQL = "INSERT INTO {c}.{table} BY NAME SELECT * FROM _bookkeeping_rows"
# Tables of the stage that hold rows (after a batch's checks): only those are copied.
FILLED_SQL = "SELECT table_name FROM duckdb_tables() WHERE database_name = $stage AND estimated_size > 0"


@dataclass
class Staged:
    """A file parsed into a stage, waiting for its batch's commit."""

    index: int  # in the ingest's inputs
    source_id: int
    path: Path
    fmt: Format
    codec: str | None
    plan: Plan
    result: LoadResult
    options: str  # the keyed options its parser read (JSON)
    report: FileReport
    restaged: int = 0  # times its plan changed at commit and it was parsed again

    @property
    def input_bytes(self) -> int:
        return self.plan.digest.size - self.plan.offset


@dataclass
class Batch:
    stage: str
    tables: list[SourcedTable]  # the stage's sourced tables
    files: list[Staged] = field(default_factory=list)
    prepared: bool = False
    summarised: bool = False  # its metrics' summaries are in its stage (store/summaries.py summarise_stage)
    input_bytes: int = 0  # of its files, kept as they come: ingest measures the batch after every file

    @property
    def schema(self) -> str:
        """Its stage's tables' schema, as SQL (`"_stage1".main`)."""
        return f"{quote_ident(self.stage)}.main"

    def add(self, staged: Staged) -> None:
        self.files.append(staged)
        self.input_bytes += staged.input_bytes


def prepare(conn: duckdb.DuckDBPyConnection, batch: Batch, options: IngestOptions, evidence: str) -> list[Staged]:
    """Checks, verdicts, bookkeeping rows and summaries of the batch, in its stage (the store is not needed;
    `evidence` prefixes what the stage sees of it: ingest/staging.py). Returns the files that failed, or
    were skipped as copies of another (removed from the batch)."""
    if batch.prepared or not batch.files:
        batch.prepared = True
        return []
    # Summarised first: the summaries tell which files could hold a duplicate sample, the costliest check.
    # A row a check deletes then leaves them stale, and the commit summarises from the store instead.
    batch.summarised = summarise_stage(conn, batch.schema, evidence)
    checks, failed = _checks(conn, batch, repeatable_sources(conn, batch.schema) if batch.summarised else None)
    seen, ran_out = set(), {s.source_id for s in failed}
    for s in batch.files:
        if s.source_id in ran_out:
            continue
        key = (s.plan.digest.sha, s.fmt.name, s.options)
        if key in seen:  # a copy of a file before it in the batch (parsed at once, in two threads)
            s.report.status, s.report.error = "skipped", "already in the store (same content)"
            failed.append(s)
            continue
        seen.add(key)
        checked = checks.get(s.source_id)
        if checked:
            _apply(s.result, checked)
        error = _refusal(s, options)
        if error:
            s.report.status, s.report.error = "failed", error
            failed.append(s)
    _drop(conn, batch, failed)
    if batch.files:
        _bookkeeping(conn, batch)
    batch.prepared = True
    return failed


def _checks(
    conn: duckdb.DuckDBPyConnection, batch: Batch, repeatable: set[int] | None
) -> tuple[dict[int, CheckResult], list[Staged]]:
    """check_sources over the batch at once (`repeatable`: the files whose samples could hold a duplicate,
    None: any), in one transaction of its stage. Out of memory (a big batch under a small
    SYNESTRA_MEMORY_LIMIT) rolls it back, and each file is checked alone: every check is per source, so
    the verdicts are the same. A file that alone runs out fails, with the limit to raise, and the others
    go on (its rows are dropped with the batch's failures)."""
    ids = [s.source_id for s in batch.files]
    try:
        with transaction(conn):
            return dict(check_sources(conn, ids, batch.stage, batch.tables, repeatable)), []
    except duckdb.OutOfMemoryException:
        pass
    checks: dict[int, CheckResult] = {}
    failed = []
    for s in batch.files:
        try:
            with transaction(conn):
                checks |= check_sources(conn, [s.source_id], batch.stage, batch.tables, repeatable)
        except duckdb.OutOfMemoryException as exc:
            s.report.status = "failed"
            s.report.error = f"{s.path}: its checks {out_of_memory_message(exc)}, then ingest again"
            failed.append(s)
    return checks, failed


def _apply(result: LoadResult, checked: CheckResult) -> None:
    result.rows = max(0, result.rows - checked.deleted)
    for line, reason, text in checked.rejects:
        result.reject(line, reason, text)
    result.rejected += checked.rejected - len(checked.rejects)
    result.notes += checked.notes


def _refusal(s: Staged, options: IngestOptions) -> str | None:
    result, path, name = s.result, s.path, s.fmt.name
    if options.strict and result.rejected:
        line, reason, _ = result.reject_samples[0]
        where = f"{path}:{line}" if line is not None else str(path)
        return str(InputError(f"{where}: {reason} ({result.rejected} rejected lines; --strict)"))
    if result.rejected and not result.rows:
        line, reason, _ = result.reject_samples[0] if result.reject_samples else (None, "rejected", "")
        hint = "" if not options.format else f"; is it really {name}? (--input-format forced it)"
        first = f"the first at line {line}" if line is not None else "the first"
        return str(
            InputError(
                f"{path}: nothing could be read as {name}: all {result.rejected} line(s) "
                f"rejected, {first}: {reason}{hint}"
            )
        )
    return None


def _drop(conn: duckdb.DuckDBPyConnection, batch: Batch, files: list[Staged]) -> None:
    """Remove these files from the batch and their rows from its stage."""
    if not files:
        return
    delete_sources(conn, [s.source_id for s in files], batch.stage, batch.tables)
    gone = {s.source_id for s in files}
    batch.files = [s for s in batch.files if s.source_id not in gone]
    batch.input_bytes = sum(s.input_bytes for s in batch.files)


def _bookkeeping(conn: duckdb.DuckDBPyConnection, batch: Batch) -> None:
    stage = batch.schema
    ids = [s.source_id for s in batch.files]
    spans = {sid: rest for sid, *rest in conn.execute(SPAN_SQL.format(c=stage), {"ids": ids}).fetchall()}
    rejects, sources = [], []
    for s in batch.files:
        first, last, hosts = spans.get(s.source_id, (None, None, None))
        hosts = (hosts or [])[:MAX_HOSTS_LISTED]
        r, plan = s.result, s.plan
        rejects += [(s.source_id, line, reason, text) for line, reason, text in r.reject_samples]
        sources.append(
            (
                s.source_id,
                str(s.path.resolve()),
                plan.digest.sha,
                s.fmt.name,
                plan.digest.size,
                r.rows,
                r.rejected,
                first,
                last,
                hosts,
                s.options,
                plan.offset,
                plan.first_line,
                f"{plan.digest.sha}|{s.fmt.name}|{s.options}",
            )
        )
        rep = s.report
        rep.rows, rep.rejected = r.rows, r.rejected
        rep.first_ts, rep.last_ts, rep.hosts = first, last, hosts
        rep.reject_samples = r.reject_samples
    if rejects:
        _insert_rows(conn, stage, "rejects", REJECT_COLUMNS, rejects)
    _insert_rows(conn, stage, "sources", SOURCE_COLUMNS, sources)


def _insert_rows(
    conn: duckdb.DuckDBPyConnection, stage: str, table: str, schema: pa.Schema, rows: Sequence[tuple[Any, ...]]
) -> None:
    columns = [pa.array(col, f.type) for col, f in zip(zip(*rows, strict=True), schema, strict=True)]
    _bookkeeping_rows = pa.table(columns, schema=schema)  # noqa: F841 - read by DuckDB's replacement scan
    conn.execute(INSERT_ROWS_SQL.format(c=stage, table=table))


def commit(
    conn: duckdb.DuckDBPyConnection, store: str, batch: Batch, options: IngestOptions
) -> tuple[list[Staged], list[Staged]]:
    """Commit the batch into `store` (attached). Returns (the files committed, or skipped because the
    store holds them by now; those whose plan changed since they were parsed: to parse again)."""
    known = Known.load(conn, store)
    done, again = [], []
    chains: list[tuple[int, list[int]]] = []  # a grown file's new lines and the sources they continue
    for s in list(batch.files):
        try:
            plan = decide(known, s.path, s.fmt, options, s.codec, s.plan.digest)
        except LookupError:  # its latest earlier source is another one now: digest and parse again
            again.append(s)
            continue
        if plan is SKIP:
            s.report.status, s.report.error = "skipped", "already in the store (same content)"
            s.report.rows = s.report.rejected = 0
            done.append(s)
        elif not plan.same_load(s.plan) or waits_for_pending(known, plan):
            again.append(s)
        else:
            s.plan.notes = plan.notes
            if plan.grows is not None and "metrics" in s.fmt.writes:
                chains.append(
                    (s.source_id, [e.source_id for e in known.earlier(str(s.path.resolve()), s.fmt.name, options)])
                )
            digest = plan.digest
            known.add(Source(s.source_id, str(s.path.resolve()), digest.sha, s.fmt.name, digest.size, s.options), True)
    _drop(conn, batch, done + again)
    kept = {s.source_id for s in batch.files}
    _check_chains(conn, store, batch, [c for c in chains if c[0] in kept])
    filled = _copy(conn, store, batch, options) if batch.files else set()
    if batch.files:  # summaries are of metrics only; a batch without any still lists its sources
        _summarise(conn, store, batch, "metrics" in filled)
    mixed = other_form_notes(conn, store, [s.source_id for s in batch.files], options.cluster)
    for s in batch.files:
        rep = s.report
        rep.status, rep.source_id, rep.replaced = "loaded", s.source_id, s.plan.replaces
        rep.notes = s.plan.notes + s.result.notes + mixed.get(s.source_id, [])
    return batch.files + done, again


def _check_chains(
    conn: duckdb.DuckDBPyConnection, store: str, batch: Batch, chains: list[tuple[int, list[int]]]
) -> None:
    """A grown file's new samples that repeat its earlier lines' go as in one source (ingest/resume.py);
    its `sources` row and report say so."""
    checked = chain_duplicates(conn, batch.stage, store, chains)
    stage = batch.schema
    for s in batch.files:
        found = checked.get(s.source_id)
        if not found:
            continue
        _apply(s.result, found)
        r, rep = s.result, s.report
        conn.execute(
            f"UPDATE {stage}.sources SET rows = ?, rejected = ? WHERE source_id = ?", [r.rows, r.rejected, s.source_id]
        )
        if found.rejects:
            _insert_rows(conn, stage, "rejects", REJECT_COLUMNS, [(s.source_id, *x) for x in found.rejects])
        rep.rows, rep.rejected, rep.reject_samples = r.rows, r.rejected, r.reject_samples


def _copy(conn: duckdb.DuckDBPyConnection, store: str, batch: Batch, options: IngestOptions) -> set[str]:
    """Append the stage's rows to the store (its summaries apart: _summarise), in one transaction; returns
    the tables that had rows."""
    stage = batch.stage
    qualify_batch(conn, stage, store, [(s.source_id, s.fmt.name) for s in batch.files], options.cluster)
    filled = {name for (name,) in conn.execute(FILLED_SQL, {"stage": stage}).fetchall()}
    tables = [
        t.name for t in batch.tables if (t.name in filled or t.name == "sources") and t.name not in DERIVED_TABLES
    ]
    replaced = sorted({sid for s in batch.files for sid in s.plan.replaces})
    by_series = "metrics" in tables and has_series_layout(conn, store)
    with transaction(conn):
        delete_sources(conn, replaced, store)
        for name in tables:
            if name == "metrics" and by_series:  # numbered and in series order (store/series.py)
                copy_by_series(conn, qualified(stage, name), qualified(store, "series"), qualified(store, name))
                continue
            conn.execute(f"INSERT INTO {qualified(store, name)} BY NAME SELECT * FROM {qualified(stage, name)}")
        for name in SHARED_TABLES:
            if name in filled:
                conn.execute(
                    f"INSERT OR IGNORE INTO {qualified(store, name)} BY NAME SELECT * FROM {qualified(stage, name)}"
                )
    return filled


def _summarise(conn: duckdb.DuckDBPyConnection, store: str, batch: Batch, telemetry: bool) -> None:
    """The committed files' hourly summaries (store/summaries.py), in a transaction after the batch's: those
    computed in its stage when they still hold, else from the store. A source left without one (a crash in
    between) is read raw, with the same answers."""
    ids = [s.source_id for s in batch.files]
    ranged = not has_series_layout(conn, store)  # rows in series order are not where the stage had them
    if batch.summarised and copy_stage_summaries(conn, batch.schema, f"{quote_ident(store)}.main", ids, ranged):
        return
    home = scalar(conn, "SELECT current_database()")
    conn.execute(f"USE {quote_ident(store)}")
    try:
        summarise_sources(conn, ids, telemetry)
    finally:
        conn.execute(f"USE {quote_ident(home)}")
