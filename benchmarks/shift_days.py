#!/usr/bin/env python3
"""Grow a one-day store into N days by SQL: each added day a copy of the first, shifted in time.

    python benchmarks/shift_days.py STORE --days 30

The store holds one ingested day (benchmarks/run.py --steps days ingests it). Day k (2..N) is every row
of every source of day 1 again (but the topology's: a site exports the same topology file every day, and
ingest skips a file it holds), with
- its times shifted by k-1 periods (the hours day 1's samples span, rounded up: a simulated day's exports
  run past 24 h while its jobs finish, and copies must not overlap; every TIMESTAMP column of every table
  with a source_id, the hourly summaries' buckets too), and its sources given new ids, paths and keys;
- its jobs renamed (a numeric job id plus 100000 x (k-1), else `dK-` before it): day k's jobs are new jobs
  on the same hosts, as a cluster runs them;
- its samples numbered with the same series ids (the same hosts' same series) and appended in day 1's
  order: each day one run of batches, each batch in (series_id, ts) order, as ingest writes them.

What this measures honestly: the cost of a store that holds N days (its size, what a report reads and
keeps in memory), not what N real days would find: every day's faults are day 1's again, on the same
hosts, so `fleet` finds more lemons than a real month would. Simulating 30 days of 128 nodes instead
would take hours of this machine, and ingesting them about as long again (docs/performance.md).
One transaction per day: a kill leaves whole days.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from synestra_cli.store.connect import connect  # noqa: E402
from synestra_cli.store.sources import sourced_tables  # noqa: E402

# A copy's shift: the hours day 1's samples span, rounded up (a simulated day's exports run past 24 h while
# its last jobs finish: copies a day apart would overlap, as no real month's files do).
PERIOD_SQL = """
SELECT CAST(ceil(epoch(max(ts) - min(ts)) / 3600.0) AS INTEGER) FROM metrics WHERE source_id BETWEEN ? AND ?
"""
DAYS_DDL = "CREATE TABLE IF NOT EXISTS _bench_days (day INTEGER, first_source INTEGER, last_source INTEGER)"
# Sources whose file every day would repeat byte for byte (skipped by ingest as already in the store).
SAME_EVERY_DAY = ("topology_csv", "ibnetdiscover")
JOB = (
    "CASE WHEN TRY_CAST(job_id AS BIGINT) IS NOT NULL THEN CAST(CAST(job_id AS BIGINT) + {k} * 100000 AS VARCHAR) "
    "ELSE 'd{day}-' || job_id END"
)


def _columns(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    sql = "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' ORDER BY column_index"
    return [r[0] for r in conn.execute(sql, [table]).fetchall()]


def _select(conn: duckdb.DuckDBPyConnection, table: str, ts: tuple[str, ...], k: int, offset: int, hours: int) -> str:
    """The SELECT list copying `table`'s day-1 rows as day k+1's, `hours` x k later."""
    out = []
    for c in _columns(conn, table):
        q = f'"{c}"'
        if c == "source_id":
            out.append(f"source_id + {offset} AS source_id")
        elif c in ts:
            out.append(f"{q} + INTERVAL {k * hours} HOUR AS {q}")
        elif c == "job_id":
            out.append(f"{JOB.format(k=k, day=k + 1)} AS job_id")
        elif table == "sources" and c in ("path", "sha256", "source_key"):
            out.append(f"{q} || '#day{k + 1}' AS {q}")
        else:
            out.append(q)
    return ", ".join(out)


def add_day(conn: duckdb.DuckDBPyConnection, k: int, first: int, last: int, span: int, hours: int) -> None:
    """Day k+1: day 1's sources [first, last] again, `hours` x k later, their ids `k * span` higher."""
    offset = k * span
    day1 = f"source_id BETWEEN {first} AND {last}"
    skip = "SELECT source_id FROM sources WHERE format IN ({})".format(", ".join(f"'{f}'" for f in SAME_EVERY_DAY))
    conn.execute("BEGIN TRANSACTION")
    try:
        for t in sourced_tables(conn):
            where = f"WHERE {day1} AND source_id NOT IN ({skip})"
            cols = _select(conn, t.name, t.ts_columns, k, offset, hours)
            # no ORDER BY: a scan in insertion order keeps day 1's order (its batches, each by series and time)
            conn.execute(f'INSERT INTO "{t.name}" SELECT {cols} FROM "{t.name}" {where}')
        conn.execute("SELECT nextval('source_id_seq') FROM range(?)", [span]).fetchall()
        conn.execute("INSERT INTO _bench_days VALUES (?, ?, ?)", [k + 1, first + offset, last + offset])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def grow(db: Path, days: int) -> None:
    conn = connect(db)
    try:
        conn.execute(DAYS_DDL)
        if not conn.execute("SELECT count(*) FROM _bench_days").fetchone()[0]:  # type: ignore[index]
            first, last = conn.execute("SELECT min(source_id), max(source_id) FROM sources").fetchone()  # type: ignore[misc]
            conn.execute("INSERT INTO _bench_days VALUES (1, ?, ?)", [first, last])
        first, last = conn.execute("SELECT first_source, last_source FROM _bench_days WHERE day = 1").fetchone()  # type: ignore[misc]
        have = conn.execute("SELECT max(day) FROM _bench_days").fetchone()[0]  # type: ignore[index]
        span = last + 1  # day k's ids: day 1's plus k * span (ids stay below the sequence's next value)
        hours = conn.execute(PERIOD_SQL, [first, last]).fetchone()[0]  # type: ignore[index]
        for day in range(have + 1, days + 1):
            t = time.perf_counter()
            add_day(conn, day - 1, first, last, span, hours)
            conn.execute("CHECKPOINT")
            print(f"day {day}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    finally:
        conn.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--days", type=int, required=True, help="days the store holds afterwards")
    args = ap.parse_args()
    grow(args.store, args.days)


if __name__ == "__main__":
    main()
