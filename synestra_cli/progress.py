"""Progress of the library's long steps (explaining jobs), for whoever listens: the command line draws
it on a terminal (cli/progress.py), a notebook or a test may listen too, and nobody pays when no one
does. The library reports; it never draws (it imports neither click nor rich)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

T = TypeVar("T")
# (what, done, total): called once before the first item (done 0) and after each one
Listener = Callable[[str, int, int], None]
_listeners: list[Listener] = []


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Call listener with the progress of every step run inside this block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def track(what: str, items: Iterable[T], total: int) -> Iterator[T]:
    """Yield items, telling the listeners how many of total are done."""
    if not _listeners:
        yield from items
        return
    for listener in list(_listeners):
        listener(what, 0, total)
    for done, item in enumerate(items, 1):
        for listener in list(_listeners):
            listener(what, done, total)
        yield item
