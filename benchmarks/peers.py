"""benchmarks/run.py steps `peers` and `smallfiles` (issue 32's ingest targets).

`peers`: Prometheus text, ours against two figures measured on the same samples in the same run, the
three alternating run after run (each in a new process: wall and CPU seconds, peak RSS from wait4):
- the floor: DuckDB's `read_csv` of the same lines as one VARCHAR column into an in-memory database
  (every line materialised, nothing parsed; the store-file floor of `formats` also writes them);
- promtool's `tsdb create-blocks-from openmetrics` (Prometheus' own backfill into TSDB blocks), when
  promtool is installed (Debian: `apt-get install prometheus`); else the figure says so.
The samples are the first --peer-files DCGM files of the dataset, written once as one OpenMetrics file
(promtool reads one OpenMetrics file: timestamps in seconds, `# EOF` last; the HELP and TYPE lines left
out, as OpenMetrics names counters `_total` and DCGM's are not). We ingest that same file.

`smallfiles`: the fixed cost of a file. --small-files one-line syslog files, and a tenth of them, each
ingested into a fresh store; the slope between the two is the cost of one more file (start-up, the
store's open and the run's commits are in both and cancel).
"""

from __future__ import annotations

import gzip
import shutil
import statistics
from pathlib import Path
from typing import Any

FLOOR_MEMORY_CHILD = """
import duckdb, json, sys, time
conn = duckdb.connect()
t = time.perf_counter()
conn.execute("CREATE TABLE t AS SELECT * FROM read_csv(?, columns={'line': 'VARCHAR'}, delim='\\x01', quote='', "
             "escape='', header=false, auto_detect=false, strict_mode=false)", [sys.argv[1:]])
n = conn.execute("SELECT count(*) FROM t").fetchall()[0][0]
print(json.dumps({"seconds": time.perf_counter() - t, "rows": n}))
"""


def openmetrics(files: list[Path], out: Path) -> Path:
    """The samples of these Prometheus text files (ms timestamps) as one OpenMetrics file (cached)."""
    if out.exists():
        return out
    scratch = out.with_suffix(".part")
    with open(scratch, "w") as w:
        for path in files:
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as f:
                for line in f:
                    if line.startswith("#") or not line.strip():
                        continue
                    head, _, ms = line.rstrip("\n").rpartition(" ")
                    w.write(f"{head} {ms[:-3]}.{ms[-3:]}\n")
        w.write("# EOF\n")
    scratch.rename(out)
    return out


def bench_peers(args: Any, ctx: dict[str, Any], groups: dict[str, list[Path]]) -> dict[str, Any]:
    run_child, py, ingest_child = ctx["run_child"], ctx["py"], ctx["ingest_child"]
    dcgm = [p for p in groups.get("prometheus", []) if "dcgm" in p.parts][: args.peer_files]
    if not dcgm:
        return {"skipped": "no DCGM file in the dataset"}
    om = openmetrics(dcgm, args.cache / f"openmetrics-{ctx['data'].name}-{len(dcgm)}.txt")
    promtool = shutil.which("promtool")
    work = args.cache / "work"
    runs: dict[str, list[dict[str, Any]]] = {"floor": [], "ours": [], "promtool": []}
    for _ in range(max(1, args.runs)):
        runs["floor"].append(run_child([py, "-c", FLOOR_MEMORY_CHILD, str(om)]))
        store = work / "peers.duckdb"
        store.unlink(missing_ok=True)
        runs["ours"].append(run_child([py, "-c", ingest_child, str(store), str(om)]))
        if promtool:
            blocks = work / "promtool-blocks"
            shutil.rmtree(blocks, ignore_errors=True)
            runs["promtool"].append(
                run_child([promtool, "tsdb", "create-blocks-from", "openmetrics", str(om), str(blocks)])
            )
            shutil.rmtree(blocks, ignore_errors=True)
    doc: dict[str, Any] = {"files": len(dcgm), "mb": om.stat().st_size / 1e6, "runs": max(1, args.runs)}
    for name, rows in runs.items():
        if rows:
            seconds = [r.get("seconds", r["wall_s"]) for r in rows]
            doc[name] = {
                "seconds_median": statistics.median(seconds),
                "seconds_runs": seconds,
                "cpu_s_median": statistics.median(r["cpu_s"] for r in rows),
                "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
            }
    doc["lines"] = runs["floor"][0].get("rows")
    doc["rows"] = runs["ours"][0].get("rows")
    doc["vs_floor"] = doc["floor"]["seconds_median"] / doc["ours"]["seconds_median"]
    if promtool:  # promtool's whole process (its start is milliseconds), against our timed section
        doc["vs_promtool"] = doc["promtool"]["seconds_median"] / doc["ours"]["seconds_median"]
    else:
        doc["promtool"] = {"skipped": "promtool not installed (Debian: apt-get install prometheus)"}
    return doc


SYSLOG_LINE = (
    "Nov  2 03:04:{s:02d} node-{i:05d} kernel: [ 1234.567890] NVRM: GPU at PCI:0000:18:00: "
    "GPU has fallen off the bus.\n"
)


def _small_files(folder: Path, n: int) -> Path:
    if (folder / f"f{n - 1:05d}.log").exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"f{i:05d}.log").write_text(SYSLOG_LINE.format(s=i % 60, i=i))
    return folder


def bench_small_files(args: Any, ctx: dict[str, Any]) -> dict[str, Any]:
    run_child, synestra = ctx["run_child"], ctx["synestra"]
    n = args.small_files
    sizes = sorted({max(1, n // 10), n})
    out: dict[str, Any] = {"files": sizes}
    for size in sizes:
        folder = _small_files(args.cache / f"small-files-{size}", size)
        db = args.cache / "work" / f"small-{size}.duckdb"
        rows = []
        for _ in range(max(1, args.runs)):
            db.unlink(missing_ok=True)
            rows.append(run_child([*synestra, "ingest", str(folder), "--db", str(db), "--year", "2026"]))
        out[str(size)] = {
            "wall_s": statistics.median(r["wall_s"] for r in rows),
            "cpu_s": statistics.median(r["cpu_s"] for r in rows),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in rows),
        }
    if len(sizes) == 2:
        lo, hi = (out[str(s)] for s in sizes)
        per = sizes[1] - sizes[0]
        out["ms_per_file"] = 1000 * (hi["wall_s"] - lo["wall_s"]) / per
        out["cpu_ms_per_file"] = 1000 * (hi["cpu_s"] - lo["cpu_s"]) / per
    return out


def print_peers(peers: dict[str, Any], small: dict[str, Any]) -> None:
    if peers and "skipped" not in peers:
        line = (
            f"\nPrometheus text, {peers['files']} DCGM files as one OpenMetrics file ({peers['mb']:.0f} MB, "
            f"{peers['rows']:,} samples): ours {peers['ours']['seconds_median']:.2f} s "
            f"({peers['ours']['cpu_s_median']:.1f} CPU s), in-memory floor {peers['floor']['seconds_median']:.2f} s: "
            f"{peers['vs_floor']:.2f}x the floor"
        )
        if "vs_promtool" in peers:
            line += (
                f"; promtool create-blocks-from openmetrics {peers['promtool']['seconds_median']:.2f} s "
                f"({peers['promtool']['cpu_s_median']:.1f} CPU s): {peers['vs_promtool']:.2f}x faster than promtool"
            )
        else:
            line += f"; {peers['promtool']['skipped']}"
        print(line)
    if small and "ms_per_file" in small:
        print(
            f"many small files: {small['files'][0]:,} and {small['files'][1]:,} one-line syslog files: "
            f"{small[str(small['files'][0])]['wall_s']:.2f} s and {small[str(small['files'][1])]['wall_s']:.2f} s, "
            f"{small['ms_per_file']:.2f} ms per file ({small['cpu_ms_per_file']:.2f} CPU ms)"
        )
