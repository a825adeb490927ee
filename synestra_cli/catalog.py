"""The metric catalog: canonical metric names (with unit and kind) and the source names that map to them.

Canonical names are snake_case, end in their unit, and end in ``_total`` when the series is a
cumulative counter (rates come from window functions over them, with resets handled). Metrics not in
the catalog are kept under their own source name (kind ``unknown``).
"""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    name: str
    unit: str
    kind: str  # counter | gauge | bitmask | last_value
    description: str


CANONICAL: list[Metric] = [
    # --- GPU (DCGM) ---
    Metric("gpu_util_percent", "percent", "gauge", "GPU utilisation (busy time; stays ~100% while NCCL spins)"),
    Metric("gpu_gr_engine_active_ratio", "ratio", "gauge", "fraction of time the graphics/compute engine was busy"),
    Metric("gpu_sm_active_ratio", "ratio", "gauge", "fraction of time SMs had a warp resident"),
    Metric("gpu_sm_occupancy_ratio", "ratio", "gauge", "SM occupancy"),
    Metric("gpu_tensor_active_ratio", "ratio", "gauge", "tensor-core pipe activity"),
    Metric("gpu_dram_active_ratio", "ratio", "gauge", "memory interface activity"),
    Metric("gpu_power_watts", "W", "gauge", "power draw"),
    Metric("gpu_energy_millijoules_total", "mJ", "counter", "energy since driver load"),
    Metric("gpu_temp_celsius", "C", "gauge", "GPU core temperature"),
    Metric("gpu_memory_temp_celsius", "C", "gauge", "HBM temperature"),
    Metric("gpu_sm_clock_mhz", "MHz", "gauge", "SM clock"),
    Metric("gpu_memory_clock_mhz", "MHz", "gauge", "memory clock"),
    Metric("gpu_clock_events_bitmask", "bitmask", "bitmask", "clocks-event (throttle) reasons; bits: docs/formats.md"),
    Metric("gpu_xid_last", "code", "last_value", "last Xid seen by DCGM (not a count; sticks)"),
    Metric("gpu_ecc_sbe_volatile_total", "errors", "counter", "single-bit ECC errors since boot"),
    Metric("gpu_ecc_dbe_volatile_total", "errors", "counter", "double-bit ECC errors since boot"),
    Metric("gpu_ecc_sbe_aggregate_total", "errors", "counter", "single-bit ECC errors, lifetime"),
    Metric("gpu_ecc_dbe_aggregate_total", "errors", "counter", "double-bit ECC errors, lifetime"),
    Metric("gpu_retired_pages_dbe", "pages", "gauge", "pages retired for DBE"),
    Metric("gpu_row_remap_failure", "flag", "gauge", "row remapping failed (1)"),
    Metric("gpu_correctable_remapped_rows_total", "rows", "counter", "rows remapped for correctable errors"),
    Metric("gpu_uncorrectable_remapped_rows_total", "rows", "counter", "rows remapped for uncorrectable errors"),
    Metric("gpu_pcie_replay_total", "replays", "counter", "PCIe replays"),
    Metric("gpu_nvlink_crc_flit_errors_total", "errors", "counter", "NVLink CRC flit errors, all links"),
    Metric("gpu_nvlink_crc_data_errors_total", "errors", "counter", "NVLink CRC data errors, all links"),
    Metric("gpu_nvlink_replay_errors_total", "errors", "counter", "NVLink replay errors, all links"),
    Metric("gpu_nvlink_recovery_errors_total", "errors", "counter", "NVLink recovery errors, all links"),
    Metric("gpu_power_violation_us_total", "us", "counter", "time throttled by power cap"),
    Metric("gpu_thermal_violation_us_total", "us", "counter", "time throttled by temperature"),
    Metric("gpu_fb_used_mib", "MiB", "gauge", "frame buffer used"),
    Metric("gpu_fb_free_mib", "MiB", "gauge", "frame buffer free"),
    # nvidia-smi -q / --query-gpu (formats/telemetry/nvidia_smi_q.py, nvidia_smi_csv.py)
    Metric("gpu_power_limit_watts", "W", "gauge", "enforced power limit"),
    Metric("gpu_pcie_link_gen", "generation", "gauge", "PCIe link generation in use (drops at idle)"),
    Metric("gpu_pcie_link_gen_max", "generation", "gauge", "highest PCIe generation of the GPU and host"),
    Metric("gpu_pcie_link_width", "lanes", "gauge", "PCIe link width in use"),
    Metric("gpu_pcie_link_width_max", "lanes", "gauge", "PCIe link width the GPU supports"),
    Metric("gpu_row_remap_pending", "flag", "gauge", "row remapping pending a GPU reset (1)"),
    Metric("gpu_retired_pages_pending", "flag", "gauge", "page retirement pending a reboot (1)"),
    Metric("gpu_retired_pages_sbe", "pages", "gauge", "pages retired for repeated SBE"),
    # --- InfiniBand HCA / switch port (PMA counters: perfquery, sysfs, node_exporter) ---
    Metric("ib_port_rcv_data_bytes_total", "bytes", "counter", "received data (PMA words x 4)"),
    Metric("ib_port_xmit_data_bytes_total", "bytes", "counter", "transmitted data (PMA words x 4)"),
    Metric("ib_port_rcv_packets_total", "packets", "counter", "received packets"),
    Metric("ib_port_xmit_packets_total", "packets", "counter", "transmitted packets"),
    Metric("ib_port_symbol_errors_total", "errors", "counter", "symbol errors (physical layer)"),
    Metric("ib_port_link_error_recovery_total", "events", "counter", "link retrains"),
    Metric("ib_port_link_downed_total", "events", "counter", "times the link went down"),
    Metric("ib_port_rcv_errors_total", "packets", "counter", "received packets with errors"),
    Metric("ib_port_rcv_remote_physical_errors_total", "packets", "counter", "packets marked bad upstream"),
    Metric("ib_port_rcv_switch_relay_errors_total", "packets", "counter", "switch relay errors"),
    Metric("ib_port_xmit_discards_total", "packets", "counter", "outbound packets discarded"),
    Metric("ib_port_xmit_constraint_errors_total", "packets", "counter", "xmit constraint errors"),
    Metric("ib_port_rcv_constraint_errors_total", "packets", "counter", "rcv constraint errors"),
    Metric("ib_port_local_link_integrity_errors_total", "events", "counter", "local link integrity errors"),
    Metric("ib_port_excessive_buffer_overrun_errors_total", "events", "counter", "buffer overruns"),
    Metric("ib_port_vl15_dropped_total", "packets", "counter", "VL15 packets dropped"),
    Metric("ib_port_xmit_wait_total", "ticks", "counter", "ticks with data to send but no credit (congestion)"),
    # perfquery -E / -D: which cause a PortRcvErrors / PortXmitDiscards count had
    Metric("ib_port_rcv_local_physical_errors_total", "packets", "counter", "rcv errors: local physical (CRC)"),
    Metric("ib_port_rcv_malformed_packet_errors_total", "packets", "counter", "rcv errors: malformed packets"),
    Metric("ib_port_rcv_buffer_overrun_errors_total", "packets", "counter", "rcv errors: buffer overrun"),
    Metric("ib_port_rcv_dlid_mapping_errors_total", "packets", "counter", "rcv errors: DLID mapping"),
    Metric("ib_port_rcv_vl_mapping_errors_total", "packets", "counter", "rcv errors: VL mapping"),
    Metric("ib_port_rcv_looping_errors_total", "packets", "counter", "rcv errors: looping"),
    Metric("ib_port_xmit_inactive_discards_total", "packets", "counter", "xmit discards: port inactive"),
    Metric("ib_port_xmit_neighbor_mtu_discards_total", "packets", "counter", "xmit discards: neighbour MTU"),
    Metric("ib_port_xmit_sw_lifetime_limit_discards_total", "packets", "counter", "xmit discards: switch lifetime"),
    Metric("ib_port_xmit_sw_hoq_lifetime_limit_discards_total", "packets", "counter", "xmit discards: HOQ lifetime"),
    Metric("ib_port_state_id", "state", "gauge", "logical port state (4 = ACTIVE)"),
    Metric("ib_port_physical_state_id", "state", "gauge", "physical port state (5 = LinkUp)"),
    Metric("ib_port_rate_bytes_per_second", "bytes/s", "gauge", "link rate"),
    # --- Switch interfaces (IF-MIB via snmp_exporter, gNMI) ---
    Metric("if_in_octets_total", "bytes", "counter", "ifHCInOctets"),
    Metric("if_out_octets_total", "bytes", "counter", "ifHCOutOctets"),
    Metric("if_in_ucast_pkts_total", "packets", "counter", "ifHCInUcastPkts"),
    Metric("if_out_ucast_pkts_total", "packets", "counter", "ifHCOutUcastPkts"),
    Metric("if_in_errors_total", "packets", "counter", "ifInErrors"),
    Metric("if_out_errors_total", "packets", "counter", "ifOutErrors"),
    Metric("if_in_discards_total", "packets", "counter", "ifInDiscards"),
    Metric("if_out_discards_total", "packets", "counter", "ifOutDiscards"),
    Metric("if_oper_status", "state", "gauge", "ifOperStatus (1 up, 2 down)"),
    # --- Physical layer: FEC, BER, optics (mlxlink, SONiC, ethtool, gNMI, long CSV) ---
    Metric("port_fec_corrected_codewords_total", "codewords", "counter", "FEC-corrected codewords"),
    Metric("port_fec_uncorrectable_codewords_total", "codewords", "counter", "FEC-uncorrectable codewords"),
    Metric("port_fec_corrected_bits_total", "bits", "counter", "FEC-corrected bits"),
    Metric("port_symbol_errors_total", "errors", "counter", "PHY symbol errors"),
    Metric("port_pre_fec_ber", "ratio", "gauge", "bit error rate before FEC (raw)"),
    Metric("port_post_fec_ber", "ratio", "gauge", "bit error rate after FEC (effective)"),
    Metric("port_link_down_events_total", "events", "counter", "PHY link-down events"),
    Metric("optics_rx_power_dbm", "dBm", "gauge", "transceiver receive power (min over lanes if per-lane)"),
    Metric("optics_tx_power_dbm", "dBm", "gauge", "transceiver transmit power"),
    Metric("optics_temp_celsius", "C", "gauge", "transceiver temperature"),
    Metric("optics_rx_power_low_warn_dbm", "dBm", "gauge", "receive power low warning threshold"),
    Metric("optics_rx_power_low_alarm_dbm", "dBm", "gauge", "receive power low alarm threshold"),
    Metric("optics_rx_power_high_alarm_dbm", "dBm", "gauge", "receive power high alarm threshold"),
    Metric("optics_tx_power_low_alarm_dbm", "dBm", "gauge", "transmit power low alarm threshold"),
    Metric("optics_tx_power_high_alarm_dbm", "dBm", "gauge", "transmit power high alarm threshold"),
]

CANONICAL_BY_NAME: dict[str, Metric] = {m.name: m for m in CANONICAL}

# Source metric name -> (canonical name, scale factor applied to the value).
# Filled per source family below; a name not listed here is kept as-is.
SOURCE_MAP: dict[str, tuple[str, float]] = {}

# DCGM fields as dcgm-exporter names them: canonical -> (pre-4.6 name, 4.6 name). DCGM 4.6 renamed the
# field macros (IDs unchanged, old names kept as deprecated aliases), so archives hold both spellings.
# GPU_UTIL_RATIO is field 203 in 4.6 (integer percent, like GPU_UTIL), hence no scaling.
DCGM_FIELDS: dict[str, tuple[str, ...]] = {
    "gpu_util_percent": ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO"),
    "gpu_gr_engine_active_ratio": ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO"),
    "gpu_sm_active_ratio": ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_UTIL_RATIO"),
    "gpu_sm_occupancy_ratio": ("DCGM_FI_PROF_SM_OCCUPANCY", "DCGM_FI_PROF_SM_OCCUPANCY_RATIO"),
    "gpu_tensor_active_ratio": ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO"),
    "gpu_dram_active_ratio": ("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO"),
    "gpu_power_watts": ("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS"),
    "gpu_energy_millijoules_total": ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",),
    "gpu_temp_celsius": ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS"),
    "gpu_memory_temp_celsius": ("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS"),
    "gpu_sm_clock_mhz": ("DCGM_FI_DEV_SM_CLOCK",),
    "gpu_memory_clock_mhz": ("DCGM_FI_DEV_MEM_CLOCK",),
    "gpu_clock_events_bitmask": ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"),
    "gpu_xid_last": ("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR"),
    "gpu_ecc_sbe_volatile_total": ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",),
    "gpu_ecc_dbe_volatile_total": ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",),
    "gpu_ecc_sbe_aggregate_total": ("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",),
    "gpu_ecc_dbe_aggregate_total": ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",),
    "gpu_retired_pages_dbe": ("DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_PAGE_RETIRED_DBE_TOTAL"),
    "gpu_row_remap_failure": ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED"),
    "gpu_correctable_remapped_rows_total": (
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
    ),
    "gpu_uncorrectable_remapped_rows_total": (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
    ),
    "gpu_pcie_replay_total": ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL"),
    "gpu_nvlink_crc_flit_errors_total": (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_TOTAL",
    ),
    "gpu_nvlink_crc_data_errors_total": (
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_TOTAL",
    ),
    "gpu_nvlink_replay_errors_total": (
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_TOTAL",
    ),
    "gpu_nvlink_recovery_errors_total": (
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_TOTAL",
    ),
    "gpu_power_violation_us_total": ("DCGM_FI_DEV_POWER_VIOLATION",),
    "gpu_thermal_violation_us_total": ("DCGM_FI_DEV_THERMAL_VIOLATION",),
    "gpu_fb_used_mib": ("DCGM_FI_DEV_FB_USED",),
    "gpu_fb_free_mib": ("DCGM_FI_DEV_FB_FREE",),
}

# The pre-2.0 exporter (gpu-monitoring-tools exporters/prometheus-dcgm/dcgm-exporter, a `dcgmi dmon` script, 1.x)
# wrote lowercase names with a lowercase `uuid` label; same fields, same units. Its whole list (the script's
# `metric(...)` calls, commit 03f24221): the fields with a canonical twin map here, the others (pcie_tx_throughput,
# enc_utilization, sync_boost_violation, fb_total, retired_pages_sbe, nvlink_bandwidth_total, …) keep their names.
# The DCP fields (`-p`, dcgm_fi_prof_*) are DCGM's 0-1 ratios (dmon prints them so; the script's help says %).
DCGM_LEGACY: dict[str, str] = {
    "gpu_temp_celsius": "dcgm_gpu_temp",
    "gpu_memory_temp_celsius": "dcgm_memory_temp",
    "gpu_util_percent": "dcgm_gpu_utilization",
    "gpu_power_watts": "dcgm_power_usage",
    "gpu_sm_clock_mhz": "dcgm_sm_clock",
    "gpu_memory_clock_mhz": "dcgm_memory_clock",
    "gpu_energy_millijoules_total": "dcgm_total_energy_consumption",
    "gpu_xid_last": "dcgm_xid_errors",
    "gpu_pcie_replay_total": "dcgm_pcie_replay_counter",
    "gpu_power_violation_us_total": "dcgm_power_violation",
    "gpu_thermal_violation_us_total": "dcgm_thermal_violation",
    "gpu_fb_free_mib": "dcgm_fb_free",
    "gpu_fb_used_mib": "dcgm_fb_used",
    "gpu_ecc_sbe_volatile_total": "dcgm_ecc_sbe_volatile_total",
    "gpu_ecc_dbe_volatile_total": "dcgm_ecc_dbe_volatile_total",
    "gpu_ecc_sbe_aggregate_total": "dcgm_ecc_sbe_aggregate_total",
    "gpu_ecc_dbe_aggregate_total": "dcgm_ecc_dbe_aggregate_total",
    "gpu_retired_pages_dbe": "dcgm_retired_pages_dbe",
    "gpu_nvlink_crc_flit_errors_total": "dcgm_nvlink_flit_crc_error_count_total",
    "gpu_nvlink_crc_data_errors_total": "dcgm_nvlink_data_crc_error_count_total",
    "gpu_nvlink_replay_errors_total": "dcgm_nvlink_replay_error_count_total",
    "gpu_nvlink_recovery_errors_total": "dcgm_nvlink_recovery_error_count_total",
    "gpu_gr_engine_active_ratio": "dcgm_fi_prof_gr_engine_active",
    "gpu_sm_active_ratio": "dcgm_fi_prof_sm_active",
    "gpu_sm_occupancy_ratio": "dcgm_fi_prof_sm_occupancy",
    "gpu_tensor_active_ratio": "dcgm_fi_prof_pipe_tensor_active",
    "gpu_dram_active_ratio": "dcgm_fi_prof_dram_active",
}

# node_exporter's infiniband collector (values already in bytes: procfs multiplies PMA words by 4).
NODE_EXPORTER_IB: dict[str, str] = {
    "ib_port_rcv_data_bytes_total": "node_infiniband_port_data_received_bytes_total",
    "ib_port_xmit_data_bytes_total": "node_infiniband_port_data_transmitted_bytes_total",
    "ib_port_rcv_packets_total": "node_infiniband_port_packets_received_total",
    "ib_port_xmit_packets_total": "node_infiniband_port_packets_transmitted_total",
    "ib_port_symbol_errors_total": "node_infiniband_symbol_error_total",
    "ib_port_link_error_recovery_total": "node_infiniband_link_error_recovery_total",
    "ib_port_link_downed_total": "node_infiniband_link_downed_total",
    "ib_port_rcv_errors_total": "node_infiniband_port_errors_received_total",
    "ib_port_rcv_remote_physical_errors_total": "node_infiniband_port_receive_remote_physical_errors_total",
    "ib_port_rcv_switch_relay_errors_total": "node_infiniband_port_receive_switch_relay_errors_total",
    "ib_port_xmit_discards_total": "node_infiniband_port_discards_transmitted_total",
    "ib_port_xmit_constraint_errors_total": "node_infiniband_port_constraint_errors_transmitted_total",
    "ib_port_rcv_constraint_errors_total": "node_infiniband_port_constraint_errors_received_total",
    "ib_port_local_link_integrity_errors_total": "node_infiniband_local_link_integrity_errors_total",
    "ib_port_excessive_buffer_overrun_errors_total": "node_infiniband_excessive_buffer_overrun_errors_total",
    "ib_port_xmit_wait_total": "node_infiniband_port_transmit_wait_total",
    "ib_port_state_id": "node_infiniband_state_id",
    "ib_port_physical_state_id": "node_infiniband_physical_state_id",
    "ib_port_rate_bytes_per_second": "node_infiniband_rate_bytes_per_second",
}

# snmp_exporter if_mib module: metric names are the MIB object names. The 32-bit ifInOctets/ifOutOctets
# wrap at 2^32 and are kept under their own names; the 64-bit ifHC* counters are canonical.
IF_MIB: dict[str, str] = {
    "if_in_octets_total": "ifHCInOctets",
    "if_out_octets_total": "ifHCOutOctets",
    "if_in_ucast_pkts_total": "ifHCInUcastPkts",
    "if_out_ucast_pkts_total": "ifHCOutUcastPkts",
    "if_in_errors_total": "ifInErrors",
    "if_out_errors_total": "ifOutErrors",
    "if_in_discards_total": "ifInDiscards",
    "if_out_discards_total": "ifOutDiscards",
    "if_oper_status": "ifOperStatus",
}

SOURCE_MAP.update({name: (canonical, 1.0) for canonical, names in DCGM_FIELDS.items() for name in names})
SOURCE_MAP.update({name: (canonical, 1.0) for canonical, name in DCGM_LEGACY.items()})
SOURCE_MAP.update({name: (canonical, 1.0) for canonical, name in NODE_EXPORTER_IB.items()})
SOURCE_MAP.update({name: (canonical, 1.0) for canonical, name in IF_MIB.items()})
