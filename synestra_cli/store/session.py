"""What every connection to a store is opened with, whatever the store (a file, store/connect.py; a lake,
store/lake.py): DuckDB's configuration, offline and bounded, and the session's settings and macros.
Below both, so that the lake reads them without importing the file store's door."""

from __future__ import annotations

import duckdb

from synestra_cli import settings
from synestra_cli.store.sql import has_table

# SYNESTRA_MEMORY_LIMIT's default: the process's budget; DuckDB's pool gets 900 MB of it (settings.memory_limit).
MEMORY_LIMIT = settings.DEFAULT_MEMORY_LIMIT
# An offline tool never downloads: no connection installs or autoloads an extension.
# What duckdb.connect(config=) accepts.
DuckConfig = dict[str, str | bool | int | float | list[str]]
OFFLINE_CONFIG: DuckConfig = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
# `synestra sql` runs what a runbook types: besides read-only, no file, network or setting beyond the
# store itself (ATTACH, COPY ... TO, EXPORT DATABASE, INSTALL, secrets, PRAGMA profiling_output), and
# the configuration locked so that no SET undoes it.
# (lock_configuration is set last, once the session's own settings are made).
LOCKED_CONFIG: DuckConfig = {**OFFLINE_CONFIG, "enable_external_access": False}

# A leap second, `23:59:60[.f]` (the kernel's "Clock: inserting leap second 23:59:60 UTC", a GPS-disciplined
# clock, `date` under a right/ zone), which DuckDB's casts and strptime refuse: the time text with its
# seconds :60 made :59.999999, the last microsecond of the minute, before it is cast (docs/formats.md,
# "Leap seconds": why that and not the next second). `t` unchanged otherwise; the test is a memchr.
LEAP_SECOND_SQL = (
    "CASE WHEN contains({t}, ':60') "
    "THEN regexp_replace({t}, '([0-9]{{2}}:[0-9]{{2}}):60(?:[.,][0-9]*)?', '\\1:59.999999') ELSE {t} END"
)
LEAP_SECOND_MACRO = f"CREATE OR REPLACE TEMP MACRO leap_second(t) AS {LEAP_SECOND_SQL.format(t='t')}"
# Session macros every query may use. to_utc: a naive local timestamp in zone tz -> naive UTC.
# No progress bar: DuckDB prints it on stdout for a query over 2 s (a big job on a busy machine), in
# the middle of `--format json` output.
SESSION_SQL = [
    "SET TimeZone = 'UTC'",
    "SET enable_progress_bar = false",
    "CREATE OR REPLACE TEMP MACRO to_utc(ts, tz) AS timezone('UTC', timezone(tz, ts))",
    LEAP_SECOND_MACRO,
]


def session_limits() -> DuckConfig:
    # DuckDB takes 80% of RAM by default; bounded, it spills big sorts to disk instead, so that
    # ingesting a file of any size stays within a laptop's memory (docs/performance.md): the process
    # within SYNESTRA_MEMORY_LIMIT, DuckDB's pool within that less the interpreter's part.
    return {"threads": settings.threads(), "memory_limit": settings.memory_limit(MEMORY_LIMIT)}


# A lake reader lists its parts in this temp table (store/lake.py): asked without importing the lake.
PARTS_TABLE = "_lake_parts"


def is_lake_reader(conn: duckdb.DuckDBPyConnection) -> bool:
    return has_table(conn, PARTS_TABLE, temporary=True)
