"""`sacct -P -D` output for simulated jobs (log-formats.md D.8).

One allocation row per attempt (a requeued job appears once per attempt: `-D` shows duplicates), each
followed by its `.batch`, `.extern` and `.0` step rows. Times are the cluster's local time without a
zone (the simulated cluster runs in UTC), whole seconds; NodeList is a compressed hostlist.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from synestra_cli.simulate.model import JobSpec
from synestra_cli.simulate.timeline import US, Attempt, JobTimeline

HEADER = "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES"
CPUS_PER_NODE = 112
MEM_PER_NODE_G = 2000
# What the steps of an attempt say, by the attempt's State: (batch, srun step .0) as (state, exit code).
STEP_STATES = {
    "COMPLETED": (("COMPLETED", "0:0"), ("COMPLETED", "0:0")),
    "FAILED": (("FAILED", "1:0"), ("FAILED", "1:0")),
    "NODE_FAIL": (("CANCELLED", "0:9"), ("CANCELLED", "0:9")),
    "PREEMPTED": (("CANCELLED", "0:15"), ("CANCELLED", "0:15")),
    "TIMEOUT": (("CANCELLED", "0:15"), ("CANCELLED", "0:15")),
    # the step failed; then the batch script's own `scontrol requeue` cancelled it
    "REQUEUED": (("CANCELLED", "0:15"), ("FAILED", "1:0")),
}


def compress_hostlist(hosts: list[str] | tuple[str, ...]) -> str:
    """`gpu-001,gpu-002,gpu-003,gpu-009` -> `gpu-[001-003,009]`; zero padding is kept."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    plain: list[str] = []
    for h in hosts:
        m = re.fullmatch(r"(.*?)(\d+)", h)
        if m:
            groups[(m.group(1), len(m.group(2)))].append(int(m.group(2)))
        else:
            plain.append(h)
    parts = []
    for (prefix, width), nums in sorted(groups.items()):
        ranges = _ranges(sorted(set(nums)))
        text = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in ranges)
        parts.append(f"{prefix}{text}" if len(nums) == 1 else f"{prefix}[{text}]")
    return ",".join(parts + sorted(plain))


def _ranges(nums: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in nums:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out


def _clock(us: int) -> str:
    return (datetime(1970, 1, 1) + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(start_us: int, end_us: int) -> str:
    secs = end_us // US - start_us // US
    days, rest = divmod(secs, 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _tres(spec: JobSpec, nodes: int) -> str:
    cpus = nodes * CPUS_PER_NODE
    return f"billing={cpus},cpu={cpus},gres/gpu={nodes * spec.gpus_per_node},mem={nodes * MEM_PER_NODE_G}G,node={nodes}"


def attempt_rows(spec: JobSpec, a: Attempt) -> list[str]:
    """The allocation row of one attempt and its step rows."""
    times = f"{_clock(a.start)}|{_clock(a.end)}|{_elapsed(a.start, a.end)}"
    nodes = compress_hostlist(spec.hosts)
    (b_state, b_exit), (s_state, s_exit) = STEP_STATES[a.state]
    return [
        f"{spec.job_id}|{spec.name}|{spec.user}|{a.state}|{a.exit_code}|{times}|{nodes}|{_tres(spec, len(spec.hosts))}",
        f"{spec.job_id}.batch|batch||{b_state}|{b_exit}|{times}|{spec.hosts[0]}|"
        f"cpu={CPUS_PER_NODE},gres/gpu={spec.gpus_per_node},mem={MEM_PER_NODE_G}G,node=1",
        f"{spec.job_id}.extern|extern||COMPLETED|0:0|{times}|{nodes}|{_tres(spec, len(spec.hosts))}",
        f"{spec.job_id}.0|python||{s_state}|{s_exit}|{times}|{nodes}|{_tres(spec, len(spec.hosts))}",
    ]


def sacct_lines(timelines: list[JobTimeline]) -> list[str]:
    """Header, then every job's attempts in order."""
    return [HEADER] + [row for tl in timelines for a in tl.attempts for row in attempt_rows(tl.spec, a)]


def write_sacct(path: Path, timelines: list[JobTimeline]) -> Path:
    path = Path(path)
    path.write_text("\n".join(sacct_lines(timelines)) + "\n", encoding="utf-8")
    return path
