"""Finding the files to ingest: files as given, folders walked (sorted, hidden names skipped).

Every path, given or walked, passes one guard (`admit`) before anything else reads it: a symbolic link
loop, a broken link, a name that is not UTF-8 (DuckDB, Arrow and the store's `sources.path` hold UTF-8
text), a FIFO (a read would block), a socket or a device, and a path that vanished or cannot be stat'ed
are each a WalkIssue: one line in the report, that path alone refused, the rest loads. A name full of
escapes or glob characters is a name like any other (DuckDB is given the path, never a pattern).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class WalkIssue:
    """A path that cannot be ingested as a file (reported like a failed file), or a folder that holds
    nothing to ingest (status "empty": a warning; `ingest empty/ --explain` still only explains)."""

    path: Path
    error: str
    status: str = "failed"


def _kind(mode: int) -> str | None:
    """What a path that is neither a file nor a folder is, as the refusal names it."""
    if stat.S_ISFIFO(mode):
        return "a FIFO (a named pipe: reading it would wait for a writer)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return None


def admit(path: Path) -> Path | WalkIssue:
    """The path itself when it is a regular file or a folder that can be read as input, else the
    WalkIssue that says why not (never an exception)."""
    raw = os.fsencode(path)
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:  # named by its bytes escaped (\xff): the report, JSON and the store hold UTF-8
        what, shown = "folder" if os.path.isdir(path) else "file", raw.decode("utf-8", "backslashreplace")
        return WalkIssue(Path(shown), f"{shown}: the {what} name is not valid UTF-8: rename it (e.g. convmv -t utf-8)")
    try:
        st = os.stat(path)
    except OSError as exc:
        return WalkIssue(path, _stat_error(path, exc))
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return path
    return WalkIssue(path, f"{path}: not a regular file ({_kind(st.st_mode) or 'not a file'}): not read")


def _stat_error(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{path}: a symbolic link loop (it leads back to itself): not read"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"{path}: a broken symbolic link (to {os.readlink(path)}, which does not exist): not read"
    if exc.errno == errno.ENOENT:
        return f"{path}: no such file"
    return f"{path}: cannot be read ({exc.strerror or exc})"


def resolved(path: Path) -> Path | None:
    """path.resolve(), or None when it cannot be resolved (a loop, or gone meanwhile)."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # Python 3.11 raises RuntimeError on a symlink loop
        return None


def iter_inputs(paths: Iterable[Path], skip: frozenset[Path] = frozenset()) -> Iterator[Path | WalkIssue]:
    """Files as given, folders recursively (sorted, hidden names skipped, symlinked folders followed once),
    a WalkIssue for every path `admit` refuses and every folder that could not be read, and one for every
    given folder with nothing to load. `skip`: resolved paths never read as input (the store itself, its
    WAL and spill folder)."""
    for given in paths:
        p = admit(given)
        if isinstance(p, WalkIssue):
            yield p
        elif p.is_dir():
            found = yield from _walk(p, skip)
            if not found:
                yield WalkIssue(p, f"{p}: no files to ingest in this folder{found.hidden_note()}", "empty")
        elif resolved(p) not in skip:
            yield p


@dataclass
class _Found:
    files: int = 0
    hidden: int = 0

    def __bool__(self) -> bool:
        return self.files > 0

    def hidden_note(self) -> str:
        return f" ({self.hidden} hidden name(s) skipped: they start with '.')" if self.hidden else ""


def _folder_issue(e: OSError, top: Path) -> WalkIssue:
    return WalkIssue(Path(e.filename or top), f"{e.filename}: folder cannot be read ({e.strerror})")


def _walk(top: Path, skip: frozenset[Path]) -> Generator[Path | WalkIssue, None, _Found]:
    found, seen, errors = _Found(), set(), list[OSError]()
    for root, dirs, files in os.walk(top, followlinks=True, onerror=errors.append):
        yield from (_folder_issue(e, top) for e in errors)
        errors.clear()
        try:
            st = os.stat(root)
        except OSError as exc:  # removed while walked
            yield WalkIssue(Path(root), _stat_error(Path(root), exc))
            dirs[:] = []
            continue
        if (st.st_dev, st.st_ino) in seen:  # a symlink back up the tree: walked once
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        found.hidden += sum(name.startswith(".") for name in dirs + files)
        kept, refused = [], []
        for d in sorted(d for d in dirs if not d.startswith(".")):
            folder = admit(Path(root) / d)
            if isinstance(folder, WalkIssue):  # not walked: one line for the folder, not one per file
                refused.append(folder)
            elif resolved(folder) not in skip:
                kept.append(d)
        dirs[:] = kept
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = admit(Path(root) / name)
            if isinstance(path, WalkIssue) or resolved(path) not in skip:
                found.files += 1  # a refusal too: the folder is not empty, its one line says what is wrong
                yield path
        found.files += len(refused)
        yield from refused  # in the order the folders would have been walked: after this one's files
    yield from (_folder_issue(e, top) for e in errors)
    return found
