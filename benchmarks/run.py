#!/usr/bin/env python3
"""Campus-scale benchmarks: every figure next to a baseline measured in the same run.

    python benchmarks/run.py                      # 512 nodes x 8 GPUs x 24 h, scales 1x 2x 4x
    python benchmarks/run.py --nodes 64 --hours 6 --scales 1,2 --runs 3

Steps (each in a child process, so peak RSS is the OS's figure for that step alone):
1. simulate a `campaign` once into --cache (reused by later runs);
2. per input format, ingest all its files into a fresh store, next to the floor: DuckDB's read_csv of the
   same files as one VARCHAR column into a table (every line materialised, nothing parsed);
3. syslog parse rate next to Drain3 (the usual Python log-template miner) on the same file;
4. the whole dataset into one store: time, peak RSS, store size next to input size;
5. `synestra explain --job` as a user runs it (a new process): cold, then median of N warm runs, at each
   store scale (scale k = the campaign simulated over k x hours), computed every run (SYNESTRA_KEPT=0:
   a kept explanation would be read instead);
6. `synestra tax-report --all` latency, median of N;
7. the baseline over days (`days`, benchmarks/days.py): one simulated day of --days-nodes nodes grown by
   SQL to 1, 7 and 30 days; at each, store size, `tax-report --all` cold and warm, `fleet`, `risks`, one
   job's `explain`, with peak RSS;
8. Prometheus text next to the in-memory floor and promtool (`peers`), and the fixed cost of a small file
   (`smallfiles`): benchmarks/peers.py;
9. job size (`--job-sizes`, default 8, 64, 256 and 1,024 hosts): per size, a `ghost-link` campus whose
   main job has that many hosts (twice the nodes), under campus sampling (DCGM 1 min, node_exporter
   2 min, SNMP and optics 5 min), over `--job-node-hours` / nodes hours (at most 24): 512 nodes x 24 h
   for the 256-host job, 2,048 x 6 h for the 1,024-host one, the same number of samples. `explain --job`
   cold and warm, computed, with its peak RSS, next to that store's size; and as a user meets it (the
   first run keeps the explanation, the next read it back: `explain_kept`);
8. a Prometheus `query_range` answer for `--promjson-hosts` hosts (default 500: 8 GPUs x 5 DCGM fields x
   `--promjson-points` samples each) ingested at the default SYNESTRA_MEMORY_LIMIT: time, CPU, peak RSS,
   rows (prom_json_big.py).
Prints a table and writes the same figures as JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import days  # its helpers, beside it (on sys.path as the script's own folder)
import peers
import prom_json_big

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SYNESTRA = [str(Path(PY).parent / "synestra")]  # the console script, as a user runs it

# Child programs. Each prints one JSON line: {"seconds": ..., ...}; the parent adds peak RSS.
INGEST_CHILD = """
import json, sys, time
from pathlib import Path
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli import formats
from synestra_cli.store.connect import connect
conn = connect(sys.argv[1])
formats.all_formats()  # start-up (importing the parsers) is not ingest work: the floor's imports are not timed either
t = time.perf_counter()
reports = ingest_paths(conn, [Path(p) for p in sys.argv[2:]], IngestOptions())
print(json.dumps({"seconds": time.perf_counter() - t, "rows": sum(r.rows for r in reports),
                  "failed": sum(r.status == "failed" for r in reports)}))
"""

FLOOR_CHILD = """
import duckdb, json, sys, time
conn = duckdb.connect(sys.argv[1])
t = time.perf_counter()
conn.execute("CREATE TABLE t AS SELECT * FROM read_csv(?, columns={'line': 'VARCHAR'}, delim='\\x01', quote='', "
             "escape='', header=false, auto_detect=false, strict_mode=false)", [sys.argv[2:]])
n = conn.execute("SELECT count(*) FROM t").fetchall()[0][0]
print(json.dumps({"seconds": time.perf_counter() - t, "rows": n}))
"""

DRAIN3_CHILD = """
import json, sys, time
from drain3 import TemplateMiner
limit = int(sys.argv[2])
lines = []
with open(sys.argv[1], errors='replace') as f:
    for line in f:
        lines.append(line.rstrip('\\n'))
        if len(lines) >= limit:
            break
miner = TemplateMiner()
t = time.perf_counter()
for line in lines:
    miner.add_log_message(line)
print(json.dumps({"seconds": time.perf_counter() - t, "rows": len(lines), "templates": len(miner.drain.clusters)}))
"""


def run_child(args: list[str], ok_codes: tuple[int, ...] = (0,), env: dict[str, str] | None = None) -> dict:
    """Run a child; return its last JSON stdout line with wall seconds and its own peak RSS (wait4)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(args, stdout=out, stderr=err, text=True, cwd=ROOT, env={**os.environ, **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if proc.returncode not in ok_codes:
        raise RuntimeError(f"{' '.join(args[:4])} ... failed ({proc.returncode}): {stderr.strip()[-800:]}")
    lines = stdout.strip().splitlines()
    try:
        doc = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    # ru_maxrss: KiB. CPU seconds beside wall: on a shared machine wall time measures the neighbours too
    doc.update(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        peak_rss_mb=usage.ru_maxrss / 1024,
        exit_code=proc.returncode,
    )
    return doc


def dataset(cache: Path, nodes: int, hours: float, seed: int, gz: bool) -> Path:
    out = cache / f"campaign-n{nodes}-h{hours:g}-s{seed}{'-gz' if gz else ''}"
    if not (out / "truth.json").exists():
        print(f"simulating {out.name} (cached for later runs) ...", file=sys.stderr)
        t = time.perf_counter()
        run_child(
            SYNESTRA
            + [
                "simulate",
                str(out),
                "--scenario",
                "campaign",
                "--nodes",
                str(nodes),
                "--hours",
                str(hours),
                "--seed",
                str(seed),
                "--force",
            ]
            + (["--gzip"] if gz else [])
        )
        print(f"  simulated in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return out


# The sampling campus fleets use (simulate/export.py Intervals.for_size at campus scale), for every job size.
JOBSIZE_CHILD = """
import json, sys
from pathlib import Path
from synestra_cli.simulate.export import Intervals
from synestra_cli.simulate.scenarios import simulate
meta = simulate(Path(sys.argv[1]), "ghost-link", seed=int(sys.argv[2]), nodes=int(sys.argv[3]),
                hours=float(sys.argv[4]), overwrite=True, gz=sys.argv[5] == "1",
                intervals=Intervals(dcgm=60.0, ib=120.0, snmp=300.0, optics=300.0))
print(json.dumps(meta))
"""


def jobsize_dataset(cache: Path, hosts: int, node_hours: float, seed: int, gz: bool) -> Path:
    """A ghost-link campus whose main job (half the nodes) has `hosts` hosts (cached)."""
    nodes = max(4, 2 * hosts)
    hours = max(1.0, min(24.0, node_hours / nodes))
    out = cache / f"ghost-link-n{nodes}-h{hours:g}-s{seed}-campus{'-gz' if gz else ''}"
    if not (out / "truth.json").exists():
        print(f"simulating {out.name} (cached for later runs) ...", file=sys.stderr)
        run_child([PY, "-c", JOBSIZE_CHILD, str(out), str(seed), str(nodes), str(hours), "1" if gz else "0"])
    return out


MIGRATE_CHILD = """
import json, sys, time
from synestra_cli.store.connect import connect
t = time.perf_counter()
connect(sys.argv[1]).close()  # a writable open applies the migrations this store lacks (012 backfills summaries)
print(json.dumps({"seconds": time.perf_counter() - t}))
"""


def bench_jobsizes(args: argparse.Namespace) -> list[dict]:
    """explain --job latency and peak RSS per job size, each next to its store: with the hourly summaries
    (store/summaries.py) and, as the baseline in the same run, reading raw samples only
    (SYNESTRA_SUMMARIES=0, the code path before migration 012)."""
    rows = []
    for hosts in (int(h) for h in args.job_sizes.split(",")):
        data = jobsize_dataset(args.cache, hosts, args.job_node_hours, args.job_seed, args.gzip)
        db = args.cache / f"store-{data.name}.duckdb"
        truth = json.loads((data / "truth.json").read_text())
        if args.reuse_stores and db.exists():
            store = {"reused": True, "migrate_s": run_child([PY, "-c", MIGRATE_CHILD, str(db)])["wall_s"]}
            store["store_mb"] = db.stat().st_size / 1e6
        else:
            store = bench_store(data / "exports", db)
        job = main_job(data)
        size = next((len(j["hosts"]) for j in truth["jobs"] if j["job"] == job and "hosts" in j), hosts)
        command = SYNESTRA + ["explain", "--job", job, "--db", str(db), "--format", "json"]
        rows.append(
            {
                "hosts": size,
                "data": data.name,
                "nodes": truth["nodes"],
                "hours": truth["hours"],
                "metric_samples": truth.get("metric_samples", 0),
                "store": store,
                "job": job,
                "explain_raw": timed_command(command, args.runs, {**COMPUTE, "SYNESTRA_SUMMARIES": "0"}),
                "explain": timed_command(command, args.runs, COMPUTE),
                # as a user meets it: the first run computes and keeps the explanation, the next read it
                "explain_kept": timed_command(command, args.runs),
            }
        )
    return rows


def files_per_format(exports: Path) -> dict[str, list[Path]]:
    """Every file of the dataset, grouped by the format Synestra detects in it."""
    from synestra_cli import formats
    from synestra_cli.formats.reading import decode, read_head

    groups: dict[str, list[Path]] = {}
    for path in sorted(p for p in exports.rglob("*") if p.is_file()):
        try:
            name = formats.detect(decode(read_head(path))).name
        except Exception:  # noqa: BLE001 - an unknown file is simply not benchmarked
            continue
        groups.setdefault(name, []).append(path)
    return groups


def bench_formats(groups: dict[str, list[Path]], work: Path) -> list[dict]:
    """Ingest all files of one format into a fresh store, next to read_csv of the same files."""
    rows = []
    for name, paths in sorted(groups.items()):
        size_mb = sum(p.stat().st_size for p in paths) / 1e6
        args = [str(p) for p in paths]
        ours = run_child([PY, "-c", INGEST_CHILD, str(work / f"fmt-{name}.duckdb"), *args])
        floor = run_child([PY, "-c", FLOOR_CHILD, str(work / f"floor-{name}.duckdb"), *args])
        for scratch in work.glob(f"*-{name}.duckdb*"):  # the floor's store alone is ~8 GB at 1x
            scratch.unlink()
        rows.append(
            {
                "format": name,
                "files": len(paths),
                "mb": size_mb,
                "lines": floor["rows"],
                "rows": ours["rows"],
                "failed": ours["failed"],
                "ingest_s": ours["seconds"],
                "floor_s": floor["seconds"],
                # CPU of the whole child (start-up and imports too, for both): survives a loaded machine
                "ingest_cpu_s": ours["cpu_s"],
                "floor_cpu_s": floor["cpu_s"],
                "rows_per_s": ours["rows"] / ours["seconds"],
                "mb_per_s": size_mb / ours["seconds"],
                "lines_per_s": floor["rows"] / ours["seconds"],
                "vs_floor": floor["seconds"] / ours["seconds"],
                "peak_rss_mb": ours["peak_rss_mb"],
            }
        )
    return rows


def big_syslog(syslogs: list[Path], cache: Path, lines: int) -> Path:
    """One RFC3164 file of about `lines` lines from the dataset's per-host files (cached): per-host files
    of a day hold a few hundred lines, too few to measure a parse rate rather than per-file overhead."""
    from synestra_cli.formats.reading import read_bytes

    out = cache / f"syslog-{lines}.log"
    if out.exists():
        return out
    sources = [p for p in syslogs if ".messages" in p.name]  # one envelope per file: RFC3164 hosts only
    text = b"".join(read_bytes(p) for p in sources)
    n = max(text.count(b"\n"), 1)
    out.write_bytes(text * max(1, -(-lines // n)))
    return out


def bench_syslog(syslogs: list[Path], cache: Path, work: Path, lines: int, drain_lines: int) -> dict:
    """Syslog parse rate on one large file: ours, the read_csv floor, and Drain3 on its first lines."""
    path = big_syslog(syslogs, cache, lines)
    ours = run_child([PY, "-c", INGEST_CHILD, str(work / "syslog-big.duckdb"), str(path)])
    floor = run_child([PY, "-c", FLOOR_CHILD, str(work / "syslog-big-floor.duckdb"), str(path)])
    doc = {
        "file": path.name,
        "mb": path.stat().st_size / 1e6,
        "lines": floor["rows"],
        "ingest_s": ours["seconds"],
        "floor_s": floor["seconds"],
        "lines_per_s": floor["rows"] / ours["seconds"],
        "vs_floor": floor["seconds"] / ours["seconds"],
        "peak_rss_mb": ours["peak_rss_mb"],
    }
    doc["drain3"] = bench_drain3([path], doc, drain_lines)
    return doc


def bench_drain3(syslogs: list[Path], ours: dict, limit: int) -> dict:
    """Drain3 mines templates from the first `limit` lines of the largest syslog file."""
    syslog = max(syslogs, key=lambda p: p.stat().st_size)
    try:
        import drain3  # noqa: F401
    except ImportError:
        return {"skipped": "drain3 not installed (pip install -e '.[bench]')"}
    d = run_child([PY, "-c", DRAIN3_CHILD, str(syslog), str(limit)])
    drain_rate = d["rows"] / d["seconds"]
    our_rate = ours["lines_per_s"]
    return {
        "file": syslog.name,
        "drain3_lines": d["rows"],
        "drain3_lines_per_s": drain_rate,
        "synestra_lines_per_s": our_rate,
        "ratio": our_rate / drain_rate,
    }


def bench_store(exports: Path, db: Path) -> dict:
    if db.exists():
        db.unlink()
    # exit 3 = some file could not be loaded: still a figure, reported with the failures counted
    r = run_child(SYNESTRA + ["ingest", str(exports), "--db", str(db), "--json"], ok_codes=(0, 3))
    failed = [f["path"] for f in r.get("files", []) if f["status"] == "failed"]
    input_mb = sum(p.stat().st_size for p in exports.rglob("*") if p.is_file()) / 1e6
    return {
        "ingest_s": r["wall_s"],
        "peak_rss_mb": r["peak_rss_mb"],
        "input_mb": input_mb,
        "store_mb": db.stat().st_size / 1e6,
        "files_failed": len(failed),
        "failed_examples": failed[:3],
    }


# explain computes every run: a kept explanation (kept/explanations.py) would be read instead from the second run on
COMPUTE = {"SYNESTRA_KEPT": "0"}


def timed_command(args: list[str], runs: int, env: dict[str, str] | None = None) -> dict:
    cold = run_child(args, env=env)
    warm = [run_child(args, env=env) for _ in range(runs)]
    return {
        "cold_s": cold["wall_s"],
        "warm_median_s": statistics.median(w["wall_s"] for w in warm),
        "warm_runs_s": [w["wall_s"] for w in warm],
        "peak_rss_mb": max(w["peak_rss_mb"] for w in warm),
        "warm_median_cpu_s": statistics.median(w["cpu_s"] for w in warm),
        "load_avg": os.getloadavg()[0],
    }


def compile_package() -> None:
    """Byte-compile synestra_cli first, as `pip install` does: in a checkout run with PYTHONDONTWRITEBYTECODE
    set, every timed command would compile its ~45 modules from source again (~0.05-0.08 CPU s)."""
    subprocess.run([PY, "-m", "compileall", "-q", str(ROOT / "synestra_cli")], check=True)


def _commit() -> str | None:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip() or None


def main_job(data: Path) -> str:
    truth = json.loads((data / "truth.json").read_text())
    return str(truth.get("main_job") or truth["jobs"][0]["job"])


def print_table(doc: dict) -> None:
    print(f"\nSynestra benchmarks  ({doc['nodes']} nodes x {doc['hours']:g} h, {os.cpu_count()} cores)\n")
    print(
        f"{'format':<14}{'files':>6}{'MB':>8}{'lines':>11}{'rows':>12}{'rows/s':>11}{'MB/s':>7}{'floor s':>9}"
        f"{'ours s':>8}{'vs floor':>9}{'RSS MB':>8}{'floor cpu':>10}{'ours cpu':>9}"
    )
    for r in doc["formats"]:
        print(
            f"{r['format']:<14}{r['files']:>6}{r['mb']:>8.1f}{r['lines']:>11,}{r['rows']:>12,}"
            f"{r['rows_per_s']:>11,.0f}{r['mb_per_s']:>7.1f}{r['floor_s']:>9.2f}{r['ingest_s']:>8.2f}"
            f"{r['vs_floor']:>8.2f}x{r['peak_rss_mb']:>8.0f}{r['floor_cpu_s']:>10.2f}{r['ingest_cpu_s']:>9.2f}"
        )
    big = doc["syslog_big"]
    if "lines" in big:
        print(
            f"\nsyslog, one {big['mb']:.0f} MB file of {big['lines']:,} lines: {big['lines_per_s']:,.0f} lines/s, "
            f"{big['vs_floor']:.2f}x the read_csv floor ({big['floor_s']:.2f} s vs {big['ingest_s']:.2f} s)"
        )
        d = big["drain3"]
        print(
            f"syslog parse vs Drain3: {d['synestra_lines_per_s']:,.0f} vs {d['drain3_lines_per_s']:,.0f} lines/s = "
            f"{d['ratio']:.1f}x"
            if "ratio" in d
            else f"syslog vs Drain3: {d['skipped']}"
        )
    else:
        print(f"\nsyslog: {big['skipped']}")
    for s in doc["scales"]:
        st, ex = s["store"], s["explain"]
        print(
            f"\nscale {s['scale']}x: ingest {st['ingest_s']:.0f} s (peak RSS {st['peak_rss_mb']:.0f} MB), "
            f"input {st['input_mb']:.0f} MB -> store {st['store_mb']:.0f} MB, {s['metric_samples']:,} samples"
            + (f", {st['files_failed']} file(s) FAILED" if st["files_failed"] else "")
        )
        print(f"  explain --job {s['job']}: cold {ex['cold_s']:.2f} s, warm median {ex['warm_median_s']:.2f} s")
        if "tax_report" in s:
            tr = s["tax_report"]
            print(
                f"  tax-report --all ({s['jobs']} jobs): cold {tr['cold_s']:.2f} s (explains every job, keeps "
                f"the explanations), warm median {tr['warm_median_s']:.2f} s (reuses them)"
            )
    pj = doc.get("promjson")
    if pj:
        print(
            f"\nquery_range answer, {pj['hosts']} hosts ({pj['series']:,} series, {pj['pairs']:,} samples, "
            f"{pj['mb']:.0f} MB): exit {pj['exit_code']}, {pj['seconds']:.0f} s ({pj['cpu_s']:.0f} CPU s), "
            f"peak RSS {pj['peak_rss_mb']:.0f} MB, {pj['rows'] or 0:,} rows"
        )
    days.print_days(doc.get("days", []))
    peers.print_peers(doc.get("peers", {}), doc.get("small_files", {}))
    if doc.get("job_sizes"):
        print(
            f"\nexplain --job by job size (campus sampling; computed each run: SYNESTRA_KEPT=0; raw = also "
            f"SYNESTRA_SUMMARIES=0, the path before the summaries; kept = read back as a user's second run)"
            f"\n{'hosts':>7}{'campus':>16}{'store MB':>10}{'samples':>13}{'cold s':>8}{'warm s':>8}"
            f"{'cpu s':>7}{'RSS MB':>8}{'raw warm s':>11}{'raw cpu s':>10}{'raw RSS':>8}{'kept s':>8}{'load':>6}"
        )
        for r in doc["job_sizes"]:
            ex, raw, campus = r["explain"], r["explain_raw"], f"{r['nodes']} x {r['hours']:g} h"
            kept = r.get("explain_kept", {}).get("warm_median_s", float("nan"))
            print(
                f"{r['hosts']:>7}{campus:>16}{r['store']['store_mb']:>10.0f}{r['metric_samples']:>13,}"
                f"{ex['cold_s']:>8.2f}{ex['warm_median_s']:>8.2f}{ex['warm_median_cpu_s']:>7.2f}"
                f"{ex['peak_rss_mb']:>8.0f}{raw['warm_median_s']:>11.2f}{raw['warm_median_cpu_s']:>10.2f}"
                f"{raw['peak_rss_mb']:>8.0f}{kept:>8.2f}{ex['load_avg']:>6.1f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=512)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--scales", default="1,2,4", help="store sizes, as multiples of --hours")
    ap.add_argument("--runs", type=int, default=5, help="warm runs per latency figure (after one cold run)")
    ap.add_argument("--tax-runs", type=int, default=None, help="warm runs for tax-report --all (default: --runs)")
    ap.add_argument("--drain3-lines", type=int, default=200_000)
    ap.add_argument("--syslog-lines", type=int, default=1_000_000, help="size of the one-file syslog parse test")
    ap.add_argument(
        "--gzip",
        action="store_true",
        help="simulate gzipped exports (as sites archive them; 1x uncompressed is ~30 GB)",
    )
    ap.add_argument("--days", default="1,7,30", help="step days: the store lengths measured, in days")
    ap.add_argument("--days-nodes", type=int, default=128, help="step days: nodes of the simulated day")
    ap.add_argument("--days-hours", type=float, default=24.0, help="step days: hours of the simulated day")
    ap.add_argument("--peer-files", type=int, default=16, help="step peers: DCGM files read by each of the three")
    ap.add_argument("--small-files", type=int, default=10_000, help="step smallfiles: one-line syslog files")
    ap.add_argument(
        "--steps",
        default="formats,syslog,scales,jobsizes,promjson,days,peers,smallfiles",
        help="which parts to run (e.g. `--steps scales --scales 4` adds one store size)",
    )
    ap.add_argument(
        "--formats",
        default=None,
        help="step formats: only these formats, comma-separated (e.g. `--formats syslog,megatron`; default all)",
    )
    ap.add_argument("--job-sizes", default="8,64,256,1024", help="hosts of the main job, one campus per size")
    ap.add_argument(
        "--job-node-hours",
        type=float,
        default=512 * 24.0,
        help="each job-size campus simulates this many node-hours (hours capped at 24)",
    )
    ap.add_argument("--job-seed", type=int, default=5)
    ap.add_argument("--promjson-hosts", type=int, default=500, help="hosts of the query_range answer (step promjson)")
    ap.add_argument("--promjson-points", type=int, default=720, help="samples per series (60 s step)")
    ap.add_argument(
        "--reuse-stores",
        action="store_true",
        help="job sizes: explain a store already in --cache (migrated first) instead of ingesting it again",
    )
    ap.add_argument("--cache", type=Path, default=ROOT / "benchmarks" / "cache")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "latest.json")
    args = ap.parse_args()

    args.cache.mkdir(parents=True, exist_ok=True)
    work = args.cache / "work"
    work.mkdir(exist_ok=True)
    for f in work.glob("*.duckdb*"):
        f.unlink()
    doc: dict = {
        "nodes": args.nodes,
        "hours": args.hours,
        "seed": args.seed,
        "gzip": args.gzip,
        "cores": os.cpu_count(),
        "commit": _commit(),
        "python": sys.version.split()[0],
    }
    steps = set(args.steps.split(","))
    compile_package()
    campaign = steps & {"formats", "syslog", "scales"}  # the other steps make their own data
    base = dataset(args.cache, args.nodes, args.hours, args.seed, args.gzip) if campaign else Path()
    groups = files_per_format(base / "exports") if steps & {"formats", "syslog"} else {}
    chosen = {name: paths for name, paths in groups.items() if not args.formats or name in args.formats.split(",")}
    doc["formats"] = bench_formats(chosen, work) if "formats" in steps else []
    doc["syslog_big"] = (
        bench_syslog(groups["syslog"], args.cache, work, args.syslog_lines, args.drain3_lines)
        if "syslog" in groups and "syslog" in steps
        else {"skipped": "not run (no syslog file, or --steps)"}
    )
    doc["scales"] = []
    for k in (int(s) for s in args.scales.split(",") if "scales" in steps):
        data = base if k == 1 else dataset(args.cache, args.nodes, args.hours * k, args.seed, args.gzip)
        db = args.cache / f"store-{data.name}.duckdb"
        truth = json.loads((data / "truth.json").read_text())
        entry = {
            "scale": k,
            "data": data.name,
            "store": bench_store(data / "exports", db),
            "metric_samples": truth.get("metric_samples", 0),
            "job": main_job(data),
            "jobs": len(truth.get("jobs", [])),
        }
        entry["explain"] = timed_command(
            SYNESTRA + ["explain", "--job", entry["job"], "--db", str(db), "--format", "json"], args.runs, COMPUTE
        )
        if k == 1:
            entry["tax_report"] = timed_command(
                SYNESTRA + ["tax-report", "--all", "--db", str(db), "--format", "json"], args.tax_runs or args.runs
            )
        doc["scales"].append(entry)
    doc["job_sizes"] = bench_jobsizes(args) if "jobsizes" in steps else []
    doc["promjson"] = (
        prom_json_big.bench(args.cache / "promjson", args.promjson_hosts, args.promjson_points)
        if "promjson" in steps
        else None
    )
    ctx = {
        "dataset": dataset,
        "bench_store": bench_store,
        "run_child": run_child,
        "main_job": main_job,
        "synestra": SYNESTRA,
        "py": PY,
        "root": ROOT,
        "ingest_child": INGEST_CHILD,
        "data": base,
    }
    doc["days"] = days.bench_days(args, ctx) if "days" in steps else []
    if "peers" in steps:
        doc["peers"] = peers.bench_peers(args, ctx, groups or files_per_format(base / "exports"))
    doc["small_files"] = peers.bench_small_files(args, ctx) if "smallfiles" in steps else {}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2, default=str))
    print_table(doc)
    print(f"\nJSON: {args.out}")


if __name__ == "__main__":
    main()
