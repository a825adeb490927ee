"""The store's one door: `open_store(db)` names a store file or a lake, and what is asked of either goes
through the `Store` it returns. Nothing above store/ tells the two apart: a command asks the store to
narrow itself to a job, to check, compact or forget, to take an ingest, or to keep explanations, and the
store does it its own way (a file in its tables and transactions; a lake in Parquet parts and manifest
entries: store/lake*.py, docs/lake.md).

`with open_store(db, read_only=True) as conn:` is still how a reader gets a DuckDB connection: the store
is a context manager that opens one connection per `with` and closes it after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal

import duckdb

from synestra_cli.errors import EmptyStoreError
from synestra_cli.store.connect import connect, may_be_lake, migrate, resolve_db_path

if TYPE_CHECKING:
    from synestra_cli.store.check import CheckReport

Db = str | Path | None
COMPACT_SCHEMA = "synestra.compact/1"
Forgotten = tuple[list[tuple[int, str, str, int]], int]  # (source_id, path, format, rows) each, rows in all
KeyOf = Callable[[int, int], str]  # (sources, last source id) -> the key kept results are filed under


@dataclass(frozen=True)
class Compacted:
    """What `compact` did: parts merged into parts written (a lake), or the migrations applied (a file)."""

    merged: int = 0
    written: int = 0
    partitions: int = 0
    deleted: int = 0
    checkpoint: str | None = None
    migrated: list[str] | None = None  # a store file: the migrations applied (None on a lake)

    def to_json(self) -> dict[str, object]:
        """The `synestra.compact/1` document (docs/outputs.md): `migrated` on a store file only."""
        doc: dict[str, object] = {"schema": COMPACT_SCHEMA, "lake": self.migrated is None}
        doc.update(
            merged=self.merged,
            written=self.written,
            partitions=self.partitions,
            deleted=self.deleted,
            checkpoint=self.checkpoint,
        )
        if self.migrated is not None:
            doc["migrated"] = self.migrated
        return doc


@dataclass
class Store:
    """A store file or a lake (`open_store`), and what may be asked of it."""

    db: Db
    read_only: bool = False
    locked: bool = False
    long_migrations: bool = True
    _open: list[duckdb.DuckDBPyConnection] = field(default_factory=list, repr=False)

    # --- reading and writing ---------------------------------------------------------------------------

    def __enter__(self) -> duckdb.DuckDBPyConnection:
        conn = connect(self.db, read_only=self.read_only, locked=self.locked, long_migrations=self.long_migrations)
        self._open.append(conn)
        return conn

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._open.pop().close()

    @property
    def _lake(self) -> str | None:
        if not may_be_lake(self.db):  # a store file surely: store/lake.py is not imported (start-up time)
            return None
        from synestra_cli.store.lake import lake_target

        return lake_target(self.db)

    @property
    def kind(self) -> Literal["file", "lake"]:
        return "lake" if self._lake else "file"

    @property
    def shared_writes(self) -> bool:
        """False for a store file, which one process writes at a time (`ingest --follow`, Ray workers)."""
        return self._lake is not None

    def prepare_ingest(self, wait_s: float | None = None) -> None:
        """Before an ingest's first file: a store file's missing migrations (waiting `wait_s` for readers;
        a long one reports to synestra_cli.progress). A lake's writer takes its lock when it opens."""
        if self._lake is None:
            migrate(self.db, wait_s=wait_s)

    @contextmanager
    def ingest_target(
        self, on_report: Callable[..., None] | None
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection | Path, Callable[..., None] | None]]:
        """What `ingest_paths` writes to and the report callback to give it. A store file: its path (it is
        attached only for each batch's commit, so readers get in between); a lake: a staging store whose
        callback commits each loaded file to the lake (store/lake_writer.py)."""
        if self._lake is None:
            yield resolve_db_path(self.db), on_report
            return
        from synestra_cli.store.lake_writer import ingest_target

        with ingest_target(self.db, on_report) as target:
            yield target

    def narrow_to_jobs(self, conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> None:
        """Read only these jobs' partitions from now on (a lake; a store file reads its own indexes)."""
        if self._lake is not None:
            from synestra_cli.store.lake import narrow_to_job, narrow_to_jobs

            narrow_to_job(conn, job_ids[0]) if len(job_ids) == 1 else narrow_to_jobs(conn, job_ids)

    # --- upkeep ------------------------------------------------------------------------------------------

    def check(self) -> CheckReport:
        """Every block (a file) or every part against its manifest entry (a lake): store/check.py."""
        from synestra_cli.store.check import check_file, check_lake

        if (target := self._lake) is not None:
            return check_lake(target)
        with Store(self.db, read_only=True) as conn:
            return check_file(conn, str(resolve_db_path(self.db)))

    def compact(self, retain: int | None = None) -> Compacted:
        """A lake: small parts merged, retired parts older than `retain` s deleted. A store file: the
        migrations it lacks (a long one's progress goes to synestra_cli.progress)."""
        if (target := self._lake) is None:
            return Compacted(migrated=migrate(self.db))
        from synestra_cli.store.lake_upkeep import compact

        done = compact(target, retain)
        return Compacted(done.merged, done.written, done.partitions, done.deleted, done.checkpoint)

    def forget(self, refs: list[str]) -> Forgotten:
        """The sources refs name (ids or paths) and every row they wrote, removed at once."""
        if (target := self._lake) is not None:
            from synestra_cli.store.lake_upkeep import forget as forget_on_lake

            return forget_on_lake(target, refs)
        from synestra_cli.store.sources import forget

        path = resolve_db_path(self.db)
        if not path.exists():
            raise EmptyStoreError(f"no store at {path}: nothing to forget (pass --db?)")
        with Store(path, long_migrations=False) as conn:  # an older store's samples are rewritten by ingest
            return forget(conn, refs)

    # --- kept results (accounting/kept/) -------------------------------------------------------------------

    def keeps_beside(self) -> bool:
        """True when kept results go beside the data (a lake's objects) rather than in a writer's tables."""
        return self._lake is not None

    def keep_beside(self, key: str, docs: list[tuple[str, str]], key_of: KeyOf) -> int:
        """Keep (job, JSON document) pairs under `key` beside a lake's parts (store/lake_kept.py)."""
        from synestra_cli.store import lake_kept

        target = self._lake
        assert target is not None, "keep_beside is for a store that keeps_beside()"
        return lake_kept.keep(target, key, docs, key_of)


def open_store(db: Db = None, *, read_only: bool = False, locked: bool = False, long_migrations: bool = True) -> Store:
    """The store `db` (else $SYNESTRA_DB, else ./synestra.duckdb) names: a file or a lake. Opening it
    (`with`) creates and migrates a store file if needed; a lake opens read-only (only ingest writes it).
    `locked`: `synestra sql`'s sandbox. `long_migrations` False: a migration that rewrites the samples
    (023) waits for the next ingest or `compact`."""
    return Store(db, read_only=read_only, locked=locked, long_migrations=long_migrations)


def load_kept_beside(conn: duckdb.DuckDBPyConnection, key: str) -> None:
    """On a reader of a store that keeps results beside its data, those kept under `key` into its
    `explanations` table (once per key); nothing on a store file's connection, which holds them."""
    from synestra_cli.store.session import is_lake_reader

    if is_lake_reader(conn):
        from synestra_cli.store import lake_kept

        lake_kept.load_kept(conn, key)
