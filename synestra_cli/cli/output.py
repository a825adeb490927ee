"""Where a command writes a file it was given with `-o`: `-` is stdout; the suffix says the format
(an unknown one is a usage error, not HTML in a `.jpg`); a folder that is not there or not writable
is one line and exit 2 before any work is done. One place for every `-o` (timeline, packet)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from synestra_cli.api.shared import ExitCode

STDOUT = "-"


class OutputError(click.UsageError):
    """A bad `-o`: one line on stderr (`error: ...`) and exit 2, without click's usage lines."""

    def show(self, file: Any = None) -> None:
        from synestra_cli.cli.render import printable

        click.echo(f"error: {printable(self.format_message())}", err=True)


class OutputTarget(click.ParamType):  # type: ignore[type-arg]
    """-o PATH, checked when the command line is read: `-` (stdout), or a file whose folder exists and
    is writable, and that is not a folder itself."""

    name = "PATH|-"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        if isinstance(value, Path):
            return value
        path = Path(value)
        if value == STDOUT:
            return path
        if path.is_dir():
            raise OutputError(f"-o {value}: is a folder: give a file name in it")
        folder = path.parent
        if not folder.is_dir():
            raise OutputError(f"-o {value}: its folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
            raise OutputError(f"-o {value}: not writable")
        return path


OUTPUT_TARGET = OutputTarget()


def format_of(path: Path, fmt: str | None, suffixes: dict[str, str], option: str = "--format") -> str:
    """The format to write: `fmt` when given, else the one `path`'s suffix names (`.tar.gz` counts as one).
    An unknown suffix is a usage error naming the known ones."""
    if fmt:
        return fmt
    name = path.name.lower()
    for suffix in sorted(suffixes, key=len, reverse=True):
        if name.endswith(suffix):
            return suffixes[suffix]
    if str(path) == STDOUT:
        return next(iter(suffixes.values()))
    known = ", ".join(sorted(suffixes))
    raise OutputError(f"-o {path}: unknown extension: write {known}, or give {option}")


def write(path: Path, data: bytes | str) -> None:
    """data to path, or to stdout for `-`. A write that fails (disk full, the folder removed meanwhile) is
    one line naming the file, exit 2."""
    raw = data.encode() if isinstance(data, str) else data
    if str(path) == STDOUT:
        sys.stdout.flush()
        sys.stdout.buffer.write(raw)
        sys.stdout.buffer.flush()
        return
    try:
        path.write_bytes(raw)
    except OSError as exc:
        from synestra_cli.cli.render import printable

        click.echo(f"error: cannot write {printable(path)}: {exc.strerror or exc}", err=True)
        sys.exit(int(ExitCode.USAGE))


def shown(path: Path) -> str:
    """How a message names the output: `stdout` for `-`."""
    return "stdout" if str(path) == STDOUT else str(path)
