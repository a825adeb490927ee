"""Options and error handling shared by every command."""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click
import duckdb

from synestra_cli.api.failures import as_store_error
from synestra_cli.api.shared import (
    MEMORY_ADVICE,
    ExitCode,
    SynestraError,
    Terminated,
    exit_code_for,
    forget_stop,
    in_chain,
    is_interrupt,
    is_out_of_memory,
    out_of_memory_message,
    raise_if_stopped,
    request_stop,
)

# The shared option grammar lives in cli/options.py; these names stay importable from here.
from synestra_cli.cli.options import check_window, db_option, format_option  # noqa: E402,F401

engine_option = click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the work runs: this process, or Ray workers ($RAY_ADDRESS, else a local Ray) over a lake.",
)


# What a write to stdout meets when it cannot land (a full disk, a quota, a device that fails).
OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG)
INTERRUPTED = "interrupted: nothing half-written is kept (each file loads in one transaction)"
OUT_OF_MEMORY_KEPT = (
    "nothing half-written is kept: an ingest keeps the files it reported loaded and loads the rest when run again"
)


def _fail(message: str, code: ExitCode) -> NoReturn:
    from synestra_cli.cli.render import printable

    click.echo(f"error: {printable(message)}", err=True)
    sys.exit(int(code))


def _quiet_broken_pipe() -> NoReturn:
    """The reader went away (`synestra sources | head -1`): end quietly with 0, as Unix filters do.
    stdout goes to /dev/null first, so that the interpreter's last flush does not complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os._exit(int(ExitCode.OK))  # no cleanup left to run: every store write is a committed transaction


def _output_failed(exc: OSError) -> NoReturn:
    """A write the command's output could not make: stdout on a full disk (`> /dev/full`), or the file
    `-o` names (a folder, a missing one, a full disk). One line, exit 2 (the output given cannot be
    written); stdout to /dev/null first, so that the interpreter's last flush does not fail again."""
    what = exc.filename or "the output"
    if not exc.filename:
        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    _fail(f"cannot write {what}: {exc.strerror or exc}", ExitCode.USAGE)


@contextmanager
def output_file(path: Any) -> Iterator[None]:
    """Around a write to a file the command line named (`timeline -o`): a write that fails (a full disk,
    a folder, a folder that is not there) is the output's one-line error, naming it."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            raise
        exc.filename = exc.filename or str(path)
        _output_failed(exc)


def _terminated(exc: BaseException) -> bool:
    """SIGTERM (Terminated) received, or anywhere in the chain: the query it stopped may have raised
    DuckDB's own interrupt, and a cleanup on the way out (a rollback, a stage dropped) another over that."""
    return Terminated.received or in_chain(exc, lambda e: isinstance(e, Terminated))


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every way a command can end, mapped to one line on stderr and a documented exit code: domain
    errors, a store DuckDB cannot read or write, Ctrl-C (130) and a closed pipe (0). Never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:

        try:
            result = fn(*args, **kwargs)
            sys.stdout.flush()  # here, not at the interpreter's exit: a full disk is this command's error
            return result
        except SynestraError as exc:
            _fail(str(exc), exit_code_for(exc))
        except BrokenPipeError:
            _quiet_broken_pipe()
        except MemoryError:  # Python's own allocation, past the process's bound (sql: settings.bound_process_data)
            _fail(f"ran out of memory (Python): {MEMORY_ADVICE}", ExitCode.MEMORY)
        except (KeyboardInterrupt, duckdb.InterruptException, RuntimeError) as exc:
            if not is_interrupt(exc):
                raise
            _fail(INTERRUPTED, ExitCode.TERMINATED if _terminated(exc) else ExitCode.INTERRUPTED)
        except duckdb.Error as exc:  # a store damaged or unwritable mid-command: one line, exit 8
            if is_out_of_memory(exc):  # not a bug: the limit the user set (or its default) was too small
                _fail(f"{out_of_memory_message(exc)}; {OUT_OF_MEMORY_KEPT}", ExitCode.MEMORY)
            store_error = as_store_error(exc)
            if store_error is not None:
                _fail(str(store_error), exit_code_for(store_error))
            if isinstance(exc, duckdb.IOException | duckdb.PermissionException | duckdb.FatalException):
                _fail(f"the store cannot be read or written: {str(exc).strip().splitlines()[0]}", ExitCode.STORE)
            _fail(
                f"unexpected DuckDB error (a bug: please report it): {str(exc).strip().splitlines()[0]}", ExitCode.ERROR
            )
        except OSError as exc:  # stdout on a full disk: the store's errors are DuckDB's, an input's its file's
            if exc.errno not in OUTPUT_ERRNOS or exc.filename:
                raise
            _output_failed(exc)

    return wrapper


def format_name_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`ingest --format NAME`: an unknown name is a usage error (exit 2), with the known names."""
    from synestra_cli.api.catalog import formats

    if value is not None and value not in formats():
        raise click.BadParameter(f"no format named {value!r}; known: {', '.join(formats())}")
    return value


def _on_sigterm(signum: int, frame: Any) -> None:
    request_stop(Terminated)


def _on_sigint(signum: int, frame: Any) -> None:
    request_stop(KeyboardInterrupt)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM raises Terminated where Ctrl-C raises KeyboardInterrupt, and both are remembered
    (errors.request_stop: a library that wraps the exception in its own error does not lose the stop).
    A Ctrl-C that is ignored (a shell's background job) stays ignored. The handlers before are put back.
    A stop whose exception something swallowed (a finalizer, where Python drops it; a library's broad
    except) is raised when the block ends: a signalled command never ends as if it had run its course."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _on_sigterm)
    if before[signal.SIGINT] is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
        raise_if_stopped()
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        forget_stop()
