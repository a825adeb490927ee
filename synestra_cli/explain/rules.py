"""The one place for explain's taxonomy, thresholds, causal templates and windows, with their sources.

Everything explain decides is a function of the constants below; docs/explain.md explains each one.
Sources: ../shared/reference/anchors.md (A) and log-formats.md (L).
"""

from __future__ import annotations

from typing import NamedTuple

SCHEMA = "synestra.explain/1"

CATEGORIES = (
    "network.link_degraded",
    "network.link_down",
    "gpu.fell_off_bus",
    "gpu.memory",
    "gpu.nvlink",
    "gpu.other_xid",
    "cooling.thermal",
    "power.capping",
    "host.pcie",
    "host.oom",
    "storage.slow",
    "software.crash",
    "scheduler.preemption",
    "workload.straggler",
    "unknown",
)
LAYERS = ("physical", "link", "traffic", "gpu", "collective", "throughput", "job", "checkpoint")

# --- Time windows --------------------------------------------------------------------------------
# Meta FAIR (A 1.2): a cause counts if detected within 10 min before a failure or 5 min after it.
PRE_WINDOW_S = 600.0
POST_WINDOW_S = 300.0
# Clock skew tolerated between sources (syslog vs job log vs exporters): a cause may appear to follow
# its effect by this much and still precede it.
SKEW_S = 30.0
# Telemetry read before a job's first attempt, to learn each entity's own baseline.
LOOKBACK_S = 1800.0

# --- Step-time degradation (signals/steps.py) ----------------------------------------------------
# A logged step is slow when above median x SLOW_FACTOR and above median + MAD_K x MAD (robust z).
SLOW_FACTOR = 1.10
MAD_K = 3.0
# A degradation window needs this many consecutive slow log lines (one line averages log_interval
# steps, so two lines are already tens of steps).
MIN_SLOW_LINES = 2

# --- Checkpoint triggers (explain/triggers.py) ---------------------------------------------------
# A save whose blocking duration exceeds the job's median save x this is "abnormally long".
SLOW_SAVE_FACTOR = 2.0
# A save this close before an attempt's preemption end (or after its SIGTERM) is the preemption save.
PREEMPT_SAVE_S = 600.0
# Slurm states that mean the scheduler took the nodes back (sacct, L D.8).
PREEMPT_STATES = ("PREEMPTED",)
OK_STATES = ("COMPLETED", "RUNNING", "TIMEOUT")
# Slurm states of an attempt that failed (sacct, L D.8): explained even when no restore follows.
FAILED_STATES = ("FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")

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
MEMORY, PCIE, NVLINK = "gpu.memory", "host.pcie", "gpu.nvlink"
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
    R("gpu_ecc_dbe_volatile_total",              C, UP,   1e-09,  1,   1e-09, "gpu",      MEMORY, 1.0),
    R("gpu_uncorrectable_remapped_rows_total",   C, UP,   1e-09,  1,   1e-09, "gpu",      MEMORY, 0.9),
    R("gpu_row_remap_failure",                   G, UP,   0.5,    1,   0.5,   "gpu",      MEMORY, 1.0),
    R("gpu_pcie_replay_total",                   C, UP,   0.1,    10,  0.1,   "gpu",      PCIE,   0.8),
    R("gpu_nvlink_crc_flit_errors_total",        C, UP,   0.1,    10,  0.1,   "gpu",      NVLINK, 0.8),
    R("gpu_nvlink_replay_errors_total",          C, UP,   0.1,    10,  0.1,   "gpu",      NVLINK, 0.8),
    R("gpu_nvlink_recovery_errors_total",        C, UP,   1e-09,  1,   1e-09, "gpu",      NVLINK, 0.9),
)
# fmt: on
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
)

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
}
# An outage logged as a start and a recovery lasts until the recovery (or the end of the scope).
RECOVERY = {"nfs_not_responding": "nfs_ok", "lustre_lost": "lustre_restored", "link_down": "link_up"}
# A corrected AER is benign noise (L A.3): it counts only when repeated this often in the window.
AER_CORRECTED_MIN = 5

# --- Causal templates (explain/attribute.py) -----------------------------------------------------
# effect -> category -> prior: how plausibly the category produces the effect.
TEMPLATES: dict[str, dict[str, float]] = {
    "slowdown": {
        "network.link_degraded": 1.0,
        "cooling.thermal": 1.0,
        "power.capping": 1.0,
        "host.pcie": 0.8,
        "gpu.nvlink": 0.7,
        "network.link_down": 0.6,
        "gpu.memory": 0.3,
        "storage.slow": 0.2,
    },
    "crash": {
        "gpu.fell_off_bus": 1.0,
        "gpu.memory": 1.0,
        "gpu.nvlink": 1.0,
        "network.link_down": 1.0,
        "host.oom": 1.0,
        "gpu.other_xid": 0.8,
        "host.pcie": 0.8,
        "network.link_degraded": 0.5,
        "storage.slow": 0.4,
        "cooling.thermal": 0.3,
        "power.capping": 0.2,
    },
    "slow_save": {"storage.slow": 1.0, "network.link_degraded": 0.3},
}
# Specificity: one component beats many; a signal seen on more than this share of the job's peers of
# the same kind is fabric- or fleet-wide and weighs less.
SPREAD_PENALTY = 0.5
# Thermal and power trouble on several GPUs or hosts of one rack is the rack's (cooling, PDU budget).
RACK_CATEGORIES = ("cooling.thermal", "power.capping")
# Below this score the evidence is too thin to name a cause: say unknown.
MIN_SCORE = 0.15
# Confidence given when no infrastructure signal exists but the job's own log tells the story.
FALLBACK_CONFIDENCE = {
    "software.crash": 0.6,
    "workload.straggler": 0.5,
    "scheduler.preemption": 0.9,
    "unknown": 0.2,
}
MAX_ALTERNATIVES = 3
