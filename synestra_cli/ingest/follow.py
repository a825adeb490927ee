"""`synestra ingest --follow`: keep the store current while files grow, appear and rotate.

Every `interval` seconds the followed paths are walked and stat'ed. Only files whose (device, inode,
size, mtime) moved since the last poll are handed to `ingest_paths`, which already knows a grown file
(only its new lines, for a line-oriented format) from a changed one. Between polls the store is closed,
so readers get in; a poll with nothing new does not open it at all.

What ingest alone cannot see is a rotation: the content it loaded from `syslog` is now under another
name (`syslog.1` after logrotate's rename, or after `copytruncate`; `syslog.2.gz` once compressed). A
file's *lineage* is the latest source the store holds for its path (its sha256 and size). Before a poll
loads anything, each new or replaced file (no lineage of its own, or one whose inode changed or that
is now shorter) is hashed at the sizes of the lineages that may have moved (those of files that changed
this poll, and of files under the followed paths that no longer exist); when its first N bytes
(decompressed, for gzip) hash to a lineage's, it *is* that file, moved: the store's sources are renamed
to the new path, and ingest then sees a file that grew (new lines only) or is the same (skipped). A
lineage replaced by unrelated content and claimed by no file is renamed `PATH (gone, source N)`: the
rows of a file that logrotate dropped stay in the store, as the rows of a deleted file do.

Memory: one small record per followed path (`Seen`), dropped when the path goes away, and ingest's
parsing database made new at each poll that loads (DuckDB keeps ~50 KB of every file a connection's
database loaded until it closes: kept for hours, it would creep); glibc's malloc arenas are capped at
two (cap_malloc_arenas: each poll's new threads kept their freed blocks).
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import hashlib
import io
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from synestra_cli import settings
from synestra_cli.errors import StoreBusyError, raise_if_stopped
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.reading import GZIP_MAGIC
from synestra_cli.ingest import FileReport, ProgressFn, ReportFn, WalkIssue, ingest_into, iter_inputs
from synestra_cli.ingest.staging import Stores
from synestra_cli.ingest.walk import resolved
from synestra_cli.store import open_store, resolve_db_path
from synestra_cli.store.sql import transaction

DEFAULT_INTERVAL_S = 5.0

LINEAGE_SQL = """
SELECT path, arg_max(sha256, source_id), arg_max(bytes, source_id), max(source_id)
FROM sources WHERE list_contains($paths, path) GROUP BY path
"""
UNDER_ROOT_SQL = """
SELECT path, arg_max(sha256, source_id), arg_max(bytes, source_id), max(source_id)
FROM sources WHERE path = $root OR starts_with(path, $root || '/') GROUP BY path
"""
MovedFn = Callable[[list[tuple[str, str]]], None]
MOVE_SQL = "UPDATE sources SET path = m.new FROM (SELECT unnest($old) AS old, unnest($new) AS new) m WHERE path = m.old"


@dataclass(frozen=True, slots=True)
class Seen:
    """The one record kept per followed path: its stat at the last poll, and the inode it had when it was
    last handed to ingest (None: seen but not loaded yet, e.g. waiting for its last line to end)."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    loaded_ino: tuple[int, int] | None = None
    loaded: bool = False  # handed to ingest at this stat (False: deferred, its line or gzip being written)

    def same_stat(self, other: Seen) -> bool:
        return (self.dev, self.ino, self.size, self.mtime_ns) == (other.dev, other.ino, other.size, other.mtime_ns)


@dataclass(frozen=True)
class Lineage:
    path: str
    sha: str
    size: int
    source_id: int


@dataclass
class PollReport:
    poll: int
    reports: list[FileReport] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)  # (old path, new path): a rotation recognised
    deferred: list[str] = field(default_factory=list)  # changed and ending mid-line: loaded at a later poll
    busy: str | None = None  # the store was locked by another process: this poll is retried at the next


M_ARENA_MAX = -8  # glibc mallopt parameter (malloc.h)
MALLOC_ARENAS = 2


def cap_malloc_arenas() -> None:
    """At most MALLOC_ARENAS glibc malloc arenas in this process (as MALLOC_ARENA_MAX=2 would). Ingest
    parses in a new thread pool at every poll, and each new thread's arena kept the blocks freed in it:
    in-use memory stayed flat but the free lists, and the RSS, grew 8 MB in 50 polls; capped, 2 MB.
    A no-op where the C library is not glibc."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, MALLOC_ARENAS)


def _stat(path: Path) -> Seen | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return Seen(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _ends_a_line(path: Path, size: int) -> bool:
    try:
        with open(path, "rb") as f:
            f.seek(size - 1)
            return f.read(1) == b"\n"
    except OSError:
        return True  # let ingest report it


def prefix_shas(path: Path, sizes: Iterable[int]) -> set[tuple[int, str]]:
    """(size, sha256 of the first `size` bytes) for each size the file reaches, in one pass over its bytes,
    and for gzip a second over its decompressed stream (a rotated log compressed by logrotate)."""
    wanted = sorted({s for s in sizes if s > 0})
    found: set[tuple[int, str]] = set()
    if not wanted:
        return found
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
            f.seek(0)
            found |= _hash_stream(f, wanted)
        if gz:
            with gzip.open(path, "rb") as g:
                found |= _hash_stream(g, wanted)
    except (OSError, EOFError, gzip.BadGzipFile):
        pass  # unreadable or a truncated gzip: no claim; ingest reports the file
    return found


def _hash_stream(f: io.BufferedIOBase, wanted: list[int]) -> set[tuple[int, str]]:
    h, pos, found, cuts = hashlib.sha256(), 0, set(), iter(wanted)
    cut = next(cuts, None)
    for block in iter(lambda: f.read(1 << 20), b""):
        start = 0
        while cut is not None and pos + len(block) >= cut:
            h.update(block[start : cut - pos])
            found.add((cut, h.hexdigest()))
            start = cut - pos
            cut = next(cuts, None)
        if cut is None:
            break
        h.update(block[start:])
        pos += len(block)
    return found


class Follower:
    """Polls `paths` into the store `db`. `poll()` runs one poll (tests drive it); `run()` loops."""

    def __init__(
        self, db: str | Path | None, paths: Iterable[Path], options: IngestOptions, workers: int | None = None
    ) -> None:
        cap_malloc_arenas()  # memory flat over hours
        self.db = resolve_db_path(db)
        self.paths = list(paths)
        self.roots = [str(r) for p in self.paths if (r := resolved(p)) is not None]
        self.options = options
        self.workers = workers
        self.seen: dict[str, Seen] = {}
        self.polls = 0
        store = self.db.resolve()
        self.skip = frozenset({store, Path(f"{store}.wal"), Path(f"{store}.tmp")})
        self.issues: set[str] = set()  # folder problems already reported (each once, not every poll)

    # --- one poll -----------------------------------------------------------------------------------

    def poll(
        self,
        on_file: ProgressFn | None = None,
        on_report: ReportFn | None = None,
        on_moved: MovedFn | None = None,
    ) -> PollReport:
        self.polls += 1
        report = PollReport(self.polls)
        current, issues = self._scan()
        for issue in issues:  # a path refused (a loop, a FIFO, a name not UTF-8): said once, and the rest goes on
            refused = FileReport(path=str(issue.path), status=issue.status, error=issue.error)
            report.reports.append(refused)
            if on_report:
                on_report(refused)
        changed = {p: s for p, s in current.items() if not self._loaded_as(p, s)}
        ready, report.deferred = self._split_ready(changed)
        for gone in set(self.seen) - set(current):
            del self.seen[gone]
        if not ready:
            self._remember(changed, loaded=())
            return report
        try:
            if any(self._may_have_moved(p, now) for p, now in ready.items()):
                with open_store(self.db) as conn:
                    report.moved = self._recognise_rotations(conn, ready, current)
            if on_moved:
                on_moved(report.moved)
            # A reader holding the store makes this poll busy (retried at the next), not a long wait; the
            # store attached here serves ingest's start. It holds the store only for its short commits.
            # A new parsing database per poll: DuckDB keeps ~50 KB of every file loaded in a connection's
            # database until it closes (measured; a cursor's close does not free it).
            # An empty file has nothing to load yet (logrotate's `create` and `copytruncate` leave one): it
            # takes part in the rotations above, but is neither loaded nor failed until it holds a line.
            loading = sorted(p for p, now in ready.items() if now.size)
            if loading:
                stores = Stores.open(self.db, wait_s=settings.lock_wait_s())
                try:
                    report.reports += ingest_into(
                        stores, [Path(p) for p in loading], self.options, on_file, on_report, self.workers
                    )
                finally:
                    stores.close()
        except StoreBusyError as exc:
            report.busy = str(exc)
            return report
        self._remember(changed, loaded=loading)
        return report

    def _may_have_moved(self, path: str, now: Seen) -> bool:
        """Whether this file may hold content the store has under another path, or its own content
        under another: it is new to this follower, or replaced (another inode) or shorter since it was
        loaded. A file that only grew cannot: no need to open the store to look."""
        before = self.seen.get(path)
        if before is None or before.loaded_ino is None:
            return True
        return before.loaded_ino != (now.dev, now.ino) or now.size < before.size

    def _scan(self) -> tuple[dict[str, Seen], list[WalkIssue]]:
        current: dict[str, Seen] = {}
        issues = []
        # a path not there yet is waited for; one there that is not a file (a loop, a FIFO) is reported
        for item in iter_inputs([p for p in self.paths if os.path.lexists(p)], self.skip):
            if isinstance(item, WalkIssue):
                if item.status == "failed" and item.error not in self.issues:
                    self.issues.add(item.error)
                    issues.append(item)
                continue
            seen, path = _stat(item), resolved(item)
            if seen is not None and path is not None and os.path.isfile(item):
                current[str(path)] = seen
        return current, issues

    def _loaded_as(self, path: str, now: Seen) -> bool:
        before = self.seen.get(path)
        return before is not None and before.loaded and before.same_stat(now)

    def _split_ready(self, changed: dict[str, Seen]) -> tuple[dict[str, Seen], list[str]]:
        """A file that changed since the last poll and ends mid-line is being written: wait for its line
        (or for a poll at which it did not change). The first poll loads what is there."""
        ready, deferred = {}, []
        for path, now in changed.items():
            before = self.seen.get(path)
            moving = self.polls > 1 and (before is None or not before.same_stat(now))
            if moving and now.size and not _ends_a_line(Path(path), now.size):
                deferred.append(path)
            else:
                ready[path] = now
        return ready, sorted(deferred)

    def _remember(self, changed: dict[str, Seen], loaded: Iterable[str]) -> None:
        loaded = set(loaded)
        for path, now in changed.items():
            before = self.seen.get(path)
            loaded_ino = (now.dev, now.ino) if path in loaded else (before.loaded_ino if before else None)
            self.seen[path] = Seen(now.dev, now.ino, now.size, now.mtime_ns, loaded_ino, path in loaded)

    # --- rotations ----------------------------------------------------------------------------------

    def _recognise_rotations(
        self, conn: duckdb.DuckDBPyConnection, ready: dict[str, Seen], current: dict[str, Seen]
    ) -> list[tuple[str, str]]:
        own = {r[0]: Lineage(*r) for r in conn.execute(LINEAGE_SQL, {"paths": sorted(ready)}).fetchall()}
        claimants = sorted(p for p, now in ready.items() if p not in own or self._broken(p, now, own[p]))
        if not claimants:
            return []
        pool = dict(own)  # lineages that may have moved: those of files that changed, and of files now gone
        for root in self.roots:
            for row in conn.execute(UNDER_ROOT_SQL, {"root": root}).fetchall():
                if row[0] not in current:
                    pool[row[0]] = Lineage(*row)
        moves, taken = self._claim(claimants, pool)
        for path in claimants:  # a lineage replaced by other content that no file claimed: kept, renamed
            if path in own and path not in taken:
                moves[path] = f"{path} (gone, source {own[path].source_id})"
        if moves:
            with transaction(conn):
                old = sorted(moves)
                conn.execute(MOVE_SQL, {"old": old, "new": [moves[o] for o in old]})
        return sorted(moves.items())

    def _broken(self, path: str, now: Seen, lineage: Lineage) -> bool:
        """The content loaded from this path may no longer be its beginning: replaced (another inode),
        truncated (copytruncate), or the path appeared after the first poll while the store knew it (a
        name logrotate reuses: `syslog.3.gz` renamed onto the `syslog.4.gz` it deleted). A file whose
        content still begins with its own lineage claims it back (`_claim`)."""
        before = self.seen.get(path)
        loaded = before.loaded_ino if before else None
        if loaded is None:
            return self.polls > 1 or now.size < lineage.size
        return loaded != (now.dev, now.ino) or now.size < lineage.size

    @staticmethod
    def _claim(claimants: list[str], pool: dict[str, Lineage]) -> tuple[dict[str, str], set[str]]:
        """old path -> new path for each lineage a claimant's content begins with (its own first, then the
        longest: the most specific match), and the paths of the lineages claimed (each once)."""
        by_key: dict[tuple[int, str], list[Lineage]] = {}
        for lin in pool.values():
            by_key.setdefault((lin.size, lin.sha), []).append(lin)
        taken: set[str] = set()
        moves: dict[str, str] = {}
        for path in claimants:
            matches = [
                lin
                for key in prefix_shas(Path(path), (lin.size for lin in pool.values()))
                for lin in by_key.get(key, [])
            ]
            matches = [lin for lin in matches if lin.path not in taken]
            if not matches:
                continue
            best = max(matches, key=lambda lin: (lin.path == path, lin.size, lin.source_id))
            taken.add(best.path)
            if best.path != path:
                moves[best.path] = path
        return moves, taken

    # --- the loop -----------------------------------------------------------------------------------

    def run(
        self,
        interval: float = DEFAULT_INTERVAL_S,
        max_polls: int | None = None,
        on_file: ProgressFn | None = None,
        on_report: ReportFn | None = None,
        on_moved: MovedFn | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[PollReport]:
        """Poll every `interval` seconds (measured from the start of each poll) until max_polls, or
        forever. Ctrl-C between or inside polls: each file loads in one transaction, so nothing is
        half-written; the caller sees KeyboardInterrupt. A stop that a library wrapped in its own error
        (errors.request_stop) is raised again here: as the poll's error, or after a poll that went on."""
        while max_polls is None or self.polls < max_polls:
            started = time.monotonic()
            try:
                report = self.poll(on_file, on_report, on_moved)
            except Exception as exc:
                raise_if_stopped(exc)
                raise
            raise_if_stopped()
            yield report
            if max_polls is not None and self.polls >= max_polls:
                return
            sleep(max(0.0, interval - (time.monotonic() - started)))
