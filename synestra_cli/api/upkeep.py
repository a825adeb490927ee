"""The store's upkeep and inspection: `check`, `compact`, `forget`, `sources` and `sql`. A store file or a
lake alike: each asks the store (store/door.py), which does it its own way."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from synestra_cli.api._frames import Db, Table
from synestra_cli.query.inspect import SOURCE_COLUMNS, list_sources, stream_sql
from synestra_cli.store import open_store
from synestra_cli.store.check import CheckReport
from synestra_cli.store.door import Compacted

__all__ = [
    "CheckReport",
    "Compacted",
    "ForgetResult",
    "check",
    "compact",
    "forget",
    "hold_process_to_budget",
    "query",
    "sources",
]

SOURCES_SCHEMA = "synestra.sources/1"
FORGET_SCHEMA = "synestra.forget/1"


def check(db: Db = None) -> CheckReport:
    """Every block of a store file, or every part of a lake against its manifest entry (`synestra check`)."""
    return open_store(db).check()


def compact(db: Db = None, retain: int | None = None) -> Compacted:
    """A lake's small parts merged and retired parts older than `retain` s deleted; a store file's missing
    migrations applied (`synestra compact`)."""
    return open_store(db).compact(retain)


@dataclass(frozen=True)
class ForgetResult:
    removed: list[tuple[int, str, str, int]]  # (source_id, path, format, rows) of each source forgotten
    rows: int  # rows removed in all

    @property
    def records(self) -> list[dict[str, Any]]:
        return [{"source_id": s, "path": p, "format": f, "rows": n} for s, p, f, n in self.removed]

    def to_json(self) -> dict[str, Any]:
        """The `synestra.forget/1` document (docs/formats.md)."""
        return {"schema": FORGET_SCHEMA, "rows": self.rows, "sources": self.records}


def forget(refs: Sequence[str], db: Db = None) -> ForgetResult:
    """The sources refs name (ids or paths) and every row they wrote, removed at once (`synestra forget`)."""
    return ForgetResult(*open_store(db).forget(list(refs)))


def sources(db: Db = None) -> Table:
    """Every source loaded: its path, format, rows, rejects, time span and hosts (`synestra sources`)."""
    with open_store(db, read_only=True) as conn:
        return Table(SOURCES_SCHEMA, "sources", SOURCE_COLUMNS, list_sources(conn))


@contextmanager
def query(sql: str, db: Db = None) -> Iterator[tuple[list[str], Iterator[Any]]]:
    """`synestra sql`: the query's columns and its rows as Arrow record batches, streamed while this block
    is open. The query reads the store and nothing else (no file, network, extension or setting)."""
    with open_store(db, locked=True) as conn:
        yield stream_sql(conn, sql)


def hold_process_to_budget() -> None:
    """Hold this process's data to the store's memory budget (SYNESTRA_MEMORY_LIMIT): for `synestra sql`,
    anyone's query, so that one huge value DuckDB allocates outside its pool is an out-of-memory error
    (exit 10), not twice the budget. For a process of its own only: it lowers the process's limit."""
    from synestra_cli import settings
    from synestra_cli.store.session import MEMORY_LIMIT

    settings.bound_process_data(settings.memory_budget_bytes(MEMORY_LIMIT))
