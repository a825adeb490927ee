"""Time a command with everything it starts: wall time, and CPU, peak RSS and bytes read over its process tree.

`/usr/bin/time` counts only the children a process waited for; a local Ray's raylet and actors are
not among them, so `--engine ray` would look free. This samples /proc every `--every` seconds, keeping
each descendant's last CPU and rchar figures, and reports the larger of two lower bounds of the CPU:
those samples summed (which miss at most one period of each process), and the kernel's exact figure
for the command with the descendants it reaped.

    python benchmarks/proc_tree.py -- synestra ingest EXPORTS --db LAKE/ --engine ray

Prints one JSON line on stderr: {"wall_s", "cpu_s", "peak_rss_mb", "read_mb", "processes", "rc"}, and
exits with the command's code. Linux only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(name))
    return tree


def _descendants(root: int) -> list[int]:
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += tree.get(pid, [])
    return out


def _cpu_and_rss(pid: int) -> tuple[float, int] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[11], [12]: utime, stime (fields counted after the command name); [21]: rss in pages
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE


def _read_bytes(pid: int) -> int:
    """Bytes the process asked to read (rchar: page cache included, as a warm run reads)."""
    try:
        with open(f"/proc/{pid}/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))
    except (OSError, StopIteration):
        return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=0.2, help="sampling period, seconds")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    proc = subprocess.Popen(command)
    cpu: dict[int, float] = {}
    read: dict[int, int] = {}
    peak = 0
    usage = None
    while usage is None:
        rss = 0
        for pid in _descendants(proc.pid):
            got = _cpu_and_rss(pid)
            if got:
                cpu[pid], rss = got[0], rss + got[1]
                read[pid] = _read_bytes(pid) or read.get(pid, 0)
        peak = max(peak, rss)
        pid, status, usage_now = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            usage, proc.returncode = usage_now, os.waitstatus_to_exitcode(status)
        else:
            time.sleep(args.every)
    wall = time.monotonic() - start
    # Both are lower bounds: the kernel's exact figure for the root and the descendants it reaped
    # (through them, theirs), and the samples, which also see daemons reparented away from the root.
    waited = usage.ru_utime + usage.ru_stime
    report = {
        "wall_s": round(wall, 2),
        "cpu_s": round(max(waited, sum(cpu.values())), 2),
        "peak_rss_mb": round(peak / 2**20),
        "read_mb": round(sum(read.values()) / 2**20),
        "processes": len(cpu),
        "rc": proc.returncode,
    }
    print(json.dumps(report), file=sys.stderr)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
