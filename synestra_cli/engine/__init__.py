"""Where ingest and the fleet's explanations run: `local` (this process, a few threads: today's
behaviour) or `ray` (Ray tasks, on this machine or a Ray cluster: docs/lake.md says why Ray). A
distributed run needs a lake (store/lake.py): workers write their files' parts into it, and a store
file has one writer."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from synestra_cli.errors import UsageError
from synestra_cli.store.lake import lake_target
from synestra_cli.store.parallel import default_workers

if TYPE_CHECKING:
    import duckdb

    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import FileReport

ENGINES = ("local", "ray")


def _lake(engine: str, db: str | Path | None) -> str:
    target = lake_target(db)
    if engine not in ENGINES:
        raise UsageError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
    if target is None:
        raise UsageError(f"--engine {engine} works on a lake: give --db a folder or an s3:// URL (docs/lake.md)")
    return target


def ingest_on(
    engine: str,
    db: str | Path | None,
    paths: Iterable[Path],
    options: IngestOptions,
    on_report: Callable[[FileReport], None] | None = None,
) -> list[FileReport]:
    """Ingest into the lake `db` names on `engine`, $SYNESTRA_INGEST_WORKERS workers (default: cores, up to 4)."""
    from synestra_cli.engine import ray_engine

    target = _lake(engine, db)
    return ray_engine.ingest(target, paths, options, default_workers("SYNESTRA_INGEST_WORKERS"), on_report)


def explain_on(engine: str, conn: duckdb.DuckDBPyConnection, db: str | Path | None, job_ids: list[str]) -> int:
    """Explain these jobs on `engine` ($SYNESTRA_WORKERS workers) and keep them in `conn`, the lake's reader."""
    from synestra_cli.engine import ray_engine

    target = _lake(engine, db)
    return ray_engine.explain_into(conn, target, job_ids, default_workers("SYNESTRA_WORKERS"))
