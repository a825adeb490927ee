#!/usr/bin/env python3
"""`synestra ingest --follow` on a folder that grows (issue 16 item 3's figure).

    flock /work/wt/heavy.lock nice python benchmarks/follow_growth.py --minutes 10 --work DIR

For --minutes, a writer (this script) grows DIR/watched/ the way a cluster's log host does:
- every second, --rate RFC 3164 kernel lines per host appended to syslog/HOST.log (--hosts of them);
- every --rotate-every seconds, logrotate's `create` + `compress` + `delaycompress`: HOST.log.N.gz ->
  HOST.log.N+1.gz, HOST.log.1 -> HOST.log.2.gz (compressed), HOST.log -> HOST.log.1, a new HOST.log;
- the files of a simulated `ghost-link` run (DCGM, node_exporter, fabric, optics, topology, Megatron logs,
  sacct) arriving one by one, evenly over the run, as an exporter drops them.
`synestra ingest --follow` polls it every --interval seconds meanwhile; its RSS is sampled every
--sample seconds. At the end the follower is stopped with SIGINT, the final files are ingested once into
another store, and every row of every table (with the path of its file) is compared between the two.
Prints one JSON document (also written to --out).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from synestra_cli.store.sources import BOOKKEEPING_TABLES

PY = sys.executable
SYNESTRA = [str(Path(PY).parent / "synestra")]
TEMPLATES = [  # kernel lines of the kinds a GPU node logs (docs/formats.md, syslog)
    "NVRM: Xid (PCI:0000:{bus:02x}:00): 13, pid={pid}, Graphics Exception: ESR 0x50{n:04x}",
    "mlx5_core 0000:{bus:02x}:00.0: mlx5_port_module_event:1149: Port module event: module 0, Cable plugged",
    "pcieport 0000:{bus:02x}:01.0: AER: Corrected error received: 0000:{bus:02x}:00.0",
    "nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected invalid context, skipping further processing",
    "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode. seq {n}",
]


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


class Writer:
    def __init__(self, root: Path, hosts: int, rate: int) -> None:
        self.dir = root / "syslog"
        self.dir.mkdir(parents=True)
        self.hosts = [f"gpu-{i:03d}" for i in range(1, hosts + 1)]
        self.rate, self.n, self.t0 = rate, 0, 10 * 3600  # simulated clock: Nov 29 10:00:00 on

    def append(self, second: int) -> None:
        ts = self.t0 + second
        stamp = f"Nov 29 {ts // 3600:02d}:{ts // 60 % 60:02d}:{ts % 60:02d}"
        for h, host in enumerate(self.hosts):
            lines = []
            for _ in range(self.rate):
                self.n += 1
                text = TEMPLATES[self.n % len(TEMPLATES)].format(bus=0x10 + h, pid=1000 + self.n % 5000, n=self.n)
                lines.append(f"{stamp} {host} kernel: {text}\n")
            with open(self.dir / f"{host}.log", "a") as f:
                f.writelines(lines)

    def rotate(self) -> None:
        for host in self.hosts:
            base = self.dir / f"{host}.log"
            gz = sorted(self.dir.glob(f"{host}.log.*.gz"), key=lambda p: int(p.name.split(".")[-2]), reverse=True)
            for p in gz:
                p.rename(self.dir / f"{host}.log.{int(p.name.split('.')[-2]) + 1}.gz")
            one = self.dir / f"{host}.log.1"
            if one.exists():  # gzip writes the .gz in place, then removes the original
                with open(one, "rb") as f, gzip.open(self.dir / f"{host}.log.2.gz", "wb") as g:
                    shutil.copyfileobj(f, g)
                one.unlink()
            if base.exists():
                base.rename(one)
            base.touch()


def _wait_quiet(log: Path, quiet_s: float, limit_s: float = 600) -> None:
    """Until the follower has printed nothing for quiet_s (every file loaded: a poll that loads nothing
    prints nothing), at most limit_s."""
    deadline, size, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        now = log.stat().st_size
        if now != size:
            size, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.5)


def _slope_mb_per_10min(samples: list[dict], since_s: float) -> float | None:
    """Least-squares slope of the RSS samples taken from `since_s` on (the warm-up left out), in MB per
    10 minutes: near 0 when the follower's memory is flat."""
    pts = [(s["t_s"], s["rss_mb"]) for s in samples if s["t_s"] >= since_s and s["rss_mb"] > 0]
    if len(pts) < 2:
        return None
    mt = sum(t for t, _ in pts) / len(pts)
    mr = sum(r for _, r in pts) / len(pts)
    var = sum((t - mt) ** 2 for t, _ in pts)
    return round(600 * sum((t - mt) * (r - mr) for t, r in pts) / var, 2) if var else None


def _compare(follow_db: Path, oneshot_db: Path) -> dict:
    c = duckdb.connect()
    c.execute(f"ATTACH '{follow_db}' AS f (READ_ONLY); ATTACH '{oneshot_db}' AS o (READ_ONLY)")
    tables = [
        r[0]
        for r in c.execute(
            "SELECT DISTINCT table_name FROM duckdb_columns() JOIN duckdb_tables() USING (database_name, table_name) "
            "WHERE database_name = 'o' AND column_name = 'source_id' AND NOT list_contains($skip, table_name) "
            "ORDER BY 1",
            {"skip": list(BOOKKEEPING_TABLES)},
        ).fetchall()
    ]
    out = {}
    for t in tables:

        def rows(db: str, t: str = t) -> str:
            return f"SELECT s.path, t.* EXCLUDE (source_id) FROM {db}.{t} t JOIN {db}.sources s USING (source_id)"

        n_f = c.execute(f"SELECT count(*) FROM ({rows('f')})").fetchone()[0]
        n_o = c.execute(f"SELECT count(*) FROM ({rows('o')})").fetchone()[0]
        only_f = c.execute(f"SELECT count(*) FROM ({rows('f')} EXCEPT ALL {rows('o')})").fetchone()[0]
        only_o = c.execute(f"SELECT count(*) FROM ({rows('o')} EXCEPT ALL {rows('f')})").fetchone()[0]
        out[t] = {"follow": n_f, "one_shot": n_o, "only_in_follow": only_f, "only_in_one_shot": only_o}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--interval", type=float, default=5)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--rate", type=int, default=20, help="lines per second per host")
    ap.add_argument("--rotate-every", type=float, default=180)
    ap.add_argument("--sample", type=float, default=30)
    ap.add_argument("--sim-hours", type=float, default=1)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()

    work = args.work.resolve()
    sim = work / "sim"
    if not (sim / "exports").exists():
        subprocess.run(
            [*SYNESTRA, "simulate", str(sim), "--scenario", "ghost-link", "--seed", "3", "--nodes", "8"]
            + ["--hours", str(args.sim_hours), "--force"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    arriving = sorted(p for p in (sim / "exports").rglob("*") if p.is_file())
    for name in ("watched", "follow.duckdb", "follow.duckdb.wal", "oneshot.duckdb", "oneshot.duckdb.wal"):
        p = work / name
        shutil.rmtree(p) if p.is_dir() else p.unlink(missing_ok=True)
    watched = work / "watched"
    writer = Writer(watched, args.hosts, args.rate)
    writer.append(0)

    with open(work / "follow.stderr", "w") as log:
        cmd = [*SYNESTRA, "ingest", "--follow", str(watched), "--interval", str(args.interval)]
        cmd += ["--db", str(work / "follow.duckdb"), "--year", "2026"]
        started = resource.getrusage(resource.RUSAGE_CHILDREN)
        # SIGINT back to its default in the follower: a shell's background job (`cmd &` in a script) starts
        # with it ignored, and then Python's Ctrl-C handler is not installed (the follower never stops)
        proc = subprocess.Popen(
            cmd,
            stderr=log,
            env={**os.environ, "SYNESTRA_LOCK_WAIT": "30"},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        start = time.monotonic()
        duration = args.minutes * 60
        samples, next_sample, next_rotate, second, next_file = [], 0.0, args.rotate_every, 0, 0
        while (now := time.monotonic() - start) < duration:
            if now >= next_sample:
                samples.append({"t_s": round(now), "rss_mb": round((_rss_kb(proc.pid) or 0) / 1024, 1)})
                next_sample += args.sample
            if now >= next_rotate:
                writer.rotate()
                next_rotate += args.rotate_every
            while next_file < len(arriving) and now >= duration * (next_file + 1) / (len(arriving) + 1):
                src = arriving[next_file]
                dst = watched / "exports" / src.relative_to(sim / "exports")
                dst.parent.mkdir(parents=True, exist_ok=True)
                part = dst.with_name(f".{dst.name}.part")  # an exporter's atomic drop (hidden: not read)
                shutil.copyfile(src, part)
                part.rename(dst)
                next_file += 1
            second += 1
            writer.append(second)
            time.sleep(max(0.0, start + second - time.monotonic()))
        _wait_quiet(work / "follow.stderr", 3 * args.interval)  # the last polls: all loaded, nothing waiting
        samples.append({"t_s": round(time.monotonic() - start), "rss_mb": round((_rss_kb(proc.pid) or 0) / 1024, 1)})
        proc.send_signal(signal.SIGINT)
        try:
            exit_code = proc.wait(timeout=300)
        except subprocess.TimeoutExpired:
            proc.terminate()  # SIGTERM: exits 143 the same way
            exit_code = proc.wait()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    follow_wall = time.monotonic() - start
    polls = sum(1 for line in (work / "follow.stderr").read_text().splitlines() if line.startswith("poll "))

    before = usage
    t0 = time.monotonic()
    one = subprocess.run(
        [*SYNESTRA, "ingest", str(watched), "--db", str(work / "oneshot.duckdb"), "--year", "2026"],
        capture_output=True,
        text=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tables = _compare(work / "follow.duckdb", work / "oneshot.duckdb")
    doc = {
        "minutes": args.minutes,
        "interval_s": args.interval,
        "hosts": args.hosts,
        "lines_per_s": args.hosts * args.rate,
        "syslog_lines_written": writer.n,
        "files_final": sum(1 for p in watched.rglob("*") if p.is_file()),
        "follow": {
            "exit": exit_code,
            "wall_s": round(follow_wall, 1),
            "cpu_s": round(usage.ru_utime + usage.ru_stime - started.ru_utime - started.ru_stime, 1),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),  # the largest child so far: the follower
            "polls_that_loaded": polls,
            "rss_mb_every_sample": samples,
            "rss_slope_last_half_mb_per_10min": _slope_mb_per_10min(samples, duration / 2),
        },
        "one_shot": {
            "exit": one.returncode,
            "wall_s": round(time.monotonic() - t0, 1),
            "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
        },
        "rows_equal": all(v["only_in_follow"] == 0 and v["only_in_one_shot"] == 0 for v in tables.values()),
        "tables": tables,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
