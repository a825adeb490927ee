"""Every failure of one file turned into its report: the file fails alone, the run goes on.

But a Ctrl-C, a stop, a malformed setting and a store that cannot be written: those end the run. A
catalog row another file's transaction wrote first is retried (ingest/parse.py calls `guarded`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import duckdb

from synestra_cli.errors import (
    SettingsError,
    StoreWriteError,
    SynestraError,
    is_interrupt,
    is_out_of_memory,
    out_of_memory_message,
    raise_if_stopped,
)
from synestra_cli.ingest.report import FileReport
from synestra_cli.ingest.staging import Stores
from synestra_cli.store.connect import is_store_write_failure

CONFLICT_RETRIES = 5  # each round of colliding files commits at least one: enough for 4 workers
R = TypeVar("R")


def guarded(stores: Stores, path: Path, report: FileReport, fn: Callable[[], R]) -> R | FileReport:
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
