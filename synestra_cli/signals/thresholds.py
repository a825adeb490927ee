"""The thresholds and rule tables the signal detectors use (steps, metric anomalies, log events), with
their sources. They sit below signals/ so that data flows one way (docs/architecture.md);
explain/rules.py re-exports them beside explain's own taxonomy, windows and templates, and
docs/explain.md explains each one. Sources: ../shared/reference/anchors.md (A) and log-formats.md (L).
"""

from __future__ import annotations

from typing import NamedTuple

# Telemetry read before a job's first attempt, to learn each entity's own baseline (explain's scope
# and the straggler's activity baseline).
LOOKBACK_S = 1800.0

# --- Step-time degradation (signals/steps.py) ----------------------------------------------------
# A logged step is slow when above median x SLOW_FACTOR and above median + MAD_K x MAD (robust z).
SLOW_FACTOR = 1.10
MAD_K = 3.0
# A degradation window needs this many consecutive slow log lines (one line averages log_interval
# steps, so two lines are already tens of steps).
MIN_SLOW_LINES = 2


# --- Metric anomaly rules (signals/anomalies.py) -------------------------------------------------


class MetricRule(NamedTuple):
    metric: str
    kind: str  # counter (rate from a cumulative counter) | gauge
    direction: str  # up | down: which way is bad
    floor: float  # absolute level to cross: a rate (per s) or gauge value (up: >=, down: <=)
    ratio: float  # and, up: above baseline x ratio + delta; down: below baseline x ratio - delta
    delta: float
    layer: str
    category: str
    weight: float  # how strongly the signal, once anomalous, implicates its category


# UFM PDR plugin (A 4.2): NDR symbol errors are bad above 2.88 per 12 min = 0.004/s. Corrected FEC is
# normal on healthy links, so it counts only as a large change against the port's own history.
# Rx power: no fleet-wide dBm threshold exists (A 4.2), so only a drop of 3 dB against the port's own
# history. UFM's DeltaT of 10 C (A 4.2) for temperatures against the GPU's own baseline.
# Shorthands for the table below.
C, G, UP, DOWN = "counter", "gauge", "up", "down"
LOSSY, DOWN_, HOT, CAPPED = "network.link_degraded", "network.link_down", "cooling.thermal", "power.capping"
MEMORY, PCIE, NVLINK, SLOWED = "gpu.memory", "host.pcie", "gpu.nvlink", "gpu.hw_slowdown"
R = MetricRule
# fmt: off
METRIC_RULES: tuple[MetricRule, ...] = (
    # metric                                   kind dir   floor   ratio delta  layer       category weight
    R("ib_port_symbol_errors_total",             C, UP,   0.004,  10,  0.004, "physical", LOSSY,  1.0),
    R("port_symbol_errors_total",                C, UP,   0.004,  10,  0.004, "physical", LOSSY,  1.0),
    R("port_fec_uncorrectable_codewords_total",  C, UP,   0.004,  10,  0.004, "physical", LOSSY,  1.0),
    R("port_fec_corrected_codewords_total",      C, UP,   1.0,    20,  1.0,   "physical", LOSSY,  0.5),
    R("port_pre_fec_ber",                        G, UP,   1e-05,  10,  0,     "physical", LOSSY,  0.7),
    R("port_post_fec_ber",                       G, UP,   1e-12,  10,  0,     "physical", LOSSY,  1.0),
    R("optics_rx_power_dbm",                     G, DOWN, 100.0,  1,   3.0,   "physical", LOSSY,  0.8),
    R("ib_port_rcv_errors_total",                C, UP,   0.004,  10,  0.004, "link",     LOSSY,  0.9),
    R("ib_port_rcv_remote_physical_errors_total", C, UP,   0.004,  10,  0.004, "link",     LOSSY,  0.8),
    R("ib_port_link_error_recovery_total",       C, UP,   0.001,  10,  0.001, "link",     LOSSY,  0.9),
    R("if_in_errors_total",                      C, UP,   0.004,  10,  0.004, "link",     LOSSY,  0.9),
    R("if_out_errors_total",                     C, UP,   0.004,  10,  0.004, "link",     LOSSY,  0.8),
    R("ib_port_xmit_discards_total",             C, UP,   0.1,    10,  0.1,   "traffic",  LOSSY,  0.4),
    R("if_in_discards_total",                    C, UP,   0.1,    10,  0.1,   "traffic",  LOSSY,  0.4),
    R("if_out_discards_total",                   C, UP,   0.1,    10,  0.1,   "traffic",  LOSSY,  0.4),
    R("ib_port_link_downed_total",               C, UP,   1e-09,  1,   1e-09, "link",     DOWN_,  1.0),
    R("port_link_down_events_total",             C, UP,   1e-09,  1,   1e-09, "link",     DOWN_,  1.0),
    R("ib_port_state_id",                        G, DOWN, 3.5,    1,   0.5,   "link",     DOWN_,  1.0),
    R("if_oper_status",                          G, UP,   1.5,    1,   0.5,   "link",     DOWN_,  1.0),
    R("gpu_temp_celsius",                        G, UP,   80.0,   1,   10.0,  "gpu",      HOT,    0.9),
    R("gpu_memory_temp_celsius",                 G, UP,   85.0,   1,   10.0,  "gpu",      HOT,    0.8),
    R("gpu_thermal_violation_us_total",          C, UP,   100000.0, 10,  100000.0, "gpu",      HOT,    1.0),
    R("gpu_power_violation_us_total",            C, UP,   100000.0, 10,  100000.0, "gpu",      CAPPED, 1.0),
    R("gpu_clock_event_sw_power_cap",            G, UP,   0.5,    1,   0.5,   "gpu",      CAPPED, 0.7),
    R("gpu_clock_event_hw_power_brake",          G, UP,   0.5,    1,   0.5,   "gpu",      CAPPED, 1.0),
    R("gpu_clock_event_sw_thermal",              G, UP,   0.5,    1,   0.5,   "gpu",      HOT,    0.9),
    R("gpu_clock_event_hw_thermal",              G, UP,   0.5,    1,   0.5,   "gpu",      HOT,    1.0),
    R("gpu_clock_event_hw_slowdown",             G, UP,   0.5,    1,   0.5,   "gpu",      SLOWED, 0.9),
    R("gpu_ecc_dbe_volatile_total",              C, UP,   1e-09,  1,   1e-09, "gpu",      MEMORY, 1.0),
    R("gpu_uncorrectable_remapped_rows_total",   C, UP,   1e-09,  1,   1e-09, "gpu",      MEMORY, 0.9),
    R("gpu_row_remap_failure",                   G, UP,   0.5,    1,   0.5,   "gpu",      MEMORY, 1.0),
    R("gpu_pcie_replay_total",                   C, UP,   0.1,    10,  0.1,   "gpu",      PCIE,   0.8),
    R("gpu_nvlink_crc_flit_errors_total",        C, UP,   0.1,    10,  0.1,   "gpu",      NVLINK, 0.8),
    R("gpu_nvlink_replay_errors_total",          C, UP,   0.1,    10,  0.1,   "gpu",      NVLINK, 0.8),
    R("gpu_nvlink_recovery_errors_total",        C, UP,   1e-09,  1,   1e-09, "gpu",      NVLINK, 0.9),
)
# fmt: on
# DCGM's clocks-event reasons (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, formerly CLOCK_THROTTLE_REASONS;
# dcgm_fields.h DCGM_CLOCKS_EVENT_REASON_*, 1:1 with NVML's; L B.4) arrive as one bitmask per GPU and
# sample. Each bit that says why clocks are held down becomes a 0/1 signal of its own, compared with the
# GPU's own history like any gauge (SW power cap is routine on a GPU at its power limit: only a change
# counts). HW slowdown (clocks cut >= 2x) also fires for thermal and power-brake slowdowns; it is the
# GPU's own only when neither is set beside it. Not causes: 0x1 idle (nothing running), 0x2 application
# clocks setting (an admin's choice), 0x10 sync boost (held to its group's slowest: the cause is
# another GPU's bit), 0x100 display clocks.
CLOCK_EVENT_METRIC = "gpu_clock_events_bitmask"
# (signal, bit, unless one of these bits is set in the same sample)
CLOCK_EVENT_SIGNALS: tuple[tuple[str, int, int], ...] = (
    ("gpu_clock_event_sw_power_cap", 0x04, 0),
    ("gpu_clock_event_hw_slowdown", 0x08, 0x20 | 0x40 | 0x80),
    ("gpu_clock_event_sw_thermal", 0x20, 0),
    ("gpu_clock_event_hw_thermal", 0x40, 0),
    ("gpu_clock_event_hw_power_brake", 0x80, 0),
)
# A set bit is a statement, not a level: its magnitude is 1, like a log event's.
FLAG_METRICS = tuple(name for name, _, _ in CLOCK_EVENT_SIGNALS)
# An external power brake is asserted on a node (its power supply); a GPU's own HW slowdown is that
# GPU's: both are named by their host (one GPU: that GPU), never by the rack.
HOST_LEVEL_METRICS = ("gpu_clock_event_hw_power_brake", "gpu_clock_event_hw_slowdown")

# An anomaly window needs this many anomalous samples (a one-off FEC burst is noise), unless the metric
# counts discrete, always-significant events (a link went down, a DBE, a remap failure).
MIN_ANOMALY_SAMPLES = 2
DISCRETE_METRICS = (
    "ib_port_link_downed_total",
    "port_link_down_events_total",
    "ib_port_state_id",
    "if_oper_status",
    "gpu_ecc_dbe_volatile_total",
    "gpu_uncorrectable_remapped_rows_total",
    "gpu_row_remap_failure",
    "gpu_nvlink_recovery_errors_total",
    "gpu_clock_event_hw_power_brake",
)

# --- Gray failures: a series against its peers (signals/peers.py) -------------------------------------
# Detection above compares each entity with its own history and the rules' absolute floors, so a part
# that errs steadily, or whose rate rose but stays under every floor (PCIe replays at 0.05/s on one GPU
# where its peers show none; correctable ECC 1000x the job's others), is never a signal. Here each
# error counter's rate over the hours around the job's effects is set beside the same metric's rate on
# the job's other entities of its side (host GPUs and NICs, or the switch ports cabled to them), on a
# log scale: median and MAD. A rate below the metric's `quiet` level counts as that level: a handful of
# stray errors is no rate at all, and a fleet's noisy-but-healthy links (a symbol error every few
# minutes, under UFM's 0.004/s) stay at the floor with the silent ones.


class PeerRule(NamedTuple):
    metric: str
    quiet: float  # per s: a rate below this is no rate (the peers' reference is at least this)
    layer: str
    category: str
    weight: float  # how strongly a series this far above its peers implicates its category


P = PeerRule
# fmt: off
PEER_RULES: tuple[PeerRule, ...] = (
    # metric                                  quiet   layer       category weight
    P("gpu_pcie_replay_total",                  1e-4,   "gpu",      PCIE,    0.8),
    P("gpu_ecc_sbe_volatile_total",             1e-4,   "gpu",      MEMORY,  0.6),
    P("gpu_nvlink_crc_flit_errors_total",       1e-3,   "gpu",      NVLINK,  0.7),
    P("gpu_nvlink_crc_data_errors_total",       1e-3,   "gpu",      NVLINK,  0.7),
    P("gpu_nvlink_replay_errors_total",         1e-3,   "gpu",      NVLINK,  0.7),
    P("ib_port_symbol_errors_total",            0.004,  "physical", LOSSY,   0.8),
    P("port_symbol_errors_total",               0.004,  "physical", LOSSY,   0.8),
    P("port_fec_corrected_codewords_total",     1.0,    "physical", LOSSY,   0.5),
    P("port_fec_uncorrectable_codewords_total", 0.004,  "physical", LOSSY,   0.8),
    P("ib_port_rcv_errors_total",               0.004,  "link",     LOSSY,   0.7),
    P("ib_port_link_error_recovery_total",      1e-3,   "link",     LOSSY,   0.7),
    P("ib_port_local_link_integrity_errors_total", 1e-3, "link",    LOSSY,   0.7),
    P("if_in_errors_total",                     0.004,  "link",     LOSSY,   0.7),
)
# fmt: on
# A suspect's rate is at least PEER_DECADES above its peers' median (100x: "orders of magnitude"), and
# PEER_Z robust z-scores (MAD x 1.4826, at least PEER_MAD_FLOOR decades: peers that all sit at the quiet
# level have no spread) above it, so that a metric whose healthy rates spread over decades (FEC corrected
# codewords across optics of several vendors) needs a larger lead.
PEER_DECADES = 2.0
PEER_Z = 5.0
PEER_MAD_FLOOR = 0.1
# ... over at least this many series of its metric and side (one host's 8 GPUs), counting at least this
# many events in its elevated span (a rate of 3 errors is a guess).
PEER_MIN_SERIES = 8
PEER_MIN_EVENTS = 10
# A series' own samples date its rise: the split of its read samples into two Poisson rates that best
# explains them (maximum likelihood), kept when it gains at least PEER_CHANGE_NATS of log-likelihood over
# one rate and the later rate is PEER_RISE x the earlier; otherwise the rate held through the whole read
# (onset: its first sample), and a gray part that errs from the start is an old cause of a fresh effect.
PEER_CHANGE_NATS = 6.0
PEER_RISE = 4.0
# A window found against its own history on a series whose rate over the hours read is less than this many
# decades above its peers' median (or its metric's quiet level) is ordinary among them: a stray burst of
# the background (three symbol errors in a row on a link that shows one every few minutes), which explain
# weighs less (rules.ORDINARY_WEIGHT).
PEER_ORDINARY_DECADES = 1.0

# --- Log event rules (signals/events.py) ---------------------------------------------------------
# Xid meaning from NVIDIA's Xid catalog (L A.1.1). 43/45 are consequences of an earlier error, not
# causes; 13/31 are usually the application's own fault (weak unless the job crashed on that GPU).
XID_MEMORY = (48, 63, 64, 92, 94, 95)
XID_NVLINK = (74, 144, 145, 146, 147, 148, 149, 150)
XID_FELL_OFF = (79,)
XID_CONSEQUENCE = (43, 45, 154)
XID_APP = (13, 31)

# events.kind -> (layer, category, weight). xid is split by code in events.py.
EVENT_RULES: dict[str, tuple[str, str, float]] = {
    "gpu_fell_off_bus": ("gpu", "gpu.fell_off_bus", 1.0),
    "link_down": ("link", "network.link_down", 1.0),
    "ib_port_state": ("link", "network.link_down", 0.9),
    "port_module": ("physical", "network.link_down", 0.8),
    "aer": ("physical", "host.pcie", 0.7),
    "nfs_not_responding": ("traffic", "storage.slow", 1.0),
    "lustre_lost": ("traffic", "storage.slow", 1.0),
    "oom_kill": ("job", "host.oom", 1.0),
    "thermal": ("gpu", "cooling.thermal", 0.9),
    "nccl_warn": ("collective", "network.link_degraded", 0.3),
    # Kubernetes (formats/scheduler/kubernetes.py): a node that stopped reporting Ready, the node-problem-detector's
    # kernel faults (config/kernel-monitor.json: KernelOops, KernelDeadlock, ReadonlyFilesystem...), and a GPU
    # health plugin's conditions (the EKS node monitoring agent: NvidiaDoubleBitError, NvidiaNVLinkError; its
    # NvidiaXID<code>Error is an `xid` event)
    "node_not_ready": ("physical", "host.node_problem", 0.9),
    "node_problem": ("physical", "host.node_problem", 0.7),
    "gpu_dbe": ("gpu", "gpu.memory", 1.0),
    "gpu_nvlink": ("gpu", "gpu.nvlink", 0.9),
}
# An outage logged as a start and a recovery lasts until the recovery (or the end of the scope).
RECOVERY = {"nfs_not_responding": "nfs_ok", "lustre_lost": "lustre_restored", "link_down": "link_up"}
# A corrected AER is benign noise (L A.3): it counts only when repeated this often in the window.
AER_CORRECTED_MIN = 5

# --- The straggler's host (signals/activity.py) --------------------------------------------------
# In synchronous training the slow rank's GPUs keep their activity while every peer waits for it at
# each collective: per GPU, the share of its own tensor/SM activity and power it kept during the
# slowdown. A host is named when its busiest GPU kept at least STRAGGLER_MIN_GAP more than the other
# hosts' median, STRAGGLER_MIN_Z times their spread (MAD, at least the floor: DCGM's ratios jitter by
# about a point), and at least half that gap ahead of the runner-up (one host, not a group).
ACTIVITY_METRICS = ("gpu_tensor_active_ratio", "gpu_sm_active_ratio", "gpu_power_watts")
STRAGGLER_MIN_GAP = 0.1
STRAGGLER_MIN_Z = 4.0
STRAGGLER_NOISE_FLOOR = 0.02
