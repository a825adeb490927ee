"""The InfiniBand PMA port counters' names and widths, as perfquery, ibqueryerrors and sysfs spell them
(formats/fabric/ib_counters.py reads them; the IBA PortCounters, PortCountersExtended, PortRcvErrorDetails and
PortXmitDiscardDetails attributes)."""

from __future__ import annotations

# (perfquery / ibqueryerrors name, sysfs counters/ name, canonical); data counters are in 4-byte words.
PMA: list[tuple[str, str, str]] = [
    ("PortXmitData", "port_xmit_data", "ib_port_xmit_data_bytes_total"),
    ("PortRcvData", "port_rcv_data", "ib_port_rcv_data_bytes_total"),
    ("PortXmitPkts", "port_xmit_packets", "ib_port_xmit_packets_total"),
    ("PortRcvPkts", "port_rcv_packets", "ib_port_rcv_packets_total"),
    ("SymbolErrorCounter", "symbol_error", "ib_port_symbol_errors_total"),
    ("LinkErrorRecoveryCounter", "link_error_recovery", "ib_port_link_error_recovery_total"),
    ("LinkDownedCounter", "link_downed", "ib_port_link_downed_total"),
    ("PortRcvErrors", "port_rcv_errors", "ib_port_rcv_errors_total"),
    ("PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors", "ib_port_rcv_remote_physical_errors_total"),
    ("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors", "ib_port_rcv_switch_relay_errors_total"),
    ("PortXmitDiscards", "port_xmit_discards", "ib_port_xmit_discards_total"),
    ("PortXmitConstraintErrors", "port_xmit_constraint_errors", "ib_port_xmit_constraint_errors_total"),
    ("PortRcvConstraintErrors", "port_rcv_constraint_errors", "ib_port_rcv_constraint_errors_total"),
    ("LocalLinkIntegrityErrors", "local_link_integrity_errors", "ib_port_local_link_integrity_errors_total"),
    (
        "ExcessiveBufferOverrunErrors",
        "excessive_buffer_overrun_errors",
        "ib_port_excessive_buffer_overrun_errors_total",
    ),
    ("VL15Dropped", "VL15_dropped", "ib_port_vl15_dropped_total"),
    ("PortXmitWait", "port_xmit_wait", "ib_port_xmit_wait_total"),
]
# perfquery -E (PortRcvErrorDetails: what PortRcvErrors counted, by cause) and -D (PortXmitDiscardDetails: what
# PortXmitDiscards counted): 16-bit counters of the IBA attributes of those names.
DETAILS: dict[str, str] = {
    "PortLocalPhysicalErrors": "ib_port_rcv_local_physical_errors_total",
    "PortMalformedPktErrors": "ib_port_rcv_malformed_packet_errors_total",
    "PortBufferOverrunErrors": "ib_port_rcv_buffer_overrun_errors_total",
    "PortDLIDMappingErrors": "ib_port_rcv_dlid_mapping_errors_total",
    "PortVLMappingErrors": "ib_port_rcv_vl_mapping_errors_total",
    "PortLoopingErrors": "ib_port_rcv_looping_errors_total",
    "PortInactiveDiscards": "ib_port_xmit_inactive_discards_total",
    "PortNeighborMTUDiscards": "ib_port_xmit_neighbor_mtu_discards_total",
    "PortSwLifetimeLimitDiscards": "ib_port_xmit_sw_lifetime_limit_discards_total",
    "PortSwHOQLifetimeLimitDiscards": "ib_port_xmit_sw_hoq_lifetime_limit_discards_total",
}
WORD_COUNTERS = {"ib_port_xmit_data_bytes_total", "ib_port_rcv_data_bytes_total"}
# Widths of the legacy PortCounters error counters (IBA PortCounters attribute; sysfs counters/ reads them too):
# such a counter stops at 2^w - 1 and stays there, so that value is no count (nor a rate): it is left out.
LEGACY_BITS = {
    "ib_port_symbol_errors_total": 16,
    "ib_port_link_error_recovery_total": 8,
    "ib_port_link_downed_total": 8,
    "ib_port_rcv_errors_total": 16,
    "ib_port_rcv_remote_physical_errors_total": 16,
    "ib_port_rcv_switch_relay_errors_total": 16,
    "ib_port_xmit_discards_total": 16,
    "ib_port_xmit_constraint_errors_total": 8,
    "ib_port_rcv_constraint_errors_total": 8,
    "ib_port_local_link_integrity_errors_total": 4,
    "ib_port_excessive_buffer_overrun_errors_total": 4,
    "ib_port_vl15_dropped_total": 16,
    **{metric: 16 for metric in DETAILS.values()},
}
# What the kernel's sysfs prints for a PMA counter of a device without a PMA (drivers/infiniband/core/sysfs.c).
NO_PMA = "N/A (no PMA)"
PERFQUERY_MAP = {pq: canonical for pq, _, canonical in PMA} | DETAILS
SYSFS_MAP = {fs: canonical for _, fs, canonical in PMA}
# perfquery fields that select counters rather than count anything.
PERFQUERY_SELECTORS = {"PortSelect", "CounterSelect", "CounterSelect2"}
