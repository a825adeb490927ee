"""Options and error handling shared by every command."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import duckdb

from synestra_cli.errors import SynestraError, exit_code_for
from synestra_cli.store.connect import as_store_error

db_option = click.option(
    "--db",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Store file (default: $SYNESTRA_DB, else ./synestra.duckdb).",
)


def format_option(*choices: str, default: str = "table") -> Callable:
    return click.option(
        "--format", "fmt", type=click.Choice(choices), default=default, show_default=True, help="Output format."
    )


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Domain errors become one line on stderr and a documented exit code: never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SynestraError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(int(exit_code_for(exc)))
        except duckdb.Error as exc:  # a store damaged or unwritable mid-command: one line, exit 8
            store_error = as_store_error(exc)
            if store_error is None:
                raise
            click.echo(f"error: {store_error}", err=True)
            sys.exit(int(exit_code_for(store_error)))

    return wrapper
