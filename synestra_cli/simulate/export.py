"""Run a plan's jobs through its faults and write every export a cluster would have kept.

Layout under OUTDIR: ``exports/`` holds what the cluster wrote (ingest it as is) and ``truth.json``
what the simulator knows. Files are streamed one host (or one leaf) at a time.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from synestra_cli.simulate import faults as F
from synestra_cli.simulate import syslog
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.fabric import write_node_exporter, write_optics, write_snmp, write_topology
from synestra_cli.simulate.jobs import US, JobTimeline, simulate_job
from synestra_cli.simulate.load import COMPUTE, HANG, IO, HostLoad
from synestra_cli.simulate.model import AS_USUAL, Disturbance, JobSpec, Rendering
from synestra_cli.simulate.promtext import sink
from synestra_cli.simulate.sacct import write_sacct
from synestra_cli.simulate.telemetry import Grid, write_dcgm
from synestra_cli.simulate.trainers import write_job_log

OPTICS_HEADER = b"timestamp,host,entity,metric,value\n"


@dataclass(frozen=True)
class Intervals:
    dcgm: float
    ib: float
    snmp: float
    optics: float

    @classmethod
    def for_size(cls, nodes: int, hours: float) -> Intervals:
        """Dense sampling for small clusters; at campus scale the intervals fleets use (DCGM every 60 s,
        node_exporter 2 min, SNMP polling and optics 5 min) keep 512 nodes x 24 h near 10^8 samples."""
        dense = nodes * hours <= 512 and hours <= 24
        return cls(30.0, 30.0, 60.0, 60.0) if dense else cls(60.0, 120.0, 300.0, 300.0)


def run_jobs(plan, seed: int) -> list[JobTimeline]:
    """Each job feels the (non-harmless) faults on its hosts; decoys outside it are felt by no one else."""
    out = []
    for i, spec in enumerate(plan.jobs):
        felt = tuple(
            _for_job(f, spec) for f in plan.faults if f.disturbance is not None and set(f.hosts) & set(spec.hosts)
        )
        spec = replace(spec, disturbances=spec.disturbances + felt)
        plan.jobs[i] = spec
        out.append(simulate_job(spec, np.random.default_rng([seed, 21, i])))
    return out


def _for_job(f: F.Fault, spec: JobSpec) -> Disturbance:
    """The fault's disturbance, naming the rank of the failing GPU in this job (its global rank)."""
    d = f.disturbance
    assert d is not None
    comp = f.cause.component or ""
    if d.rank is None and comp.startswith("gpu") and f.hosts[0] in spec.hosts:
        return replace(d, rank=spec.hosts.index(f.hosts[0]) * spec.gpus_per_node + int(comp[3:]))
    return d


def host_loads(cl: Cluster, timelines: list[JobTimeline]) -> dict[str, HostLoad]:
    """What each host does, from the jobs' attempts, saves and slowdown windows."""
    loads = {h: HostLoad() for h in cl.hosts}
    for tl in timelines:
        for a in tl.launches:
            segs = _attempt_segments(tl, a)
            for h in tl.spec.hosts:
                for seg in segs:
                    loads[h].add(*seg)
    return loads


def _attempt_segments(tl: JobTimeline, a) -> list[tuple[float, float, int, float]]:
    s = lambda us: us / US  # noqa: E731
    segs = [(s(a.start), s(a.first_step), IO, 1.0), (s(a.first_step), s(a.last_progress), COMPUTE, 1.0)]
    for d in tl.spec.disturbances:
        if d.kind == "slowdown":
            lo = max(s(a.first_step), _utc(d.start))
            hi = min(s(a.last_progress), _utc(d.end) if d.end else s(a.last_progress))
            segs.append((lo, hi, COMPUTE, d.factor))
    segs += [(s(c.start), s(c.end), IO, 1.0) for c in tl.checkpoints if c.launch == a.number and c.kind == "save"]
    crashed = a.failure is not None and a.failure.incident is not None
    segs.append((s(a.last_progress), s(a.end), HANG if crashed else IO, 1.0))
    return segs


def _utc(t: datetime) -> float:
    return t.replace(tzinfo=UTC).timestamp()


def write_telemetry(
    root: Path,
    cl: Cluster,
    grid_span: tuple[float, float],
    iv: Intervals,
    seed: int,
    loads: dict[str, HostLoad],
    effects: dict[str, list[F.Effect]],
    gz: bool = False,
    render: Rendering = AS_USUAL,
) -> int:
    """dcgm, node_exporter and optics per host; snmp per leaf. Returns the number of metric samples."""
    t0, t1 = grid_span
    for d in ("dcgm", "node_exporter", "snmp", "optics"):
        (root / d).mkdir(parents=True, exist_ok=True)
    n = 0
    for i, h in enumerate(cl.hosts):
        eff = effects.get(h, [])
        with sink(root / "dcgm" / f"{h}.prom", gz) as fh:
            n += write_dcgm(
                fh, cl, h, Grid(t0, t1, iv.dcgm).times(seed, "dcgm", i), loads[h], eff, seed, render.dcgm_46_names
            )
        with sink(root / "node_exporter" / f"{h}.prom", gz) as fh:
            n += write_node_exporter(fh, cl, h, Grid(t0, t1, iv.ib).times(seed, "ib", i), loads[h], eff, seed)
        with sink(root / "optics" / f"{h}.csv", gz) as fh:
            fh.write(OPTICS_HEADER)
            n += write_optics(fh, cl, h, Grid(t0, t1, iv.optics).times(seed, "optics", i), eff, seed)
    n += write_snmp(root / "snmp", cl, t0, t1, iv.snmp, loads, effects, seed, gz)
    with open(root / "topology.csv", "wb") as fh:
        write_topology(fh, cl)
    return n


def write_syslogs(
    root: Path,
    cl: Cluster,
    t0: float,
    t1: float,
    seed: int,
    logs: list[F.LogLine],
    effects: dict[str, list[F.Effect]],
    gz: bool = False,
    render: Rendering = AS_USUAL,
) -> None:
    (root / "syslog").mkdir(parents=True, exist_ok=True)
    by_host: dict[str, list[F.LogLine]] = {h: [] for h in cl.hosts}
    for ln in logs:
        if t0 <= ln.ts < t1:
            by_host[ln.host].append(ln)
    for i, h in enumerate(cl.hosts):
        skew = float(np.random.default_rng([seed, 31, i]).uniform(-3.0, 3.0))
        boots = syslog.boot_times(cl, h, t0, effects.get(h, []), seed)
        lines = by_host[h] + syslog.routine_lines(h, t0, t1, seed, i)
        if lines or len(boots) > 1:  # a quiet host in a short window logged nothing: no empty file
            syslog.write_host(root / "syslog", cl, h, lines, boots, skew, gz, render.journal_printk)


def write_jobs(root: Path, timelines: list[JobTimeline], render: Rendering = AS_USUAL) -> None:
    """Each job's log (its trainer, launcher and Slurm's lines; attempts appended) and one ``sacct -P -D``
    file, by the job model."""
    (root / "jobs").mkdir(parents=True, exist_ok=True)
    for tl in timelines:
        write_job_log(root / "jobs", tl, render)
    write_sacct(root / "sacct.txt", timelines)
