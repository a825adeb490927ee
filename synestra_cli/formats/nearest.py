"""The format a refused file is nearest to, by the words its head holds: what `--input-format` to try.

A file no sniffer claims is most often a format Synestra reads, written or cut in a way its sniffer does not
accept (a sacct table without its header, a scrape with its samples elided): the refusal names the format
whose own words appear most in the head. Only an advice; nothing is read differently.
"""

from __future__ import annotations

# Words each format's output holds (the tools' own), weighted equally; the most hits wins.
MARKERS: dict[str, tuple[str, ...]] = {
    "syslog": ("kernel:", "NVRM:", "Xid", "pcieport", "mlx5_core", "systemd[", "[Hardware Error]", "EDAC "),
    "prometheus": ("# HELP ", "# TYPE ", "DCGM_FI_", "dcgm_", "node_", "{gpu=", 'UUID="'),
    "sacct": ("JobID", "JobName", "ExitCode", "AllocTRES", "NodeList", "COMPLETED", "CANCELLED", "------------ "),
    "torch_log": (
        "ProcessGroupNCCL",
        "Watchdog caught",
        "NCCL WARN",
        "Traceback (most recent call last)",
        "torch.distributed",
        "ChildFailedError",
        "srun: error",
        "slurmstepd",
    ),
    "megatron": ("iteration", "elapsed time per iteration", "saving checkpoint", "loading checkpoint", "megatron"),
    "nemo": ("[NeMo I", "[NeMo W", "nemo_logging"),
    "torchtitan": ("[titan]",),
    "deepspeed": ("[Rank 0] step=", "DeepSpeed", "global_step"),
    "mlperf": (":::MLLOG",),
    "ethtool_stats": ("NIC statistics:", "rx_bytes", "tx_packets", "ethtool"),
    "ib_counters": ("PortXmitData", "PortRcvErrors", "SymbolErrorCounter", "perfquery", "ibstat", "CA '"),
    "mlxlink": ("Operational Info", "Physical Counters", "mlxlink", "Module Info"),
    "sonic_fec_stats": ("FEC_CORR", "FEC_UNCORR", "IFACE"),
    "topology_csv": ("host,nic,switch",),
    "metrics_long": ("timestamp,host,entity,metric,value",),
    "gnmic_event": ("openconfig", '"tags"', '"values"'),
}


def nearest(head: str) -> str | None:
    """The format with the most marker words in the head, if one has more than any other, else None."""
    sample = head[:65536]
    scores = sorted(((sum(1 for w in words if w in sample), name) for name, words in MARKERS.items()), reverse=True)
    (best, name), (second, _) = scores[0], scores[1]
    return name if best > second else None
