"""What a killed process left in a store's spill folder (`STORE.tmp`), removed by the next writer.

DuckDB spills beyond its memory limit into its temp directory: ingest's parsing database into
`STORE.tmp` (ingest/staging.py), a reader of a store file into the same folder (DuckDB's default). Its
files carry the writing process's id, `duckdb_temp_<pid>_<n>_storage_...tmp` and
`duckdb_temp_<pid>_<n>_owner`, and a process that closes removes its own; one killed (kill -9, the OOM
killer, a power cut) leaves them, and DuckDB removes them only when a later process happens to spill
there (gigabytes, for as long as no ingest spills again). `sweep` removes the files of every process
that is not running, as each writer (ingest, forget) opens the store, and never a live one's: a pid that
is running (or whose process started after the file was written: the pid was reused) keeps its files.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

# DuckDB 1.2+ (2.x): the writing process's id in every temp file's name
OWNED = re.compile(r"^duckdb_temp_(\d+)_")


def spill_folder(store: Path) -> Path:
    """Where a store file's connections spill: DuckDB's default for a file, and ingest's own setting."""
    return Path(f"{store}.tmp")


def sweep(folder: Path) -> int:
    """Remove the spill files of processes that are not running; the number removed. A folder that is not
    there or cannot be read is left as it is (a reader may not write it; a writer's open says why)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    removed = 0
    for name in names:
        m = OWNED.match(name)
        if m is None or _alive(int(m.group(1)), folder / name):
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or not ours to remove: left
            (folder / name).unlink()
            removed += 1
    return removed


def _alive(pid: int, path: Path) -> bool:
    """Whether the process that wrote `path` still runs: its pid exists, and (where /proc says when it
    started) it started before the file was last written."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    started = _start_time(pid)
    if started is None:
        return True
    try:
        return started <= path.stat().st_mtime + 1
    except OSError:
        return True


def _start_time(pid: int) -> float | None:
    """When process `pid` started (Unix seconds), from /proc (Linux); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            boot = next(float(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
