"""Signals in the words of their layer: `Xid 79 (GPU has fallen off the bus)`, `+1 double-bit ECC error`,
`ib_port_state Active -> Down`, `GPU temperature 67 -> 87 C`, rather than a metric name and a rate.

Xid descriptions and the catalog's resolution buckets are NVIDIA's Xid catalog ("Analyzing Xid Errors
with the Xid Catalog", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), as transcribed
in ../shared/reference/log-formats.md A.1.1. IB port states are the InfiniBand PortInfo PortState
values (1 Down, 2 Init, 3 Armed, 4 Active) that ib_port_state_id carries; if_oper_status is IF-MIB's
ifOperStatus (1 up, 2 down, ...).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple


class Xid(NamedTuple):
    description: str
    immediate: str  # the catalog's resolution bucket: what to do now
    investigatory: str  # and what to do if it recurs


XID_CATALOG: dict[int, Xid] = {
    13: Xid("Graphics Engine Exception", "RESTART_APP", "WORKFLOW_XID_13"),
    31: Xid("GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31"),
    43: Xid("GPU stopped processing", "IGNORE", "CONTACT_SUPPORT"),
    45: Xid("Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45", "RESTART_FM"),
    48: Xid("Double Bit ECC Error", "WORKFLOW_XID_48", "WORKFLOW_XID_48"),
    63: Xid("GPU memory remapping event", "IGNORE", "IGNORE"),
    64: Xid("GPU memory remapping failure", "RESET_GPU", "CONTACT_SUPPORT"),
    74: Xid("NVLINK Error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
    79: Xid("GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT"),
    92: Xid("High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT"),
    94: Xid("Contained memory (ECC) error", "RESTART_APP", "IGNORE"),
    95: Xid("Uncontained memory (ECC) error", "RESET_GPU", "IGNORE"),
    109: Xid("Context Switch Timeout Error", "RESET_GPU", "CONTACT_SUPPORT"),
    119: Xid("GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
    120: Xid("GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
    144: Xid("NVLink5 unit error (NVLINK_SAW_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    145: Xid("NVLink5 unit error (NVLINK_RLW_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    146: Xid("NVLink5 unit error (NVLINK_TLW_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    147: Xid("NVLink5 unit error (NVLINK_TREX_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    148: Xid("NVLink5 unit error (NVLINK_NVLPW_CTRL_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    149: Xid("NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    150: Xid("NVLink5 unit error (NVLINK_MSE_ERROR)", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"),
    154: Xid("GPU Recovery Action Changed", "XID_154", "XID_154"),
}
# The catalog's resolution buckets in words.
BUCKETS = {
    "RESTART_APP": "restart the application",
    "RESET_GPU": "reset the GPU",
    "RESTART_BM": "reboot the node",
    "RESTART_VM": "restart the VM",
    "RESTART_FM": "restart the Fabric Manager",
    "CONTACT_SUPPORT": "contact NVIDIA support",
    "IGNORE": "no action",
    "INVESTIGATE_SW": "investigate the driver and firmware",
}
XID_SOURCE = "NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html)"

IB_PORT_STATES = {1: "Down", 2: "Init", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
IF_OPER_STATUS = {1: "up", 2: "down", 3: "testing", 4: "unknown", 5: "dormant", 6: "notPresent", 7: "lowerLayerDown"}

# Counters of discrete events: the change is a count ("+1 link down"), not a rate.
COUNTED = {
    "gpu_ecc_dbe_volatile_total": ("double-bit ECC error", "double-bit ECC errors"),
    "gpu_ecc_sbe_volatile_total": ("single-bit ECC error", "single-bit ECC errors"),
    "gpu_uncorrectable_remapped_rows_total": ("row remapped (uncorrectable)", "rows remapped (uncorrectable)"),
    "gpu_nvlink_recovery_errors_total": ("NVLink recovery error", "NVLink recovery errors"),
    "ib_port_link_downed_total": ("link down", "link downs"),
    "port_link_down_events_total": ("link down", "link downs"),
    "ib_port_link_error_recovery_total": ("link error recovery", "link error recoveries"),
}
# Rates of noisy counters, named as the layer names them.
RATE_NAMES = {
    "ib_port_symbol_errors_total": "symbol errors",
    "port_symbol_errors_total": "symbol errors",
    "port_fec_uncorrectable_codewords_total": "uncorrectable FEC codewords",
    "port_fec_corrected_codewords_total": "corrected FEC codewords",
    "ib_port_rcv_errors_total": "receive errors",
    "ib_port_rcv_remote_physical_errors_total": "remote physical errors",
    "if_in_errors_total": "input errors",
    "if_out_errors_total": "output errors",
    "ib_port_xmit_discards_total": "transmit discards",
    "if_in_discards_total": "input discards",
    "if_out_discards_total": "output discards",
    "gpu_pcie_replay_total": "PCIe replays",
    "gpu_nvlink_crc_flit_errors_total": "NVLink CRC flit errors",
    "gpu_nvlink_replay_errors_total": "NVLink replay errors",
    "gpu_thermal_violation_us_total": "thermal throttling",
    "gpu_power_violation_us_total": "power capping",
}
GAUGE_NAMES = {
    "gpu_temp_celsius": ("GPU temperature", " C"),
    "gpu_memory_temp_celsius": ("GPU memory temperature", " C"),
    "optics_rx_power_dbm": ("optic Rx power", " dBm"),
    "port_pre_fec_ber": ("pre-FEC BER", ""),
    "port_post_fec_ber": ("post-FEC BER", ""),
    "gpu_row_remap_failure": ("row remap failure flag", ""),
}
EVENT_NAMES = {
    "gpu_fell_off_bus": "GPU has fallen off the bus",
    "link_down": "link down",
    "port_module": "port module event",
    "aer": "PCIe AER error",
    "nfs_not_responding": "NFS server not responding",
    "lustre_lost": "Lustre connection lost",
    "oom_kill": "kernel OOM killer",
    "thermal": "thermal event",
    "nccl_warn": "NCCL warning",
}


def xid(code: int | None) -> str:
    """`Xid 79 (GPU has fallen off the bus)`; an Xid the catalog table here lacks keeps its number."""
    known = XID_CATALOG.get(code) if code is not None else None
    return f"Xid {code}" + (f" ({known.description})" if known else "")


def _num(v: float) -> str:
    return f"{v:.3g}"


def event(kind: str, code: int | None, message: str | None, component: str | None = None) -> str:
    if kind == "xid":
        return xid(code)
    if kind == "ib_port_state":  # mlx5_core logs the state it entered; Active is the state it left when Down
        state = (message or "").rsplit(" ", 1)[-1].capitalize() or "?"
        return "ib_port_state Active -> Down" if state == "Down" else f"ib_port_state -> {state}"
    if kind in ("nfs_not_responding", "lustre_lost") and component:
        return (
            f"{'NFS server' if kind.startswith('nfs') else 'Lustre target'} {component} "
            f"{'not responding' if kind.startswith('nfs') else 'connection lost'}"
        )
    return EVENT_NAMES.get(kind, kind.replace("_", " "))


def increase(rate_after: float, last_normal: datetime, end: datetime) -> int:
    """How many events a counter window holds: its median rate over the span from the last normal sample
    to the last anomalous one (exact for the usual one-sample window of a discrete event)."""
    span = (end - last_normal).total_seconds()
    return max(1, round(rate_after * span)) if span > 0 else 1


def metric(name: str, before: float, after: float, count: int | None, is_rate: bool) -> str:
    """One metric change in words."""
    if name in COUNTED and is_rate:
        one, many = COUNTED[name]
        n = count or 1
        return f"+{n} {one if n == 1 else many}"
    if name == "ib_port_state_id":
        return (
            f"ib_port_state {IB_PORT_STATES.get(round(before), _num(before))} -> "
            f"{IB_PORT_STATES.get(round(after), _num(after))}"
        )
    if name == "if_oper_status":
        return (
            f"oper status {IF_OPER_STATUS.get(round(before), _num(before))} -> "
            f"{IF_OPER_STATUS.get(round(after), _num(after))}"
        )
    if name in ("gpu_thermal_violation_us_total", "gpu_power_violation_us_total"):
        return f"{RATE_NAMES[name]} {after / 1e4:.0f}% of the time (was {before / 1e4:.0f}%)"
    if name in RATE_NAMES and is_rate:
        return f"{RATE_NAMES[name]} {_num(before)} -> {_num(after)}/s"
    label, unit = GAUGE_NAMES.get(name, (name, ""))
    return f"{label} {_num(before)} -> {_num(after)}{unit}"


def against_peers(name: str, rate: float, median: float, others_max: float, series: int, ratio: float) -> str:
    """A rate set beside its peers': `PCIe replays 0.0558/s, 558x its peers (median 0, max 0.00028/s of 31)`."""
    label = RATE_NAMES.get(name) or (COUNTED[name][1] if name in COUNTED else name)
    return (
        f"{label} {_num(rate)}/s, {ratio:.0f}x its peers "
        f"(median {_num(median)}, max {_num(others_max)}/s of {series - 1})"
    )
