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
MEMORY_RE = re.compile(r"^\s*\d+(\.\d+)?\s*([KMGT]i?B|[KMGT]|B|bytes|%)\s*$", re.IGNORECASE)


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
    """SYNESTRA_MEMORY_LIMIT: DuckDB's memory cap, e.g. 1GB, 512MiB, 50%."""
    value = _raw("SYNESTRA_MEMORY_LIMIT")
    if value is None:
        return default
    number = re.match(r"\s*(\d+(?:\.\d+)?)", value)
    if not MEMORY_RE.match(value) or number is None or float(number.group(1)) <= 0:
        raise SettingsError(f"SYNESTRA_MEMORY_LIMIT={value!r}: expected a size such as 1GB, 512MiB or 50%")
    return value


def workers(name: str, default: int) -> int:
    """SYNESTRA_WORKERS / SYNESTRA_INGEST_WORKERS: units of work run at once."""
    return env_int(name, default, 1, MAX_WORKERS)


def summaries() -> bool:
    """SYNESTRA_SUMMARIES: 0 makes explain read raw samples only, ignoring the hourly summaries
    (store/summaries.py): the baseline for benchmarks, or a way to rule the summaries out."""
    return env_int("SYNESTRA_SUMMARIES", 1, 0, 1) == 1
