"""What to do about a component at risk, by the category of its trouble (a runbook line, not a ticket).

Kept minimal here; the wording follows the vendors' own guidance: NVIDIA's Xid catalog (reset or drain
a GPU after a fell-off-the-bus or DBE, RMA on repeats), the UFM PDR plugin (isolate a port whose
symbol-error rate passes the threshold, then clean or replace the cable or transceiver).
"""

from __future__ import annotations

ACTIONS: dict[str, str] = {
    "network.link_degraded": "drain the host or isolate the port before the next collective stalls; "
    "then clean or reseat the cable/transceiver at both ends, replace if it recurs",
    "network.link_down": "check the link at both ends (cable, transceiver, switch port); "
    "drain the host if it flaps again",
    "gpu.fell_off_bus": "drain the node and reset the GPU; RMA if it falls off again",
    "gpu.memory": "drain the node, reset the GPU to remap rows; RMA on a row-remap failure or a second DBE",
    "gpu.nvlink": "drain the node and run NVLink diagnostics (dcgmi diag -r 3); reseat or RMA the baseboard on repeats",
    "gpu.other_xid": "look the Xid up in NVIDIA's catalog; drain the node if it repeats",
    "cooling.thermal": "check the rack's cooling (CDU, fans, inlet temperature) before the GPUs throttle further",
    "power.capping": "check the rack's power budget and the GPUs' power limits (nvidia-smi -q -d POWER)",
    "host.pcie": "check the PCIe device's AER counters and reseat it; drain the node if errors keep coming",
    "host.node_problem": "cordon the node and find why it stopped reporting or faulted (kubelet, kernel log, "
    "node-problem-detector conditions); uncordon once it runs a health check clean",
    "storage.slow": "check the filesystem server and its network; delay large checkpoint saves until it recovers",
}
LEMON_ACTION = "a repeat offender: take it out of the pool for repair before it costs another job"


def action_for(categories: list[str], lemon: bool = False) -> str:
    """The action for the first category that has one (categories ordered by weight of evidence)."""
    act = next((ACTIONS[c] for c in categories if c in ACTIONS), "investigate the component's telemetry")
    return f"{act}; {LEMON_ACTION}" if lemon else act
