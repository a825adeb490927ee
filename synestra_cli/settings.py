"""The SYNESTRA_* environment, read and validated in one place.

A malformed value is refused with one line naming the variable, its value and what it accepts
(exit 2, as a bad option): never a traceback, and never a value that makes DuckDB spawn a
million threads or take all the memory.
"""

from __future__ import annotations

import math
import os
import re

from synestra_cli.errors import SettingsError

# Beyond a few threads per core DuckDB only adds contention; a million threads never returns.
MAX_THREADS = max(256, 4 * (os.cpu_count() or 1))
MAX_WORKERS = 64
MAX_LOCK_WAIT_S = 24 * 3600.0
# DuckDB's own memory_limit grammar: a number and a unit (KB, MiB, GB, ...), or a percentage of RAM.
MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|[KMGT]|B|bytes|%)\s*$", re.IGNORECASE)
# What a synestra process holds outside DuckDB's buffer pool: the interpreter and its libraries (~180 MB
# resident), one chunk of lines in Arrow (~80 MB), the batches streaming between queries and DuckDB's own
# memory beyond its pool (a query's vectors, malloc's fragmentation): up to 545 MiB (571 MB) over the pool
# in a 60 M-line syslog ingest, 1,403 MiB in all (docs/performance.md, "Bounded memory").
PROCESS_RESERVE_BYTES = 600 * 10**6


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return None if value is None or value.strip() == "" else value.strip()


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    value = _raw(name)
    if value is None:
        return default
    try:
        n = int(value)
    except ValueError:
        n = None
    if n is None or not lo <= n <= hi:
        raise SettingsError(f"{name}={value!r}: expected a whole number from {lo} to {hi}")
    return n


def env_float(name: str, default: float, lo: float, hi: float) -> float:
    value = _raw(name)
    if value is None:
        return default
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and lo <= x <= hi):
        raise SettingsError(f"{name}={value!r}: expected a number of seconds from {lo:g} to {hi:g}")
    return x


def threads() -> int:
    """SYNESTRA_THREADS: DuckDB threads per query (default: one per core)."""
    return env_int("SYNESTRA_THREADS", os.cpu_count() or 2, 1, MAX_THREADS)


def lock_wait_s() -> float:
    """SYNESTRA_LOCK_WAIT: seconds a second writer waits for the store's lock."""
    return env_float("SYNESTRA_LOCK_WAIT", 5.0, 0.0, MAX_LOCK_WAIT_S)


def memory_limit(default: str) -> str:
    """DuckDB's memory_limit for SYNESTRA_MEMORY_LIMIT (default `default`), the memory the whole process
    stays within, e.g. 1.5GB, 4GiB, 50% (of RAM): DuckDB gets it less PROCESS_RESERVE_BYTES for what the
    process holds beyond DuckDB's pool (at least half of it, so that under 1.2 GB queries still have
    room: the process may then go over the budget)."""
    budget = memory_budget_bytes(default)
    return f"{max(budget - PROCESS_RESERVE_BYTES, budget // 2)} bytes"


def memory_budget_bytes(default: str) -> int:
    """SYNESTRA_MEMORY_LIMIT in bytes (KB, MB, GB are powers of 1000, KiB, MiB, GiB of 1024, as DuckDB
    reads them; a percentage is of the machine's physical memory)."""
    value = _raw("SYNESTRA_MEMORY_LIMIT")
    size = _size_bytes(value if value is not None else default)
    if size is None or size <= 0:
        raise SettingsError(f"SYNESTRA_MEMORY_LIMIT={value!r}: expected a size such as 1.5GB, 4GiB or 50%")
    return size


def _size_bytes(text: str) -> int | None:
    m = MEMORY_RE.match(text)
    if m is None:
        return None
    number, unit = float(m.group(1)), m.group(2).lower()
    if unit == "%":
        return int(number / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    if unit in ("b", "bytes"):
        return int(number)
    return int(number * (1024 if unit.endswith("ib") else 1000) ** ("kmgt".index(unit[0]) + 1))


def workers(name: str, default: int) -> int:
    """SYNESTRA_WORKERS / SYNESTRA_INGEST_WORKERS: units of work run at once."""
    return env_int(name, default, 1, MAX_WORKERS)


def summaries() -> bool:
    """SYNESTRA_SUMMARIES: 0 makes explain read raw samples only, ignoring the hourly summaries
    (store/summaries.py): the baseline for benchmarks, or a way to rule the summaries out."""
    return env_int("SYNESTRA_SUMMARIES", 1, 0, 1) == 1


def reuse_kept() -> bool:
    """SYNESTRA_KEPT: 0 makes `explain` compute every explanation, neither reusing nor keeping the ones
    kept in the store (explain/memo.py): the benchmarks' measure of the computation itself."""
    return env_int("SYNESTRA_KEPT", 1, 0, 1) == 1
