"""Faults no rule of thumb names: one host's power cap, and gray parts that only their peers give away.

- ``power-cap-host``: a power limit left on one node (``nvidia-smi -pl``, a BMC's node budget): that host's
  GPUs report SW power cap (0x4), their power sits at the limit and the power-violation counter climbs;
  the node computes slower and the synchronous job waits for it. One host, so the host is named, not its
  rack (issue 37 item 8).
- ``gray-gpu``: one GPU's PCIe link turns marginal (a riser or retimer): its replay counter climbs a few
  times a minute, under any replay threshold, where its peers' stays at zero, and the job slows mildly
  (transfers through the link retry). No Xid, no AER line. Beside it, in the same job, another GPU whose
  correctable ECC errors run at ~1000x its peers' the whole time: a part to watch (risks), but it slows
  nothing and no checkpoint is its doing.

The physics and its sources are in docs/simulator.md. Builders take the scenario Plan (scenarios.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.faults import SW_POWER_CAP, Effect, Fault, dt
from synestra_cli.simulate.model import Cause, Disturbance

if TYPE_CHECKING:
    from synestra_cli.simulate.scenarios import Plan

# A healthy H100's correctable (single-bit) ECC errors: telemetry.py draws one every ~14 h per GPU.
SBE_BACKGROUND = 2e-5


def power_cap_host(cl: Cluster, host: str, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A power limit set on one node: SW power cap on all its GPUs, power held at the limit, the node the
    slowest of the job (pace: its GPUs stay busy while the others wait for it)."""
    cap = float(rng.uniform(380, 450))
    cause = Cause("power.capping", (host,), None, dt(start))
    effects = (
        Effect("power_cap", host, start, end, None, cap),
        Effect("clock_event", host, start, end, None, SW_POWER_CAP),
        Effect("pace", host, start, end, None),
    )
    slow = Disturbance("slowdown", dt(start), dt(end), factor=float(rng.uniform(1.25, 1.45)), cause=cause)
    return Fault("power_cap_host", (host,), start, cause, effects, (), slow, end)


def pcie_gray(cl: Cluster, host: str, gpu: int, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A marginal PCIe link: replays at 0.02-0.06/s (under the 0.1/s replay rule) from `start`, the job
    slowed by 1.25-1.35x (a reactive save follows; no Xid, no AER)."""
    cause = Cause("host.pcie", (host,), f"gpu{gpu}", dt(start))
    effects = (
        Effect("pcie_replay", host, start, end, gpu, float(rng.uniform(0.02, 0.06))),
        Effect("pace", host, start, end, gpu),
    )
    slow = Disturbance("slowdown", dt(start), dt(end), factor=float(rng.uniform(1.25, 1.35)), cause=cause)
    return Fault("pcie_gray", (host,), start, cause, effects, (), slow, end)


def sbe_gray(cl: Cluster, host: str, gpu: int, start: float, end: float, rng: np.random.Generator) -> Fault:
    """A GPU whose HBM corrects ~1000x its peers' single-bit errors (0.01-0.03/s) the whole run: ECC fixes
    them in line, nothing slows, nothing crashes (no DBE, no Xid 48/63/94)."""
    cause = Cause("gpu.memory", (host,), f"gpu{gpu}", dt(start))
    effects = (Effect("ecc_sbe", host, start, end, gpu, float(rng.uniform(0.01, 0.03))),)
    return Fault("sbe_gray", (host,), start, cause, effects, (), None, end)


def power_cap_host_scenario(p: Plan) -> None:
    """One job host capped at 35-45% of the run; a capped idle host outside the job earlier (the decoy)."""
    p.faults.append(power_cap_host(p.cl, p.pick(p.main.hosts), p.at(0.35, 0.45), p.at(0.75, 0.85), p.rng))
    out = p.pick(p.outside())
    p.faults.append(power_cap_host(p.cl, out, p.at(0.1, 0.2), p.at(0.3, 0.35), p.rng).as_decoy("outside_job"))


def gray_gpu_scenario(p: Plan) -> None:
    """A job GPU's PCIe link turns marginal at 40-50% of the run; another job GPU's correctable ECC errors
    run at ~1000x its peers' from the start (never blamed: it slows nothing); a marginal link on a GPU
    outside the job earlier."""
    host, gpu = p.pick(p.main.hosts), p.gpu()
    p.faults.append(pcie_gray(p.cl, host, gpu, p.at(0.4, 0.5), p.t1, p.rng))
    others = [(h, g) for h in p.main.hosts for g in range(p.cl.gpus_per_node) if (h, g) != (host, gpu)]
    sbe_host, sbe_gpu = others[int(p.rng.integers(len(others)))]
    p.faults.append(sbe_gray(p.cl, sbe_host, sbe_gpu, p.t0, p.t1, p.rng).as_decoy("harmless_gray", harmless=True))
    out = p.pick(p.outside())
    p.faults.append(pcie_gray(p.cl, out, p.gpu(), p.at(0.15, 0.25), p.at(0.3, 0.35), p.rng).as_decoy("outside_job"))
