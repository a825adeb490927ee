"""Peak RSS of one large syslog ingest, by line count, and of a large `sql` export (issue 18: flat in
the input's size, <= 1.5 GB with SYNESTRA_MEMORY_LIMIT at its default).

    python benchmarks/ingest_memory.py --lines 6000000,20000000,60000000 --work /tmp/mem
    python benchmarks/ingest_memory.py --lines '' --sql-store STORE --sql-rows 3700000 --work /tmp/mem

For each size, writes one RFC 3164 file (sample_data's gpu-004.messages lines, repeated with times spread
evenly over --days, so every line is a distinct event and the clock moves forward) with DuckDB's COPY, then
runs `synestra ingest FILE --year 2026 --db DB` as a user does, in a child process, and reads its peak RSS
and CPU from wait4. With --sql-store, also runs `synestra sql --db STORE --format csv|jsonl
'SELECT * FROM metrics LIMIT N'` (output to /dev/null; the store is opened read-only) the same way.
Prints one JSON document; the generated files are deleted afterwards unless --keep.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "exports" / "syslog" / "gpu-004.messages.gz"
STAMP = len("Nov  2 00:59:59 ")  # RFC 3164 stamp: month, day padded to 2 with a space, time, one space

GENERATE = """
COPY (
    SELECT strftime(ts, '%b ') || lpad(CAST(day(ts) AS VARCHAR), 2, ' ') || strftime(ts, ' %H:%M:%S ') || body
    FROM (
        SELECT TIMESTAMP '2026-01-01' + to_microseconds(CAST(i * ? AS BIGINT)) AS ts,
               bodies[1 + i % len(bodies)] AS body
        FROM range(?) r(i), (SELECT list(body ORDER BY n) AS bodies FROM lines)
    )
) TO '{path}' (FORMAT csv, HEADER false, QUOTE '', ESCAPE '', DELIMITER '\x01')
"""


def generate(path: Path, lines: int, days: float) -> None:
    with gzip.open(SAMPLE, "rt") as sample:
        bodies = [line[STAMP:] for line in sample.read().splitlines() if line.strip()]
    conn = duckdb.connect()
    conn.execute("SET enable_progress_bar = false")
    conn.execute("CREATE TABLE lines (n INTEGER, body VARCHAR)")
    conn.executemany("INSERT INTO lines VALUES (?, ?)", list(enumerate(bodies)))
    step_us = days * 86_400e6 / lines
    conn.execute(GENERATE.format(path=str(path).replace("'", "''")), [step_us, lines])


SYNESTRA = str(Path(sys.executable).parent / "synestra")  # the console script, as a user runs it
SQL_QUERY = "SELECT * FROM metrics LIMIT {rows}"


def measure(path: Path, db: Path) -> dict:
    return {**run_measured([SYNESTRA, "ingest", str(path), "--year", "2026", "--db", str(db)]), **_store_mb(db)}


def measure_sql(store: Path, rows: int, fmt: str) -> dict:
    query = SQL_QUERY.format(rows=rows)
    return {"sql": query, "format": fmt, **run_measured([SYNESTRA, "sql", "--db", str(store), "--format", fmt, query])}


def _store_mb(db: Path) -> dict:
    return {"store_mb": db.stat().st_size / 1e6 if db.exists() else 0.0}


def run_measured(command: list[str]) -> dict:
    """Run command (stdout to /dev/null); its exit code, wall time, CPU and peak RSS (wait4)."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    return {
        "exit_code": os.waitstatus_to_exitcode(status),
        "wall_s": time.perf_counter() - start,
        "user_s": usage.ru_utime,
        "sys_s": usage.ru_stime,
        "peak_rss_mib": usage.ru_maxrss / 1024,  # KiB on Linux
        "stderr_tail": stderr[-400:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", default="6000000,20000000,60000000", help="comma-separated line counts")
    ap.add_argument("--days", type=float, default=300.0, help="the span the lines' times cover")
    ap.add_argument("--work", type=Path, required=True, help="a scratch folder (needs ~115 bytes per line)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and stores")
    ap.add_argument("--sql-store", type=Path, help="also measure `sql` exports from this store (read-only)")
    ap.add_argument("--sql-rows", type=int, default=3_700_000, help="rows the `sql` export reads")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    results = []
    for lines in (int(n) for n in args.lines.split(",") if n.strip()):
        path, db = args.work / f"syslog-{lines}.log", args.work / f"store-{lines}.duckdb"
        for old in args.work.glob(f"store-{lines}.duckdb*"):
            old.unlink()
        if not path.exists():
            generate(path, lines, args.days)
        row = {"lines": lines, "file_mb": path.stat().st_size / 1e6, **measure(path, db)}
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
        if not args.keep:
            path.unlink()
            for old in args.work.glob(f"store-{lines}.duckdb*"):
                old.unlink()
    for fmt in ("csv", "jsonl") if args.sql_store else ():
        row = measure_sql(args.sql_store, args.sql_rows, fmt)
        print(json.dumps(row), file=sys.stderr)
        results.append(row)
    print(json.dumps({"commit": _commit(), "runs": results}, indent=2))


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == "__main__":
    main()
