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
# SYNESTRA_MEMORY_LIMIT's default: the process's budget (DuckDB's pool gets it less PROCESS_RESERVE_BYTES).
DEFAULT_MEMORY_LIMIT = "1.5GB"
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


def env_float(name: str, default: float, lo: float, hi: float, unit: str = "seconds") -> float:
    value = _raw(name)
    if value is None:
        return default
    try:
        x = float(value)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and lo <= x <= hi):
        raise SettingsError(f"{name}={value!r}: expected a number of {unit} from {lo:g} to {hi:g}")
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
    reads them; a percentage is of the machine's physical memory), from MIN_MEMORY_BYTES (below it
    DuckDB cannot pin the blocks it opens a store with) to MAX_MEMORY_BYTES, or 1% to 100% of RAM."""
    value = _raw("SYNESTRA_MEMORY_LIMIT")
    text = value if value is not None else default
    size = _size_bytes(text)
    percent = text.strip().endswith("%") and size is not None and not 1 <= float(text.strip()[:-1]) <= 100
    if size is None or percent or not MIN_MEMORY_BYTES <= size <= MAX_MEMORY_BYTES:
        raise SettingsError(
            f"SYNESTRA_MEMORY_LIMIT={value!r}: expected a size from 8MB to 1PB, such as 1.5GB or 4GiB, "
            "or 1% to 100% of the machine's memory"
        )
    return size


# SYNESTRA_MEMORY_LIMIT's range: 8 MB (DuckDB pins a few 256 KiB blocks to open a store; less, and even
# the open runs out) to 1 PB (DuckDB refuses a memory_limit it cannot represent).
MIN_MEMORY_BYTES = 8 * 10**6
MAX_MEMORY_BYTES = 10**15


def bound_process_data(budget: int) -> None:
    """Hold this process's data (heap and anonymous mappings: RLIMIT_DATA) to `budget` bytes, or to what
    it holds already plus PROCESS_RESERVE_BYTES when that is more: a single value DuckDB allocates outside
    its buffer pool (`repeat('x', 2e9)`) then fails as DuckDB's out-of-memory, where it took twice the
    budget. For `synestra sql`, whose queries are anyone's; a no-op where the platform has no such limit."""
    try:
        import resource

        held = _data_bytes()
        limit = max(budget, held + PROCESS_RESERVE_BYTES)
        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))
    except (ImportError, OSError, ValueError, AttributeError):
        pass


def _data_bytes() -> int:
    """VmData of this process (Linux), else 0."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


# A compressed input may inflate to at most this many times its size once it holds RATIO_FLOOR_BYTES of
# text (real exports: syslog ~14x, busy DCGM ~37x, an idle GPU's DCGM ~65x; a bomb of text ~400-1000x),
# and to at most SYNESTRA_MAX_INFLATED bytes whatever its ratio (docs/formats.md, "Compressed files").
DEFAULT_INFLATE_RATIO = 200.0
RATIO_FLOOR_BYTES = 64 << 20
DEFAULT_MAX_INFLATED = "16GB"


def max_inflate_ratio() -> float:
    """SYNESTRA_MAX_INFLATE_RATIO: how many times its size a compressed file may inflate to."""
    return env_float("SYNESTRA_MAX_INFLATE_RATIO", DEFAULT_INFLATE_RATIO, 2.0, 1e6, unit="times")


def max_inflated() -> tuple[int, str]:
    """SYNESTRA_MAX_INFLATED: the bytes of text one compressed file may inflate to, and as written."""
    value = _raw("SYNESTRA_MAX_INFLATED")
    text = value if value is not None else DEFAULT_MAX_INFLATED
    size = None if text.endswith("%") else _size_bytes(text)
    if size is None or not 1 <= size <= MAX_MEMORY_BYTES * 1000:
        raise SettingsError(f"SYNESTRA_MAX_INFLATED={value!r}: expected a size such as 16GB, 500MiB or 1TB")
    return size, text


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
    kept in the store (kept/explanations.py): the benchmarks' measure of the computation itself."""
    return env_int("SYNESTRA_KEPT", 1, 0, 1) == 1


# The lake's variables (docs/lake.md): their defaults and ranges here, read by store/lake_*.py.
DEFAULT_LAKE_BUCKETS = 16
DEFAULT_LAKE_LEASE_S = 60.0
DEFAULT_LAKE_RETAIN_S = 3600
DEFAULT_LAKE_COMPACT_RUN = 8


def lake_buckets() -> int:
    """SYNESTRA_LAKE_BUCKETS: host buckets of a lake the first ingest creates."""
    return env_int("SYNESTRA_LAKE_BUCKETS", DEFAULT_LAKE_BUCKETS, 1, 4096)


def lake_lease_s() -> float:
    """SYNESTRA_LAKE_LEASE: seconds an S3 writer's lease lasts unrenewed."""
    return env_float("SYNESTRA_LAKE_LEASE", DEFAULT_LAKE_LEASE_S, 3.0, 3600.0)


def lake_retain_s() -> int:
    """SYNESTRA_LAKE_RETAIN: seconds a compaction's retired parts are kept for the readers still on them."""
    return env_int("SYNESTRA_LAKE_RETAIN", DEFAULT_LAKE_RETAIN_S, 0, 10**9)


def lake_compact_run() -> int:
    """SYNESTRA_LAKE_COMPACT_RUN: small parts in a row an ingest compacts as it closes (0: never)."""
    return env_int("SYNESTRA_LAKE_COMPACT_RUN", DEFAULT_LAKE_COMPACT_RUN, 0, 10**6)


def check_all() -> None:
    """Read every SYNESTRA_* variable once, as a command starts: a malformed one is a usage error (exit 2)
    before anything is read or written, never one file's failure halfway through an ingest."""
    threads()
    lock_wait_s()
    memory_budget_bytes(DEFAULT_MEMORY_LIMIT)
    for name in ("SYNESTRA_WORKERS", "SYNESTRA_INGEST_WORKERS"):
        workers(name, 1)
    summaries()
    reuse_kept()
    max_inflate_ratio()
    max_inflated()
    lake_buckets()
    lake_lease_s()
    lake_retain_s()
    lake_compact_run()
