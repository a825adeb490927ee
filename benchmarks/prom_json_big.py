"""A big Prometheus `query_range` answer ingested within the memory budget (issue 37 item 7).

    python benchmarks/prom_json_big.py --hosts 500 --points 720 --work /tmp/promjson
    python benchmarks/run.py --steps promjson                # the same, as a step of the campus benchmarks

Writes (once, cached in --work) what `curl .../api/v1/query_range?query={__name__=~"DCGM_FI_DEV_(...)"}`
answers for a job of --hosts hosts x 8 GPUs: one matrix result per (metric, GPU), --points samples each
at a 60 s step, dcgm-exporter's labels; then runs `synestra ingest FILE --db DB` as a user does, in a
child process at the default SYNESTRA_MEMORY_LIMIT, and reports its time, peak RSS (wait4) and rows.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SYNESTRA = str(Path(sys.executable).parent / "synestra")
EPOCH = 1793577600  # 2026-11-02T00:00:00Z
# (field, typical value, spread): five of dcgm-exporter's default counters, integers and floats alike
METRICS = (
    ("DCGM_FI_DEV_GPU_TEMP", 62, 6),
    ("DCGM_FI_DEV_POWER_USAGE", 540.25, 80),
    ("DCGM_FI_DEV_SM_CLOCK", 1980, 0),
    ("DCGM_FI_DEV_GPU_UTIL", 97, 3),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.52, 0.05),
)


def _labels(metric: str, host: int, gpu: int) -> str:
    name = f"gpu-{host + 1:04d}"
    uuid = f"GPU-{host:08x}-{gpu:04x}-4000-8000-{host * 8 + gpu:012x}"
    return (
        f'{{"__name__":"{metric}","DCGM_FI_DRIVER_VERSION":"550.90.07","Hostname":"{name}","UUID":"{uuid}",'
        f'"device":"nvidia{gpu}","gpu":"{gpu}","instance":"{name}:9400","job":"dcgm-exporter",'
        f'"modelName":"NVIDIA H100 80GB HBM3","pci_bus_id":"00000000:{0x18 + 16 * gpu:02X}:00.0"}}'
    )


def write_query_range(path: Path, hosts: int, points: int, step: int = 60) -> int:
    """The answer, streamed to `path` one series at a time (the writer holds one series); returns the pairs."""
    stamps = [f"{EPOCH + i * step}.{(i * 37) % 1000:03d}" for i in range(points)]
    pairs = 0
    with path.open("w", encoding="utf-8") as out:
        out.write('{"status":"success","data":{"resultType":"matrix","result":[')
        first = True
        for host in range(hosts):
            for gpu in range(8):
                for metric, typical, spread in METRICS:
                    vals = [typical + spread * (((host * 31 + gpu * 7 + i) % 17) - 8) / 8 for i in range(points)]
                    text = ",".join(
                        f'[{t},"{v:g}"]' if isinstance(typical, float) else f'[{t},"{round(v)}"]'
                        for t, v in zip(stamps, vals, strict=True)
                    )
                    out.write(("" if first else ",") + f'{{"metric":{_labels(metric, host, gpu)},"values":[{text}]}}')
                    first = False
                    pairs += points
        out.write("]}}")
    return pairs


def bench(work: Path, hosts: int, points: int) -> dict:
    """Ingest the answer for `hosts` hosts into a fresh store: seconds, peak RSS, rows, file size."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / f"dcgm-{hosts}-hosts-{points}.query_range.json"
    meta = path.with_suffix(".pairs")
    if not path.exists() or not meta.exists():
        print(f"writing {path.name} (cached for later runs) ...", file=sys.stderr)
        meta.write_text(str(write_query_range(path, hosts, points)))
    db = work / "promjson.duckdb"
    for f in work.glob("promjson.duckdb*"):
        f.unlink()
    env = {k: v for k, v in os.environ.items() if k != "SYNESTRA_MEMORY_LIMIT"}  # the default budget
    with tempfile.TemporaryFile("w+b") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(
            [SYNESTRA, "ingest", str(path), "--db", str(db)], stdout=subprocess.DEVNULL, stderr=err, env=env
        )
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own peak RSS (KiB) and CPU
        wall = time.perf_counter() - t
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    rows = None
    if code == 0:
        import duckdb

        with duckdb.connect(str(db), read_only=True) as conn:
            rows = conn.execute("SELECT count(*) FROM metrics").fetchone()[0]  # type: ignore[index]
    return {
        "hosts": hosts,
        "series": hosts * 8 * len(METRICS),
        "pairs": int(meta.read_text()),
        "mb": path.stat().st_size / 1e6,
        "exit_code": code,
        "seconds": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "rows": rows,
        "stderr_tail": stderr.strip()[-300:],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--points", type=int, default=720, help="samples per series (60 s step: 720 = 12 h)")
    ap.add_argument("--work", type=Path, default=ROOT / "benchmarks" / "cache" / "promjson")
    args = ap.parse_args()
    print(json.dumps(bench(args.work, args.hosts, args.points), indent=1))


if __name__ == "__main__":
    main()
