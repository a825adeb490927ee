"""The format registry: every parser Synestra has, and content-based detection.

Every module of this package or of its family subpackages (kernel/, telemetry/, fabric/, training/,
scheduler/) that defines ``FORMAT`` (a formats.base.Format) is a format: adding one is adding its module.
The highest sniff score wins; equal scores go to the format of higher `priority` (each format declares
its own: formats/base.py), then by name.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from synestra_cli.errors import UnknownFormatError
from synestra_cli.formats.base import Format


@cache
def registry() -> dict[str, Format]:
    """name -> Format of every format module, in tie order (priority high to low, then name)."""
    found: dict[str, Format] = {}
    for info in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):  # the family subpackages too
        fmt = getattr(importlib.import_module(info.name), "FORMAT", None)
        if isinstance(fmt, Format):
            if fmt.name in found:
                raise RuntimeError(f"two formats named {fmt.name!r}")
            found[fmt.name] = fmt
    return dict(sorted(found.items(), key=lambda item: (-item[1].priority, item[0])))


def all_formats() -> dict[str, Format]:
    """The formats ingest chooses from (tests narrow this one; job logs read facts of every format)."""
    return registry()


def job_log_formats() -> list[Format]:
    """The formats whose facts every job log is read with (joblog.py)."""
    return [fmt for fmt in registry().values() if fmt.facts]


def detect(head: str) -> Format:
    """The format that recognises this content best, or UnknownFormatError (naming the nearest format)."""
    found, _ = detect_scored(head)
    if found is None:
        raise UnknownFormatError(unknown_message(head))
    return found


def detect_scored(head: str) -> tuple[Format | None, float]:
    """The best format and its score ((None, 0.0): none). The highest score wins, a tie goes to the format
    first in tie order; formats are tried highest `top` first, and one whose top cannot beat the best score
    so far is not tried (the same answer as trying every one)."""
    rank = {name: i for i, name in enumerate(all_formats())}
    best: tuple[float, Format | None] = (0.0, None)
    for fmt in sorted(all_formats().values(), key=lambda f: (-f.top, rank[f.name])):
        score_so_far, found = best
        if found is not None and (
            fmt.top < score_so_far or (fmt.top == score_so_far and rank[fmt.name] > rank[found.name])
        ):
            continue
        score = float(fmt.sniff(head))
        if score > score_so_far or (found is not None and score == score_so_far and rank[fmt.name] < rank[found.name]):
            best = (score, fmt)
    return best[1], best[0]


def unknown_message(head: str) -> str:
    """One line for a file no format claims: the nearest format by the words it holds, and how to force it."""
    from synestra_cli.formats.nearest import nearest  # the hint table is only read when a file is refused

    near = nearest(head)
    hint = (
        f"nearest: {near} (try --input-format {near})"
        if near
        else "`synestra formats` lists them; --input-format NAME reads it as one"
    )
    return f"unknown format; {hint}"


def by_name(name: str) -> Format:
    formats = all_formats()
    if name not in formats:
        raise UnknownFormatError(f"no format named {name!r}; known: {', '.join(sorted(formats))}")
    return formats[name]
