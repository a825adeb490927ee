#!/usr/bin/env python3
"""The series layout's row-group size, chosen by measurement (issue 32 item 1).

    python benchmarks/row_groups.py STORE [--hosts 48] [--sizes 30720,61440,122880] [--runs 3]

STORE: any store of a campus (either layout, opened read-only). Its samples of the first --hosts hosts are
written in the series layout's order (each file's rows by series, then time: store/series.py) into a new
store per row-group size (DuckDB's ATTACH ... (ROW_GROUP_SIZE n); 122,880 is DuckDB's default), and on
each the reads the reports make are timed, median of --runs, with the process's CPU seconds beside wall:
- `job`: one job's candidates, a few series of a quarter of the hosts, over two hours (explain --job);
- `fleet`: a tenth of every series, over the whole store (a cold tax-report's or fleet's candidates);
- `metric`: every series of one metric, over the whole store (a read without series ids).
Prints one line per size and the size of each new store; scratch goes to --tmp and is deleted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

COPY_SQL = """
CREATE TABLE rg.metrics AS
WITH m AS (
    SELECT * FROM src.metrics
    WHERE host IN (SELECT DISTINCT host FROM src.metrics WHERE host LIKE 'gpu-%' ORDER BY host LIMIT $hosts)
), s AS (SELECT host, entity, metric, row_number() OVER (ORDER BY host, entity, metric) AS series_id
         FROM (SELECT DISTINCT host, entity, metric FROM m))
SELECT m.ts, m.host, m.entity, m.metric, m.value, m.source_id, s.series_id::INTEGER AS series_id
FROM m JOIN s ON m.host = s.host AND m.entity IS NOT DISTINCT FROM s.entity AND m.metric = s.metric
ORDER BY m.source_id, s.series_id, m.ts
"""
SERIES_SQL = "CREATE TABLE rg.series AS SELECT DISTINCT series_id, host, entity, metric FROM rg.metrics"
# The reads: a temp table of the wanted ids, joined as the reports join theirs (signals/many_jobs/telemetry.py).
WANT = {
    "job": """
        SELECT series_id FROM rg.series
        WHERE host IN (SELECT DISTINCT host FROM rg.series ORDER BY host LIMIT (SELECT count(DISTINCT host) // 4
                                                                              FROM rg.series))
          AND metric IN (SELECT DISTINCT metric FROM rg.series ORDER BY metric LIMIT 3)""",
    "fleet": "SELECT series_id FROM rg.series WHERE hash(series_id) % 10 = 0",
    "metric": "SELECT series_id FROM rg.series WHERE metric = (SELECT min(metric) FROM rg.series)",
}
READ_SQL = """
SELECT count(*), sum(m.value) FROM rg.metrics m JOIN _want w ON w.series_id = m.series_id
WHERE m.ts BETWEEN $lo AND $hi AND m.value IS NOT NULL
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(conn: duckdb.DuckDBPyConnection, runs: int) -> dict[str, tuple[float, float, int]]:
    lo, hi = conn.execute("SELECT min(ts), max(ts) FROM rg.metrics").fetchone()  # type: ignore[misc]
    two_hours = (lo + (hi - lo) / 2, lo + (hi - lo) / 2 + (hi - lo) / 17)  # ~2 h of a ~35 h day
    out = {}
    for name, want in WANT.items():
        conn.execute(f"CREATE OR REPLACE TEMP TABLE _want AS {want}")
        window = two_hours if name == "job" else (lo, hi)
        walls, cpus, rows = [], [], 0
        for _ in range(runs):
            t, c = time.perf_counter(), _cpu()
            rows = conn.execute(READ_SQL, {"lo": window[0], "hi": window[1]}).fetchone()[0]  # type: ignore[index]
            walls.append(time.perf_counter() - t)
            cpus.append(_cpu() - c)
        out[name] = (statistics.median(walls), statistics.median(cpus), rows)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--hosts", type=int, default=48)
    ap.add_argument("--sizes", default="30720,61440,122880")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tmp", type=Path, default=Path(tempfile.gettempdir()))
    args = ap.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        path = args.tmp / f"row-groups-{os.getpid()}-{size}.duckdb"
        conn = duckdb.connect()
        conn.execute("SET threads = 2")
        conn.execute(f"ATTACH '{args.store}' AS src (READ_ONLY)")
        conn.execute(f"ATTACH '{path}' AS rg (ROW_GROUP_SIZE {size})")
        conn.execute(COPY_SQL, {"hosts": args.hosts})
        conn.execute(SERIES_SQL)
        conn.execute("CHECKPOINT rg")
        conn.execute("DETACH src")
        n, groups = conn.execute(
            "SELECT count(*), (SELECT count(DISTINCT row_group_id) FROM pragma_storage_info('rg.metrics')) "
            "FROM rg.metrics"
        ).fetchone()  # type: ignore[misc]
        res = measure(conn, args.runs)
        conn.close()
        mb = path.stat().st_size / 1e6
        path.unlink()
        reads = " | ".join(f"{k} {w:.3f} s ({c:.2f} CPU s, {r:,} rows)" for k, (w, c, r) in res.items())
        print(f"row groups of {size:>7,}: {n:,} samples in {groups:,} groups, {mb:,.0f} MB | {reads}", flush=True)


if __name__ == "__main__":
    main()
