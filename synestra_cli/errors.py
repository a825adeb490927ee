"""Domain errors and the exit codes they map to (a documented API: see docs/exit-codes in README)."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum
from typing import NoReturn


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1  # unexpected failure (a bug: please report)
    USAGE = 2  # bad command line (click's own code)
    INPUT = 3  # some input could not be ingested (unknown format, unreadable, rejects with --strict)
    STORE_BUSY = 4  # another synestra process holds the store's write lock
    NOT_FOUND = 5  # the job / checkpoint asked for is not in the store
    EMPTY_STORE = 6  # the store holds no data of the kind the command needs
    THRESHOLD = 7  # tax-report --fail-over: a job's tax exceeded the threshold
    STORE = 8  # the store cannot be opened, read or written: not a store, read-only, corrupt, newer, disk full
    QUERY = 9  # `synestra sql`: the query failed (syntax, unknown table, or refused: the store is read-only)
    MEMORY = 10  # ran out of memory (SYNESTRA_MEMORY_LIMIT): the store is left whole; more memory, or fewer workers
    INTERRUPTED = 130  # Ctrl-C (128 + SIGINT, as shells report it); the store is left as it was
    TERMINATED = 143  # SIGTERM (128 + 15), e.g. `systemctl stop` of an `ingest --follow`; as for Ctrl-C


class SynestraError(Exception):
    """Base class: every error a user can cause. The message says how to fix it."""

    exit_code: ExitCode = ExitCode.ERROR


class InputError(SynestraError):
    exit_code = ExitCode.INPUT


class UnknownFormatError(InputError):
    pass


class StoreBusyError(SynestraError):
    exit_code = ExitCode.STORE_BUSY


class StoreError(SynestraError):
    """The store itself is unusable: not a store, corrupt or truncated, newer schema, cannot be written."""

    exit_code = ExitCode.STORE


class StoreWriteError(StoreError):
    """A write to the store failed (disk full, quota, read-only file system): nothing more can be loaded."""


class QueryError(SynestraError):
    exit_code = ExitCode.QUERY


class UsageError(SynestraError):
    """A command line that cannot run as given (an option's value, or what it needs: Ray for --engine ray)."""

    exit_code = ExitCode.USAGE


class SettingsError(UsageError):
    """A malformed SYNESTRA_* variable or option value: a usage error."""


class OutOfMemoryError(SynestraError):
    """DuckDB (or Python) needed more than SYNESTRA_MEMORY_LIMIT allows: the limit's fault, not a bug."""

    exit_code = ExitCode.MEMORY


class NotFoundError(SynestraError):
    exit_code = ExitCode.NOT_FOUND


class EmptyStoreError(SynestraError):
    exit_code = ExitCode.EMPTY_STORE


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C would be (a KeyboardInterrupt: every loop that re-raises Ctrl-C
    re-raises it), so that the file being loaded is rolled back the same way; exit 143.
    `received`: set by the signal handler (raised inside a query, it may surface as DuckDB's interrupt)."""

    received = False


# The stop a signal handler asked for (request_stop): KeyboardInterrupt (Ctrl-C) or Terminated (SIGTERM).
_stop: type[KeyboardInterrupt] | None = None


def request_stop(kind: type[KeyboardInterrupt]) -> NoReturn:
    """A signal handler's body: remember the stop, then raise it. Remembered, because a handler runs
    inside whatever Python code the main thread is in, and that may be code a library runs for us that
    wraps the exception in its own error: DuckDB 2 asks its Arrow scan's Python object whether it takes
    a filter, and reports a KeyboardInterrupt raised there as "offering a filter ... failed: Terminated".
    Taken as that file's failure, the stop was lost and `ingest --follow` ran on. Every place that turns
    an error into a file's failure calls raise_if_stopped() first."""
    global _stop
    _stop = kind
    if kind is Terminated:
        Terminated.received = True
    raise kind()


def forget_stop() -> None:
    """The stop has been acted on (the command ended): a later run in this process starts clean."""
    global _stop
    _stop = None


def raise_if_stopped(cause: BaseException | None = None) -> None:
    """Raise the stop a signal asked for (request_stop) again, if one did: `cause` is the error it became."""
    if _stop is not None:
        raise _stop() from cause


# What to do when DuckDB runs out of the memory it was given (store/connect.py session_limits).
MEMORY_ADVICE = "raise SYNESTRA_MEMORY_LIMIT (for example 4GB), or run fewer workers (SYNESTRA_INGEST_WORKERS=1)"


def out_of_memory_message(exc: BaseException) -> str:
    """What an out-of-memory says, for a file or a command: DuckDB's first line (the lines after it are
    DuckDB's own advice, about settings a user cannot reach) and what to do."""
    lines = str(exc).strip().splitlines()
    return f"ran out of memory ({lines[0] if lines else type(exc).__name__}): {MEMORY_ADVICE}"


def in_chain(exc: BaseException, test: Callable[[BaseException], bool]) -> bool:
    """Whether `exc` or any error it was raised from or during (__cause__, __context__) passes `test`."""
    seen: set[int] = set()
    stack: list[BaseException | None] = [exc]
    while stack:
        e = stack.pop()
        if e is None or id(e) in seen:
            continue
        if test(e):
            return True
        seen.add(id(e))
        stack += [e.__context__, e.__cause__]
    return False


def is_out_of_memory(exc: BaseException) -> bool:
    """DuckDB's OutOfMemoryException, itself or the error it became (a library may wrap it: an Arrow
    scan reports it as its own error). By name: this module does not import DuckDB."""
    return in_chain(
        exc,
        lambda e: (
            isinstance(e, MemoryError)
            or type(e).__name__ == "OutOfMemoryException"
            or str(e).startswith("Out of Memory Error")
            or "failed: MemoryError" in str(e)
        ),  # an Arrow stream's export that Python could not allocate
    )


def exit_code_for(exc: BaseException) -> ExitCode:
    """The one place that decides a process exit code from an exception."""
    if isinstance(exc, SynestraError):
        return exc.exit_code
    return ExitCode.ERROR


def is_interrupt(exc: BaseException) -> bool:
    """Ctrl-C, however it surfaced: KeyboardInterrupt in Python code, or the DuckDB query it stopped
    (duckdb.InterruptException; a RuntimeError "Query interrupted" in DuckDB 2). A loop that turns each
    file's exception into that file's failure must re-raise these: Ctrl-C stops the whole run."""
    if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "InterruptException":
        return True
    return isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()
