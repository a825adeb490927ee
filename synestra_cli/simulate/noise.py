"""Benign background every healthy cluster shows: what explain must see and never blame.

Single corrected PCIe AER errors, noisy-but-healthy FEC, idle-node link flaps, application Xids on
other jobs' nodes (simulate/faults.py holds the faults that do touch a job).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.faults import Effect, LogLine, gpu_banner, link_logs


@dataclass
class Noise:
    """Benign background that every healthy cluster shows."""

    effects: list[Effect] = field(default_factory=list)
    logs: list[LogLine] = field(default_factory=list)


def benign_noise(
    cl: Cluster,
    t0: float,
    t1: float,
    rng: np.random.Generator,
    idle_hosts: tuple[str, ...],
    other_job_hosts: tuple[str, ...],
) -> Noise:
    """Single corrected AER errors, noisy-but-healthy FEC, idle-node link flaps, Xid 13/31 on other jobs."""
    noise = Noise()
    span = t1 - t0
    for h in rng.choice(cl.hosts, size=max(1, cl.nodes // 4), replace=False):
        noise.logs.extend(aer_corrected(cl, str(h), t0 + float(rng.uniform(0, span)), rng))
    for h in rng.choice(cl.hosts, size=max(1, cl.nodes // 8), replace=False):
        # noisy-but-healthy: a few symbol errors, FEC working, no loss, never slower
        noise.effects.append(Effect("link_errors", str(h), t0, t1, int(rng.integers(cl.nics_per_host)), -2.0))
    for h in idle_hosts[:2]:
        nic, ts = int(rng.integers(cl.nics_per_host)), t0 + float(rng.uniform(0.1, 0.9)) * span
        noise.logs.extend(link_logs(cl, h, nic, ts, 8.0))
        noise.effects.append(Effect("link_down", h, ts, ts + 8.0, nic))
    for h in other_job_hosts[:2]:
        gpu = int(rng.integers(cl.gpus_per_node))
        noise.logs.extend(_app_xids(cl, h, t0 + float(rng.uniform(0.1, 0.9)) * span, gpu))
    return noise


def aer_corrected(cl: Cluster, host: str, ts: float, rng: np.random.Generator) -> list[LogLine]:
    port = f"0000:{int(rng.integers(0x10, 0xF0)):02x}:01.0"
    return [
        LogLine(ts, host, f"pcieport {port}: AER: Correctable error message received from {port}", 4),
        LogLine(
            ts, host, f"pcieport {port}: PCIe Bus Error: severity=Correctable, type=Physical Layer, (Receiver ID)", 4
        ),
        LogLine(ts, host, f"pcieport {port}:   device [8086:352a] error status/mask=00000001/0000e000", 4),
        LogLine(ts, host, f"pcieport {port}:    [ 0] RxErr                  (First)", 4),
    ]


def _app_xids(cl: Cluster, host: str, ts: float, gpu: int) -> list[LogLine]:
    # An application's illegal memory access on another job's node: Xid 31 then 13 (app faults, not HW).
    return [
        *gpu_banner(cl, host, ts, gpu),
        LogLine(
            ts,
            host,
            f"NVRM: Xid (PCI:{cl.kernel_gpu_addr(gpu)}): 31, pid=2214519, name=python3, "
            "channel 0x00000012, intr 00000000. MMU Fault: ENGINE GRAPHICS GPC3 GPCCLIENT_T1_7 faulted @ "
            "0x7f1c_4a000000. Fault is of type FAULT_PDE ACCESS_TYPE_VIRT_READ",
            3,
        ),
        LogLine(
            ts + 0.5,
            host,
            f"NVRM: Xid (PCI:{cl.kernel_gpu_addr(gpu)}): 13, pid=2214519, name=python3, "
            "Graphics SM Warp Exception on (GPC 3, TPC 1, SM 0): Out Of Range Address",
            3,
        ),
    ]
