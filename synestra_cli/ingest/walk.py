"""Finding the files to ingest: files as given, folders walked (sorted, hidden names skipped)."""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WalkIssue:
    """A folder that could not be read (reported like a failed file), or that holds nothing to ingest
    (status "empty": a warning; `ingest empty/ --explain` still only explains)."""

    path: Path
    error: str
    status: str = "failed"


def iter_inputs(paths: Iterable[Path], skip: frozenset[Path] = frozenset()) -> Iterator[Path | WalkIssue]:
    """Files as given, folders recursively (sorted, hidden names skipped, symlinked folders followed once),
    then a WalkIssue for every folder that could not be read and every given folder with nothing to load.
    `skip`: resolved paths never read as input (the store itself, its WAL and spill folder)."""
    for p in paths:
        if p.is_dir():
            found = yield from _walk(p, skip)
            if not found:
                yield WalkIssue(p, f"{p}: no files to ingest in this folder{found.hidden_note()}", "empty")
        elif p.resolve() not in skip:
            yield p


@dataclass
class _Found:
    files: int = 0
    hidden: int = 0

    def __bool__(self) -> bool:
        return self.files > 0

    def hidden_note(self) -> str:
        return f" ({self.hidden} hidden name(s) skipped: they start with '.')" if self.hidden else ""


def _walk(top: Path, skip: frozenset[Path]) -> Generator[Path | WalkIssue, None, _Found]:
    found, seen, errors = _Found(), set(), list[OSError]()
    for root, dirs, files in os.walk(top, followlinks=True, onerror=errors.append):
        yield from (
            WalkIssue(Path(e.filename or top), f"{e.filename}: folder cannot be read ({e.strerror})") for e in errors
        )
        errors.clear()
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in seen:  # a symlink back up the tree: walked once
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        found.hidden += sum(name.startswith(".") for name in dirs + files)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (Path(root) / d).resolve() not in skip)
        for name in sorted(files):
            path = Path(root) / name
            if not name.startswith(".") and path.resolve() not in skip:
                found.files += 1
                yield path
    yield from (
        WalkIssue(Path(e.filename or top), f"{e.filename}: folder cannot be read ({e.strerror})") for e in errors
    )
    return found
