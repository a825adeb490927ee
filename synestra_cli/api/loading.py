"""`synestra ingest`: load exports into the store (a file or a lake), then optionally explain every job;
`ingest --follow`: the poll loop's follower."""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synestra_cli.api._frames import Db, LongSteps, frame
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import FileReport, ProgressFn, ReportFn, ingest_paths
from synestra_cli.ingest.follow import Follower
from synestra_cli.query.clusters import check_name as check_cluster_name
from synestra_cli.store import open_store

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FileReport",
    "Follower",
    "IngestOptions",
    "IngestResult",
    "LongSteps",
    "check_cluster_name",
    "follower",
    "ingest",
]

INGEST_SCHEMA = "synestra.ingest/1"
FILE_COLUMNS = ["path", "status", "format", "rows", "rejected", "first_ts", "last_ts", "hosts", "error"]


@dataclass(frozen=True)
class IngestResult:
    reports: list[FileReport]  # one per file, in the order given
    explained: int | None = None  # jobs explained and kept (explain=True), else None

    @property
    def loaded(self) -> list[FileReport]:
        return [r for r in self.reports if r.status == "loaded"]

    @property
    def failed(self) -> list[FileReport]:
        return [r for r in self.reports if r.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        """The `synestra.ingest/1` document `synestra ingest --format json` prints."""
        return {"schema": INGEST_SCHEMA, "files": [asdict(r) for r in self.reports]}

    def to_pandas(self) -> pd.DataFrame:
        """One row per file: status, format, rows, rejects, time span, hosts, error."""
        return frame([asdict(r) for r in self.reports], FILE_COLUMNS)


def ingest(
    paths: Iterable[str | Path],
    db: Db = None,
    *,
    options: IngestOptions | None = None,
    explain: bool = False,
    engine: str = "local",
    on_file: ProgressFn | None = None,
    on_report: ReportFn | None = None,
    long_steps: LongSteps = nullcontext,
) -> IngestResult:
    """Load files or folders into the store, as `synestra ingest` does: a bad file is reported in its
    FileReport, never raised. A store file is attached only for each batch's commit (readers get in
    between); a lake takes each loaded file as one commit. `engine`: "local", or "ray[://ADDRESS]" to
    load a lake from Ray workers (engine/). With explain=True, then explain and keep every job
    (`--explain`). `on_file(path, i, n)` and `on_report(report)` are called as files go."""
    files, options, store = [Path(p) for p in paths], options or IngestOptions(), open_store(db)
    if engine != "local":
        from synestra_cli.engine import ingest_on

        reports = ingest_on(engine, db, files, options, on_report=on_report)
    else:
        from synestra_cli.ingest.staging import commit_wait_s

        with long_steps():
            store.prepare_ingest(wait_s=commit_wait_s())  # waits for readers as long as a commit would
        with store.ingest_target(on_report) as (target, report_to):
            reports = ingest_paths(target, files, options, on_file=on_file, on_report=report_to)
    explained = _explain_all(db, long_steps) if explain else None
    return IngestResult(reports, explained)


def _explain_all(db: Db, long_steps: LongSteps) -> int:
    """Every job explained and kept for tax-report (0: the store holds no job yet). A store file is opened
    for writing (kept in its tables); a store that keeps results beside its data is read (store/door.py)."""
    from synestra_cli.accounting.kept import explanations
    from synestra_cli.errors import EmptyStoreError

    beside = open_store(db).keeps_beside()  # a lake is only read: its results go beside its parts
    try:
        with open_store(db, read_only=beside) as conn, long_steps():
            return explanations.keep_all(conn, db)
    except EmptyStoreError:
        return 0


def follower(db: Db, paths: list[Path], options: IngestOptions | None = None) -> Follower:
    """`ingest --follow`'s poller (ingest/follow.py): `run(interval, max_polls, ...)` yields each poll.
    A store file on this machine only: a lake takes its files from one `ingest` at a time."""
    from synestra_cli.errors import UsageError

    if open_store(db).shared_writes:
        raise UsageError("--follow loads into a store file (--db FILE) on this machine, not a lake or --engine")
    return Follower(db, paths, options or IngestOptions())
