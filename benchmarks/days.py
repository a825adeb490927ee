"""benchmarks/run.py step `days`: the seed's baseline over 1, 7 and 30 days of a fleet (issue 32 item 4).

One simulated day of a `campaign` (--days-nodes, 128 by default) is ingested; the store then grows by
SQL to each length asked (benchmarks/shift_days.py: time-shifted copies of day 1, and why that is what
is honest to measure here), and at each length, every command in a new process as a user runs it:
- `tax-report --all` cold (the store's kept explanations and accountings deleted first: the first report
  after an ingest), then warm (median of --runs: the kept ones read back);
- `fleet` and `risks` (after the reports: their jobs' explanations are kept, the telemetry scan is theirs);
- `explain --job` of one day-1 job, computed every run (SYNESTRA_KEPT=0): a job's explanation must not
  cost more as the store's history grows;
each with its wall and CPU seconds and peak RSS (the child's, from wait4), next to the store's size.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb

UNKEEP_SQL = "DELETE FROM explanations; DELETE FROM kept_taxes"


def _unkeep(db: Path) -> None:
    with duckdb.connect(str(db)) as conn:
        conn.execute(UNKEEP_SQL)


def _grow(db: Path, days: int, py: str, root: Path) -> float:
    """The store grown to `days` days (benchmarks/shift_days.py, in a child); the seconds it took."""
    import time

    t = time.perf_counter()
    subprocess.run([py, str(root / "benchmarks" / "shift_days.py"), str(db), "--days", str(days)], check=True)
    return time.perf_counter() - t


def _timed(run_child: Any, command: list[str], runs: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    rows = [run_child(command, env=env) for _ in range(max(1, runs))]
    return {
        "wall_s": statistics.median(r["wall_s"] for r in rows),
        "wall_runs_s": [r["wall_s"] for r in rows],
        "cpu_s": statistics.median(r["cpu_s"] for r in rows),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
    }


def bench_days(args: Any, ctx: dict[str, Any]) -> list[dict[str, Any]]:
    """The curve: one entry per length in --days, each with its store and commands."""
    dataset, bench_store, run_child, main_job = ctx["dataset"], ctx["bench_store"], ctx["run_child"], ctx["main_job"]
    synestra, py, root = ctx["synestra"], ctx["py"], ctx["root"]
    data = dataset(args.cache, args.days_nodes, args.days_hours, args.seed, args.gzip)
    db = args.cache / "work" / f"days-{data.name}.duckdb"
    store = bench_store(data / "exports", db)
    job = main_job(data)
    out = []
    for days in sorted(int(d) for d in args.days.split(",")):
        grow_s = _grow(db, days, py, root) if days > 1 else 0.0
        with duckdb.connect(str(db), read_only=True) as conn:
            samples, jobs = conn.execute(
                "SELECT (SELECT count(*) FROM metrics), (SELECT count(*) FROM jobs)"
            ).fetchone()
        report = [*synestra, "tax-report", "--all", "--db", str(db), "--format", "json"]
        _unkeep(db)
        entry = {
            "days": days,
            "data": data.name,
            "store_mb": db.stat().st_size / 1e6,
            "samples": samples,
            "job_rows": jobs,
            "grow_s": grow_s,
            "tax_report_cold": _timed(run_child, report, 1),
            "tax_report_warm": _timed(run_child, report, args.runs),
            "fleet": _timed(run_child, [*synestra, "fleet", "--db", str(db), "--format", "json"], 1),
            "risks": _timed(run_child, [*synestra, "risks", "--db", str(db), "--format", "json"], 1),
            "explain": _timed(
                run_child,
                [*synestra, "explain", "--job", job, "--db", str(db), "--format", "json"],
                args.runs,
                {"SYNESTRA_KEPT": "0"},
            ),
            "job": job,
            "load_avg": os.getloadavg()[0],  # the neighbours' share of the machine while this length ran
        }
        if days == 1:
            entry["ingest"] = store
        out.append(entry)
        print(_line(entry), file=sys.stderr, flush=True)
    return out


def _line(e: dict[str, Any]) -> str:
    return (
        f"{e['days']:>3} d {e['store_mb']:>9,.0f} MB {e['samples']:>14,} samples | tax-report cold "
        f"{e['tax_report_cold']['wall_s']:.2f} s ({e['tax_report_cold']['cpu_s']:.1f} CPU s, "
        f"{e['tax_report_cold']['peak_rss_mb']:.0f} MB), warm {e['tax_report_warm']['wall_s']:.2f} s "
        f"({e['tax_report_warm']['cpu_s']:.1f} CPU s) | fleet "
        f"{e['fleet']['wall_s']:.2f} s ({e['fleet']['cpu_s']:.1f} CPU s, {e['fleet']['peak_rss_mb']:.0f} MB) | risks "
        f"{e['risks']['wall_s']:.2f} s ({e['risks']['cpu_s']:.1f} CPU s, {e['risks']['peak_rss_mb']:.0f} MB) | "
        f"explain {e['explain']['wall_s']:.2f} s ({e['explain']['cpu_s']:.2f} CPU s, "
        f"{e['explain']['peak_rss_mb']:.0f} MB) | grown in {e['grow_s']:.0f} s | load {e['load_avg']:.1f}"
    )


def print_days(rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    print(f"\nThe baseline over days ({rows[0]['data']}; copies of day 1 shifted in time: benchmarks/shift_days.py)")
    for e in rows:
        print(_line(e))
