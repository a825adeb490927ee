"""Options and error handling shared by every command."""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

import click
import duckdb

# The shared option grammar lives in cli/options.py; these names stay importable from here.
from synestra_cli.cli.options import check_window, db_option, format_option  # noqa: E402,F401
from synestra_cli.errors import (
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
from synestra_cli.store.connect import as_store_error

engine_option = click.option(
    "--engine",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where the work runs: this process, or Ray workers ($RAY_ADDRESS, else a local Ray) over a lake.",
)


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
            return fn(*args, **kwargs)
        except SynestraError as exc:
            _fail(str(exc), exit_code_for(exc))
        except BrokenPipeError:
            _quiet_broken_pipe()
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

    return wrapper


class FiniteFloat(click.ParamType):
    """A float in [lo, hi]: NaN and infinities are refused (click.FloatRange lets NaN through)."""

    name = "number"

    def __init__(self, lo: float | None = None, hi: float | None = None) -> None:
        self.lo, self.hi = lo, hi

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        import math

        try:
            x = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(x):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        if (self.lo is not None and x < self.lo) or (self.hi is not None and x > self.hi):
            bounds = f"from {self.lo:g}" + (f" to {self.hi:g}" if self.hi is not None else " up")
            self.fail(f"{value!r} is out of range: expected {bounds}", param, ctx)
        return x


def format_name_callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`ingest --format NAME`: an unknown name is a usage error (exit 2), with the known names."""
    from synestra_cli.formats import all_formats

    if value is not None and value not in all_formats():
        raise click.BadParameter(f"no format named {value!r}; known: {', '.join(sorted(all_formats()))}")
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
