"""Progress on a terminal: a rich bar on stderr while the library explains jobs (synestra_cli.progress).
Never on a pipe or a file: a script's stderr stays what it was."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO


@contextmanager
def progress_on_tty(stream: TextIO | None = None) -> Iterator[None]:
    """Within this block, each long library step draws a transient bar on stderr, if it is a terminal."""
    stream = stream or sys.stderr
    if not stream.isatty():
        yield
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synestra_cli.api.shared import progress

    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=stream),
        transient=True,
    )
    tasks: dict[str, int] = {}

    def listen(what: str, done: int, total: int) -> None:
        if what not in tasks:
            tasks[what] = bar.add_task(what, total=total)
        bar.update(tasks[what], completed=done, total=total)  # type: ignore[arg-type]

    with bar, progress.listening(listen):
        yield


@contextmanager
def status_on_tty(what: str, stream: TextIO | None = None) -> Iterator[Callable[[str], None]]:
    """A spinner with its elapsed time on stderr, if it is a terminal, for a step that draws no bar
    (a picture rendering); yields a function that changes what it says. The library's bars show too."""
    stream = stream or sys.stderr
    if not stream.isatty():
        with progress_on_tty(stream):
            yield lambda _: None
        return
    from rich.console import Console

    status = Console(file=stream).status(what)
    with status, progress_on_tty(stream):
        yield lambda text: status.update(text)
