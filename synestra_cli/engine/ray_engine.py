"""Ingest and explain on Ray: the same parsers and the same explain, in Ray actors, over a lake.

Ingest: the driver holds the lake's writer lock, reserves the source ids in file order and hands each
file to one of N actors (round robin). Each actor keeps a staging store (store/lake_writer.py, task
mode), loads its file there exactly as a local ingest would, writes the file's parts into the lake and
returns its report and manifest entry. The driver writes the entries in file order as they come back:
the one serial step (a small JSON file per source), so N workers scale the parsing and the Parquet
writing, not the commit. Each actor sees the lake as it was when the run began, plus its own files: a
job log whose cluster comes from an sacct export of the same run is qualified only when the sacct
export was ingested before (two runs), and two copies of one file in the same run both load.

Explain (tax-report --all): the jobs are cut into as many runs of consecutive jobs as there are
actors (more when a run would pass BATCH_JOBS), and each actor explains a run at once on its own lake
reader, narrowed to the run's partitions: the local report's batch (explain/batch.py), whose telemetry
read serves every job of the run. One job at a time, each actor read the same hosts' parts once per
job (the campus: 107.7 s, 6.8 GB read, against 21.1 s for the local report of the same lake). The
driver keeps the explanations in its reader's (in-memory) explanations table, so that the tax report
reuses them as it reuses kept explanations, and on the lake (jobs already kept there under the lake's
current key are not explained again).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb

from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.errors import UsageError
from synestra_cli.explain.batch import explain_batch
from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import FileReport, WalkIssue, ingest_file, iter_inputs
from synestra_cli.store.lake import narrow_to_jobs, open_reader
from synestra_cli.store.lake_fs import LocalFS
from synestra_cli.store.lake_manifest import Entry
from synestra_cli.store.lake_writer import LakeWriter

ReportFn = Callable[[FileReport], None]


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise UsageError("--engine ray needs Ray, which is not installed: pip install 'synestra[distributed]'") from exc
    return ray


def _start(ray: Any, workers: int) -> None:
    """A Ray cluster: $RAY_ADDRESS's when set, else a local one with `workers` CPUs."""
    if ray.is_initialized():
        return
    local = {} if os.environ.get("RAY_ADDRESS") else {"num_cpus": workers}
    ray.init(**local, include_dashboard=False, log_to_driver=False, configure_logging=False)


class _Loader:
    """One ingest worker: a staging store over the lake, one file at a time."""

    def __init__(self, target: str, options: IngestOptions, worker: int) -> None:
        self.writer = LakeWriter(target, task=True, worker=worker)  # its own block of new series ids
        self.options = options

    def load(self, path: str, source_id: int) -> tuple[FileReport, Entry | None]:
        report = ingest_file(self.writer.conn, Path(path), self.options, source_id)
        return report, self.writer.stage(report)


# Jobs explained by one actor at once, at most: a batch holds its jobs' telemetry samples in memory.
BATCH_JOBS = 96


class _Explainer:
    """One explain worker: a lake reader, narrowed to each run of jobs in turn."""

    def __init__(self, target: str) -> None:
        self.conn = open_reader(target)

    def explain(self, jobs: list[str]) -> list[JobExplanation]:
        narrow_to_jobs(self.conn, jobs)
        return explain_batch(self.conn, jobs)


def runs_of(jobs: list[str], actors: int) -> list[list[str]]:
    """The jobs (in order) cut into runs of consecutive jobs, a multiple of `actors` of them, each of
    at most BATCH_JOBS jobs and their sizes within one of each other."""
    if not jobs:
        return []
    n = max(actors, -(-len(jobs) // BATCH_JOBS))
    n = min(len(jobs), -(-n // actors) * actors)
    size, extra = divmod(len(jobs), n)
    cuts = [0, *itertools.accumulate(size + (k < extra) for k in range(n))]
    return [jobs[a:b] for a, b in itertools.pairwise(cuts)]


def ingest(
    target: str, paths: Iterable[Path], options: IngestOptions, workers: int, on_report: ReportFn | None = None
) -> list[FileReport]:
    """ingest_paths on Ray: one report per file (and per folder that could not be read), in order."""
    ray = _ray()
    writer = LakeWriter(target)
    try:
        skip = frozenset({Path(writer.fs.root)}) if isinstance(writer.fs, LocalFS) else frozenset()
        items = list(iter_inputs(paths, skip))
        ids = writer.reserve_ids(len(items))
        _start(ray, workers)
        actor = ray.remote(num_cpus=1)(_Loader)
        pool = [actor.remote(target, options, k) for k in range(max(1, workers))]
        pending = {
            i: pool[i % len(pool)].load.remote(str(item), ids[i])
            for i, item in enumerate(items)
            if not isinstance(item, WalkIssue)
        }
        reports = []
        for i, item in enumerate(items):
            if isinstance(item, WalkIssue):
                report = FileReport(path=str(item.path), status=item.status, error=item.error)
            else:
                report, entry = _get(ray, pending.pop(i))
                if entry is not None:
                    writer.write_entry(entry)  # in file order: the commit
            if on_report:
                on_report(report)
            reports.append(report)
        for a in pool:
            ray.kill(a)
        return reports
    finally:
        writer.close()


def explain_into(conn: duckdb.DuckDBPyConnection, target: str, job_ids: list[str], workers: int) -> int:
    """Explain on Ray the jobs not already kept on the lake under its current key, keep them in `conn`
    (a lake reader: the tax report that follows reuses them) and on the lake (the next report reuses
    them). How many were explained."""
    key = memo.store_key(conn)
    todo = [job for job in job_ids if job not in memo.load(conn, job_ids, key)]
    if not todo:
        return 0
    ray = _ray()
    _start(ray, workers)
    actor = ray.remote(num_cpus=1)(_Explainer)
    pool = [actor.remote(target) for _ in range(max(1, min(workers, len(todo))))]
    futures = [pool[i % len(pool)].explain.remote(run) for i, run in enumerate(runs_of(todo, len(pool)))]
    docs = [doc for f in futures for doc in _get(ray, f)]
    for a in pool:
        ray.kill(a)
    memo.save(conn, key, docs)
    memo.save_to(target, key, docs)
    return len(docs)


def _get(ray: Any, future: Any) -> Any:
    """A task's result; its own exception (a store that cannot be written, Ctrl-C) as itself."""
    try:
        return ray.get(future)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, BaseException):
            raise cause from None
        raise
