"""Benchmark `synestra explain --job` on a store of ~10^8 metric samples, as the user sees it.

Builds (once) a store from one simulated scenario plus background telemetry of 1,000 other hosts
over the same hours (each host's series sorted by entity and time, as ingest writes them), then runs
the whole `synestra explain` command: one warm-up, then the median of 5 runs.

    python benchmarks/explain_bench.py [--dir /tmp/explain-bench] [--samples 100000000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Background series: 1,000 hosts x 48 (entity, metric) series, one sample every SPACING seconds.
PAD_SQL = """
INSERT INTO metrics (ts, host, entity, metric, value, source_id)
SELECT ts, host, entity, metric, value, 999999 FROM (
    SELECT $t0::TIMESTAMP + to_seconds(s * $spacing) AS ts,
           printf('bg-%04d', h) AS host, printf('gpu%d', e % 8) AS entity,
           ['gpu_temp_celsius', 'gpu_power_watts', 'gpu_tensor_active_ratio', 'gpu_util_percent',
            'ib_port_symbol_errors_total', 'ib_port_rcv_errors_total'][e // 8 + 1] AS metric,
           (h * 7 + e * 3 + s % 17)::DOUBLE AS value
    FROM range($h0, $h1) r1(h), range(48) r2(e), range($n) r3(s)
) ORDER BY host, entity, metric, ts
"""


def build(root: Path, samples: int) -> Path:
    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import ingest_paths
    from synestra_cli.simulate.scenarios import simulate
    from synestra_cli.store.connect import connect

    db = root / "store.duckdb"
    if db.exists():
        return db
    meta = simulate(root / "sim", "ghost-link", seed=11, nodes=16, hours=6.0, overwrite=True)
    conn = connect(db)
    ingest_paths(conn, [root / "sim" / "exports"], IngestOptions())
    t0 = meta["start"].replace("Z", "")
    per_host = samples // (1000 * 48)
    spacing = 6 * 3600 / per_host
    conn.execute(
        "INSERT INTO sources VALUES (999999, 'bench-padding', 'bench-padding', 'bench', 0, 0, 0, "
        "NULL, NULL, NULL, DEFAULT)"
    )
    for h0 in range(0, 1000, 50):  # chunks: bounded memory on a small machine
        conn.execute(PAD_SQL, {"t0": t0, "spacing": spacing, "h0": h0, "h1": h0 + 50, "n": per_host})
    print(f"metric samples: {conn.execute('SELECT count(*) FROM metrics').fetchone()[0]:,}", file=sys.stderr)
    conn.close()
    return db


def timed(db: Path, job: str) -> float:
    cmd = [str(Path(sys.executable).parent / "synestra"), "explain", "--db", str(db), "--job", job]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, default=Path("/tmp/explain-bench"))
    ap.add_argument("--samples", type=int, default=100_000_000)
    ap.add_argument("--job", default="1001")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    db = build(args.dir, args.samples)
    timed(db, args.job)  # warm-up: page cache, .pyc
    runs = [timed(db, args.job) for _ in range(5)]
    print(
        f"explain --job {args.job}: median {statistics.median(runs):.3f} s over 5 runs "
        f"({', '.join(f'{r:.3f}' for r in runs)})"
    )


if __name__ == "__main__":
    main()
