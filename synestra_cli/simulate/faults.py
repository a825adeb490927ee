"""Fault kinds: what each does to the telemetry and which Disturbance a job on the node feels.

A fault function returns a Fault: telemetry Effects (applied by simulate/telemetry.py), kernel log
lines (rendered by simulate/syslog.py), the Cause explain should name, and the Disturbance a job
using the hosts feels (None when the fault touches no job: a decoy). Times are epoch seconds (float).
The physics and its public sources are in docs/simulator.md; the benign background that touches no
job is simulate/noise.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from synestra_cli.simulate.cluster import FS_SERVER, Cluster
from synestra_cli.simulate.model import Cause, Disturbance

NCCL_TIMEOUT_S = 600.0
LUSTRE_TARGET = "scratch-OST0003"  # torch.distributed default NCCL watchdog timeout (10 min)

# clocks-event bits (DCGM_CLOCKS_EVENT_REASON_*, dcgm_fields.h)
SW_POWER_CAP, HW_SLOWDOWN, SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE = 0x04, 0x08, 0x20, 0x40, 0x80


@dataclass(frozen=True)
class Effect:
    """One change to a host's telemetry. ``target`` is a GPU or NIC index (None: all of them)."""

    kind: str  # gpu_stop | gpu_heat | clock_event | power_cap | pace | xid | ecc_dbe | nvlink_err
    host: str  # | optic_sag | link_errors | link_down | reboot
    start: float
    end: float | None = None
    target: int | None = None
    value: float = 0.0


@dataclass(frozen=True)
class LogLine:
    ts: float
    host: str
    text: str  # the message after "kernel: " (printk stamp added by the renderer)
    priority: int = 4  # syslog severity 0..7
    ident: str = "kernel"


@dataclass(frozen=True)
class Fault:
    kind: str
    hosts: tuple[str, ...]
    start: float
    cause: Cause
    effects: tuple[Effect, ...] = ()
    logs: tuple[LogLine, ...] = ()
    disturbance: Disturbance | None = None  # what a job on ``hosts`` feels
    end: float | None = None
    decoy_reason: str | None = None  # set by the scenario when no job should be blamed

    def as_decoy(self, reason: str, harmless: bool = False) -> Fault:
        """A fault explain must not blame on the main job; ``harmless``: no job feels it at all."""
        return replace(self, disturbance=None if harmless else self.disturbance, decoy_reason=reason)


def dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC).replace(tzinfo=None)


def _xid(cl: Cluster, host: str, ts: float, gpu: int, code: int, text: str, pid: bool = True) -> LogLine:
    who = "pid='<unknown>', name=<unknown>, " if pid else ""
    return LogLine(ts, host, f"NVRM: Xid (PCI:{cl.kernel_gpu_addr(gpu)}): {code}, {who}{text}", 3)


def gpu_banner(cl: Cluster, host: str, ts: float, gpu: int) -> list[LogLine]:
    # The driver names the GPU once before its first Xid: the only PCI -> UUID mapping in the log.
    return [
        LogLine(ts, host, f"NVRM: GPU at PCI:{cl.kernel_gpu_addr(gpu)}: {cl.gpu_uuid(host, gpu)}", 6),
        LogLine(ts, host, f"NVRM: GPU Board Serial Number: 1654{cl.host_index(host):05d}{gpu:04d}", 6),
    ]


def _crash(start: float, cause: Cause, incident: str, hang_s: float = NCCL_TIMEOUT_S) -> Disturbance:
    return Disturbance("crash", dt(start), hang_s=hang_s, incident=incident, cause=cause)


def _lost(d: Disturbance, back: float, error: str) -> Disturbance:
    """The GPU is unusable until the node is back from its reboot: a worker restarted on it in place dies
    with CUDA's `error` (cudaGetErrorString wording)."""
    return replace(d, lost_until=dt(back), lost_error=error)


def _reboot(host: str, at: float, down_s: float = 420.0) -> Effect:
    return Effect("reboot", host, at, at + down_s)


def ghost_link(cl: Cluster, host: str, nic: int, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A dirty or bent fibre: rx power sags, FEC and symbol errors climb, the link never goes down."""
    sag = float(rng.uniform(3.0, 5.0))
    cause = Cause("network.link_degraded", (host,), f"mlx5_{nic}", dt(start), reported_healthy=True)
    effects = (
        Effect("optic_sag", host, start, end, nic, sag),
        Effect("link_errors", host, start + 60.0, end, nic, float(rng.uniform(40.0, 120.0))),
    )
    slow = Disturbance("slowdown", dt(start + 60.0), dt(end), factor=float(rng.uniform(1.3, 1.6)), cause=cause)
    return Fault("ghost_link", (host,), start, cause, effects, (), slow, end)


def gpu_fell_off_bus(cl: Cluster, host: str, gpu: int, start: float, rng: np.random.Generator) -> Fault:
    """Xid 79: the GPU stops answering; NCCL hangs until its watchdog fires; the node is rebooted."""
    cause = Cause("gpu.fell_off_bus", (host,), f"gpu{gpu}", dt(start))
    bdf = f"{cl.kernel_gpu_addr(gpu)}.0"
    logs = [
        *gpu_banner(cl, host, start, gpu),
        LogLine(start, host, f"NVRM: Xid (PCI:{cl.kernel_gpu_addr(gpu)}): 79, GPU has fallen off the bus.", 3),
        LogLine(start, host, f"NVRM: GPU {bdf}: GPU has fallen off the bus.", 3),
    ]
    reboot_at = start + NCCL_TIMEOUT_S + float(rng.uniform(120, 300))
    effects = (
        Effect("xid", host, start, None, gpu, 79),
        Effect("gpu_stop", host, start, reboot_at, gpu),
        _reboot(host, reboot_at),
    )
    # off the bus, the GPU is gone from the PCIe tree: a restarted worker's device index is past the count
    crash = _lost(_crash(start, cause, "nccl_timeout"), reboot_at + 420.0, "invalid device ordinal")
    return Fault("gpu_fell_off_bus", (host,), start, cause, effects, tuple(logs), crash, reboot_at)


def gpu_fell_off_bus_rebooted(cl: Cluster, host: str, gpu: int, start: float, rng: np.random.Generator) -> Fault:
    """Xid 79 at a site whose automation power-cycles a node 1-3 min after a GPU falls off the bus, before
    NCCL's watchdog fires: slurmctld declares the node down when its slurmd comes back with a new boot
    time, 2.5-5 min later; the job ends NODE_FAIL (no traceback, no watchdog: the processes died with the
    node) and, submitted with --requeue, Slurm requeues it (job_mgr.c: NODE_FAIL in the accounting)."""
    f = gpu_fell_off_bus(cl, host, gpu, start, rng)
    reboot_at = start + float(rng.uniform(60, 180))
    declared = reboot_at + float(rng.uniform(150, 300))
    effects = (
        Effect("xid", host, start, None, gpu, 79),
        Effect("gpu_stop", host, start, reboot_at, gpu),
        _reboot(host, reboot_at),
    )
    crash = Disturbance(
        "crash",
        dt(start),
        hang_s=declared - start,
        incident="node_failure",
        exit_state="NODE_FAIL",
        cause=f.cause,
        lost_until=dt(reboot_at + 420.0),
        lost_error="invalid device ordinal",
    )
    return replace(f, effects=effects, disturbance=crash, end=reboot_at)


def ecc_dbe(cl: Cluster, host: str, gpu: int, start: float, rng: np.random.Generator) -> Fault:
    """Double-bit ECC error: Xid 48 then a row-remap Xid 63 (64 when remapping fails); CUDA error."""
    cause = Cause("gpu.memory", (host,), f"gpu{gpu}", dt(start))
    addr = int(rng.integers(0x100000, 0x7FFFFFFF))
    logs = [
        *gpu_banner(cl, host, start, gpu),
        _xid(
            cl,
            host,
            start,
            gpu,
            48,
            "An uncorrectable double bit error (DBE) has been detected on GPU in the "
            f"framebuffer at physAddr 0x{addr:x} partition {addr % 8}, subpartition {addr % 2}.",
        ),
        _xid(cl, host, start + 0.0001, gpu, 63, "Row Remapper: New row marked for remapping, reset gpu to activate."),
    ]
    reboot_at = start + float(rng.uniform(900, 1500))
    effects = (
        Effect("ecc_dbe", host, start, None, gpu, 1),
        Effect("xid", host, start, None, gpu, 48),
        Effect("xid", host, start + 1, None, gpu, 63),
        _reboot(host, reboot_at),
    )
    return Fault(
        "ecc_dbe",
        (host,),
        start,
        cause,
        effects,
        tuple(logs),
        _lost(_crash(start, cause, "cuda_error", hang_s=5.0), reboot_at + 420.0, "uncorrectable ECC error encountered"),
        reboot_at,
    )


def nvlink(cl: Cluster, host: str, gpu: int, start: float, rng: np.random.Generator, fatal: bool = True) -> Fault:
    """Xid 74 with NVLink CRC/replay errors climbing; fatal -> crash, else a slowdown."""
    cause = Cause("gpu.nvlink", (host,), f"gpu{gpu}", dt(start))
    link = int(rng.integers(0, 18))
    logs = [
        *gpu_banner(cl, host, start, gpu),
        _xid(
            cl,
            host,
            start,
            gpu,
            74,
            f"NVLink: fatal error detected on link {link}(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        ),
    ]
    end = start + (float(rng.uniform(900, 1500)) if fatal else 3 * 3600.0)
    effects = [
        Effect("nvlink_err", host, start - 120.0, end, gpu, float(rng.uniform(5, 20))),
        Effect("xid", host, start, None, gpu, 74),
    ]
    if fatal:
        effects.append(_reboot(host, end))
        dist = _crash(start, cause, "cuda_error", hang_s=5.0)  # cudaErrorNvlinkUncorrectable
        cause = replace(cause, first_signal=dt(start - 120.0))
        dist = _lost(
            replace(dist, cause=cause), end + 420.0, "uncorrectable NVLink error detected during the execution"
        )
    else:
        cause = replace(cause, first_signal=dt(start - 120.0))
        dist = Disturbance("slowdown", dt(start), dt(end), factor=float(rng.uniform(1.3, 1.5)), cause=cause)
    return Fault("nvlink", (host,), start, cause, tuple(effects), tuple(logs), dist, end)


def link_flap(cl: Cluster, host: str, nic: int, start: float, rng: np.random.Generator, down_s: float = 20.0) -> Fault:
    """The link goes down and up: IB link_downed increments, mlx5 logs DOWN/ACTIVE; the collective in
    flight loses its queue pair and the job hangs until the NCCL watchdog fires."""
    cause = Cause("network.link_down", (host,), f"mlx5_{nic}", dt(start))
    logs = link_logs(cl, host, nic, start, down_s)
    effects = (Effect("link_down", host, start, start + down_s, nic),)
    return Fault(
        "link_flap", (host,), start, cause, effects, tuple(logs), _crash(start, cause, "nccl_timeout"), start + down_s
    )


def link_logs(cl: Cluster, host: str, nic: int, start: float, down_s: float) -> list[LogLine]:
    tag = f"mlx5_core {cl.nic_bdf(nic)} mlx5_{nic}:"
    return [
        LogLine(start, host, f"{tag} Port: 1 Link DOWN", 6),
        LogLine(start + down_s - 2.0, host, f"{tag} Port: 1 Link INIT", 6),
        LogLine(start + down_s, host, f"{tag} Port: 1 Link ACTIVE", 6),
    ]


def thermal_rack(cl: Cluster, rack: str, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A rack's cooling degrades: GPU temperatures climb for minutes, then thermal clock events slow it."""
    hosts = cl.rack_hosts(rack)
    throttle = start + float(rng.uniform(300, 600))
    cause = Cause("cooling.thermal", hosts, rack, dt(start))
    effects = tuple(
        e
        for h in hosts
        for e in (
            Effect("gpu_heat", h, start, end, None, float(rng.uniform(18, 24))),
            Effect("clock_event", h, throttle, end, None, SW_THERMAL | HW_THERMAL),
        )
    )
    slow = Disturbance("slowdown", dt(throttle), dt(end), factor=float(rng.uniform(1.3, 1.5)), cause=cause)
    return Fault("thermal_rack", hosts, start, cause, effects, (), slow, end)


def power_capping(
    cl: Cluster, hosts: tuple[str, ...], start: float, end: float, rng: np.random.Generator, component: str
) -> Fault:
    """A power-cap policy (PDU/rack budget): power-cap bits set, clocks and power fall, steps slow."""
    cap = float(rng.uniform(400, 480))
    cause = Cause("power.capping", hosts, component, dt(start))
    effects = tuple(Effect("power_cap", h, start, end, None, cap) for h in hosts) + tuple(
        Effect("clock_event", h, start, end, None, SW_POWER_CAP) for h in hosts
    )
    slow = Disturbance("slowdown", dt(start), dt(end), factor=float(rng.uniform(1.25, 1.45)), cause=cause)
    return Fault("power_capping", hosts, start, cause, effects, (), slow, end)


def power_brake(cl: Cluster, host: str, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A node's power supply asserts the external power brake: every GPU of the host reports HW power
    brake and HW slowdown (0x88), clocks halve and power sits flat well below its peers'; the whole
    synchronous job slows to that node's pace. The power-violation counter (SW capping) stays put."""
    cause = Cause("power.capping", (host,), None, dt(start))
    flat = float(rng.uniform(260, 330))
    effects = (
        Effect("power_cap", host, start, end, None, flat),
        Effect("clock_event", host, start, end, None, HW_POWER_BRAKE | HW_SLOWDOWN),
        Effect("pace", host, start, end, None),
    )
    slow = Disturbance("slowdown", dt(start), dt(end), factor=float(rng.uniform(1.3, 1.6)), cause=cause)
    return Fault("power_brake", (host,), start, cause, effects, (), slow, end)


def slow_storage(
    cl: Cluster, hosts: tuple[str, ...], start: float, end: float, rng: np.random.Generator, lustre: bool = False
) -> Fault:
    """The filesystem server stalls: clients log NFS 'not responding' (or Lustre lost); saves stretch."""
    cause = Cause("storage.slow", hosts, LUSTRE_TARGET if lustre else FS_SERVER, dt(start))
    logs: list[LogLine] = []
    for i, h in enumerate(hosts):
        t0 = start + 0.3 * i
        if lustre:  # the object storage target is what the client names (aws-parallelcluster#2701)
            osc = f"Lustre: {LUSTRE_TARGET}-osc-ffff8f0e5c2a1000: Connection"
            logs.append(
                LogLine(
                    t0,
                    h,
                    f"{osc} to {LUSTRE_TARGET} (at 10.10.0.11@o2ib) was lost; in progress "
                    "operations using this service will wait for recovery to complete",
                    4,
                )
            )
            logs.append(LogLine(end + 0.3 * i, h, f"{osc} restored to {LUSTRE_TARGET} (at 10.10.0.11@o2ib)", 6))
        else:
            logs.append(LogLine(t0, h, f"nfs: server {FS_SERVER} not responding, still trying", 4))
            logs.append(LogLine(end + 0.3 * i, h, f"nfs: server {FS_SERVER} OK", 6))
    dist = Disturbance("slow_storage", dt(start), dt(end), factor=float(rng.uniform(4.0, 8.0)), cause=cause)
    return Fault("slow_storage", hosts, start, cause, (), tuple(logs), dist, end)


def preemption(cl: Cluster, hosts: tuple[str, ...], start: float) -> Fault:
    """The scheduler preempts the job: SIGTERM, a save, exit, requeue. No hardware signal, no faulty host."""
    cause = Cause("scheduler.preemption", (), None, dt(start))
    return Fault("preemption", hosts, start, cause, (), (), Disturbance("preempt", dt(start), cause=cause))


def software_crash(cl: Cluster, hosts: tuple[str, ...], start: float) -> Fault:
    """A Python exception in the training code: a traceback and nothing in the infrastructure."""
    cause = Cause("software.crash", hosts, None, dt(start))
    dist = _crash(start, cause, "python_exception", hang_s=2.0)
    return Fault("software_crash", hosts, start, cause, (), (), replace(dist, rank=0))


def straggler(
    cl: Cluster, hosts: tuple[str, ...], host: str, start: float, end: float, rng: np.random.Generator, rank: int
) -> Fault:
    """One rank computes slower (more work: imbalance, a longer sequence shard): every rank waits for it
    at each collective; no infrastructure signal. Its GPU keeps computing flat out while every other
    GPU's tensor/SM activity and power fall by the slowdown factor (they wait in NCCL)."""
    cause = Cause("workload.straggler", (host,), None, dt(start))
    factor = float(rng.uniform(1.3, 1.5))
    slow = Disturbance("slowdown", dt(start), dt(end), factor=factor, rank=rank, cause=cause)
    pace = Effect("pace", host, start, end, rank % cl.gpus_per_node)
    return Fault("straggler", (host,), start, cause, (pace,), (), slow, end)
