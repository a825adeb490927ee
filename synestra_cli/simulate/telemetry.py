"""Telemetry writers: dcgm-exporter, node_exporter InfiniBand, snmp_exporter IF-MIB, optics CSV, topology.

Every series is computed for one host (or one block of switch ports) at a time with numpy over the
whole sample grid, then streamed to its file: memory is bounded by one host's arrays. Each source has
its own sampling interval and a per-host clock skew of up to a few seconds. Random draws come from a
generator seeded by (seed, source, host), so the output does not depend on generation order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from synestra_cli.simulate import promtext
from synestra_cli.simulate.cluster import DRIVER, GPU_MODEL, Cluster
from synestra_cli.simulate.faults import HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL, Effect
from synestra_cli.simulate.load import COMPUTE, HANG, IO, HostLoad, cumulative, effect_mask, onsets, reboots

SOURCES = {"dcgm": 1, "ib": 2, "snmp": 3, "optics": 4}
MAX_SKEW_S = 3.0
COMPUTE_TRAFFIC_BPS = 18e9  # all-reduce traffic per rail while training (bytes/s)


@dataclass(frozen=True)
class Grid:
    start: float
    end: float
    interval: float

    def times(self, seed: int, source: str, index: int) -> np.ndarray:
        """Sample times of one source on one host: the grid shifted by that host clock's skew, plus jitter."""
        rng = np.random.default_rng([seed, SOURCES[source], index, 7])
        skew = rng.uniform(-MAX_SKEW_S, MAX_SKEW_S)
        n = int((self.end - self.start) // self.interval)
        return self.start + np.arange(n) * self.interval + skew + rng.uniform(0, 0.05, n)


def _rng(seed: int, source: str, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, SOURCES[source], index])


# ---------------------------------------------------------------- GPUs (dcgm-exporter)

DCGM_FIELDS = [  # (field name, prom type, help as in dcgm-exporter's default-counters.csv, integer)
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", True),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", True),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", True),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", False),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).", True),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", True),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", True),
    ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons.", True),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us).", True),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling duration due to thermal constraints (in us).", True),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", True),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.", True),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.", True),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
        True,
    ),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned (in %).", False),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active (in %).", False),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data (in %).",
        False,
    ),
]


def gpu_frame(
    cl: Cluster, host: str, ts: np.ndarray, load: HostLoad, effects: list[Effect], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Every DCGM field for every GPU of the host, shape (G, T), and the mask of samples present."""
    g, n = cl.gpus_per_node, ts.size
    state, factor = load.at(ts)
    comp, hang, io = state == COMPUTE, state == HANG, state == IO
    busy = state > 0
    noise = lambda s: rng.normal(0.0, s, (g, n))  # noqa: E731
    f = {}
    util = np.where(comp | hang, 100.0, np.where(io, 22.0, 0.0))  # NCCL kernels spin at 100% while hung
    f["DCGM_FI_DEV_GPU_UTIL"] = np.clip(util - np.abs(noise(1.0)) * busy, 0, 100)
    # A slowed job's GPUs wait for the slowest in every collective: their activity falls by the factor,
    # but the straggler's own GPU (pace) keeps computing flat out.
    pace, _ = effect_mask(ts, effects, "pace", g)
    wait = np.where(pace, 1.0, factor)
    sm = np.where(comp, 0.86 / wait, np.where(io, 0.06, np.where(hang, 0.03, 0.0)))
    sm = np.clip(sm + noise(0.01) * busy, 0, 1)
    tensor = np.clip(np.where(comp, 0.52 / wait, 0.0) + noise(0.008) * comp, 0, 1)
    f["DCGM_FI_PROF_SM_ACTIVE"], f["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] = sm, tensor
    f["DCGM_FI_PROF_DRAM_ACTIVE"] = np.clip(np.where(comp, 0.38 / wait, 0.04 * io) + noise(0.005) * busy, 0, 1)
    power = 72.0 + 590.0 * (0.3 * f["DCGM_FI_DEV_GPU_UTIL"] / 100.0 + 0.7 * tensor / 0.52) + noise(6.0)
    capped, cap = effect_mask(ts, effects, "power_cap", g)
    power = np.where(capped, np.minimum(power, cap - np.abs(noise(4.0))), power)
    events, bits = effect_mask(ts, effects, "clock_event", g)
    bits = np.where(events, bits, 0).astype(np.int64) | np.where(busy, 0, 1)[None, :]  # GPU_IDLE when idle
    heated, heat = effect_mask(ts, effects, "gpu_heat", g)
    ramp = _ramp(ts, effects, "gpu_heat", g)
    temp = 31.0 + 0.075 * (power - 72.0) + np.where(heated, heat * ramp, 0.0) + noise(0.7)
    f["DCGM_FI_DEV_POWER_USAGE"], f["DCGM_FI_DEV_GPU_TEMP"] = power, temp
    f["DCGM_FI_DEV_MEMORY_TEMP"] = temp + 7.0 + noise(0.5)
    clock = np.where(busy, 1980.0, 345.0)[None, :].repeat(g, 0)
    clock = np.where(bits & (SW_THERMAL | HW_THERMAL), 1410.0, clock)
    clock = np.where(bits & SW_POWER_CAP, 1980.0 * np.sqrt(np.clip(power / 660.0, 0.3, 1.0)), clock)
    clock = np.where(bits & (HW_SLOWDOWN | HW_POWER_BRAKE), np.minimum(clock, 900.0), clock)  # cut >= 2x
    f["DCGM_FI_DEV_SM_CLOCK"], f["DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"] = clock, bits
    down, reset = reboots(ts, effects)
    dts = np.diff(ts, prepend=ts[0] - (ts[1] - ts[0] if n > 1 else 30.0))
    f.update(_gpu_counters(g, ts, dts, power, bits, effects, reset, rng))
    stopped, _ = effect_mask(ts, effects, "gpu_stop", g)
    return f, ~(stopped | down[None, :])


def _ramp(ts: np.ndarray, effects: list[Effect], kind: str, g: int, rise_s: float = 600.0) -> np.ndarray:
    """0 -> 1 over rise_s after each effect's start: temperatures climb, they do not jump."""
    out = np.zeros((g, ts.size))
    for e in effects:
        if e.kind == kind:
            out = np.maximum(out, np.clip((ts - e.start) / rise_s, 0, 1)[None, :])
    return out


def _gpu_counters(
    g: int,
    ts: np.ndarray,
    dts: np.ndarray,
    power: np.ndarray,
    bits: np.ndarray,
    effects: list[Effect],
    reset: np.ndarray,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    f = {}
    f["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] = cumulative(power * dts * 1000.0, reset, rng.uniform(1e9, 5e10, g))
    f["DCGM_FI_DEV_POWER_VIOLATION"] = cumulative((bits & SW_POWER_CAP > 0) * dts * 1e6, reset)
    f["DCGM_FI_DEV_THERMAL_VIOLATION"] = cumulative(((bits & (SW_THERMAL | HW_THERMAL)) > 0) * dts * 1e6, reset)
    # a healthy GPU's correctable ECC errors: one every few hours; a gray one's (ecc_sbe effect) far more
    sbe, sbe_rate = effect_mask(ts, effects, "ecc_sbe", g)
    f["DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"] = cumulative(rng.poisson(np.where(sbe, sbe_rate, 2e-5) * dts), reset)
    f["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"] = cumulative(onsets(ts, effects, "ecc_dbe", g, lambda e: e.value), reset)
    erring, rate = effect_mask(ts, effects, "nvlink_err", g)
    f["DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"] = cumulative(rng.poisson(np.where(erring, rate, 0) * dts), reset)
    f["DCGM_FI_DEV_XID_ERRORS"] = _last_xid(g, ts, effects)
    # a healthy GPU's PCIe link replays nothing; a marginal one (pcie_replay effect) a few times a minute.
    # Drawn last, and only then, so that every other draw of every other host is as it always was.
    replaying, replay_rate = effect_mask(ts, effects, "pcie_replay", g)
    replays = rng.poisson(np.where(replaying, replay_rate, 0.0) * dts) if replaying.any() else np.zeros((g, ts.size))
    f["DCGM_FI_DEV_PCIE_REPLAY_COUNTER"] = cumulative(replays, reset)
    return f


def _last_xid(g: int, ts: np.ndarray, effects: list[Effect]) -> np.ndarray:
    """DCGM_FI_DEV_XID_ERRORS: the last Xid, sticky until the exporter restarts (a reboot clears it)."""
    out = np.zeros((g, ts.size))
    marks: list[tuple[float, int | None, float]] = [(e.start, e.target, e.value) for e in effects if e.kind == "xid"]
    marks += [(e.end, None, 0.0) for e in effects if e.kind == "reboot" and e.end is not None]
    for start, target, code in sorted(marks, key=lambda m: m[0]):
        out[slice(None) if target is None else target, ts >= start] = code
    return out


# DCGM 4.6 names of the fields above that it renamed (catalog.DCGM_FIELDS); the bitmask then as a float.
DCGM_46_NAMES = {
    "DCGM_FI_DEV_GPU_TEMP": "DCGM_FI_DEV_GPU_TEMP_CELSIUS",
    "DCGM_FI_DEV_MEMORY_TEMP": "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS",
    "DCGM_FI_DEV_POWER_USAGE": "DCGM_FI_DEV_BOARD_POWER_WATTS",
    "DCGM_FI_DEV_GPU_UTIL": "DCGM_FI_DEV_GPU_UTIL_RATIO",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_XID_ERRORS": "DCGM_FI_DEV_XID_ERROR",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "DCGM_FI_DEV_PCIE_REPLAY_TOTAL",
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
    "DCGM_FI_PROF_SM_ACTIVE": "DCGM_FI_PROF_SM_UTIL_RATIO",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "DCGM_FI_PROF_TENSOR_UTIL_RATIO",
    "DCGM_FI_PROF_DRAM_ACTIVE": "DCGM_FI_PROF_DRAM_UTIL_RATIO",
}


def write_dcgm(
    out: BinaryIO,
    cl: Cluster,
    host: str,
    ts: np.ndarray,
    load: HostLoad,
    effects: list[Effect],
    seed: int,
    new_names: bool = False,
) -> int:
    frame, present = gpu_frame(cl, host, ts, load, effects, _rng(seed, "dcgm", cl.host_index(host)))
    labels = [
        f'{{gpu="{i}",UUID="{cl.gpu_uuid(host, i)}",pci_bus_id="{cl.gpu_bus_id(i)}",device="nvidia{i}",'
        f'modelName="{GPU_MODEL}",Hostname="{host}",DCGM_FI_DRIVER_VERSION="{DRIVER}"}}'
        for i in range(cl.gpus_per_node)
    ]
    tsb = np.broadcast_to(ts, present.shape)
    if not new_names:
        return sum(
            promtext.family(out, name, kind, help_, labels, frame[name], tsb, present, integer)
            for name, kind, help_, integer in DCGM_FIELDS
        )
    return sum(
        promtext.family(
            out,
            DCGM_46_NAMES.get(name, name),
            kind,
            help_,
            labels,
            frame[name],
            tsb,
            present,
            "fixed" if name == "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS" else integer,
        )
        for name, kind, help_, integer in DCGM_FIELDS
    )
