"""The one place for explain's taxonomy, thresholds, causal templates and windows, with their sources.

Everything explain decides is a function of the constants below; docs/explain.md explains each one.
Sources: ../shared/reference/anchors.md (A) and log-formats.md (L).
"""

from __future__ import annotations

from synestra_cli.signals.thresholds import ACTIVITY_METRICS as ACTIVITY_METRICS

# Signal thresholds live below signals/ (signals/thresholds.py); re-exported here so that every
# constant explain decides with can still be read in one place.
from synestra_cli.signals.thresholds import AER_CORRECTED_MIN as AER_CORRECTED_MIN
from synestra_cli.signals.thresholds import CLOCK_EVENT_METRIC as CLOCK_EVENT_METRIC
from synestra_cli.signals.thresholds import CLOCK_EVENT_SIGNALS as CLOCK_EVENT_SIGNALS
from synestra_cli.signals.thresholds import DISCRETE_METRICS as DISCRETE_METRICS
from synestra_cli.signals.thresholds import EVENT_RULES as EVENT_RULES
from synestra_cli.signals.thresholds import FLAG_METRICS as FLAG_METRICS
from synestra_cli.signals.thresholds import HOST_LEVEL_METRICS as HOST_LEVEL_METRICS
from synestra_cli.signals.thresholds import LOOKBACK_S as LOOKBACK_S
from synestra_cli.signals.thresholds import MAD_K as MAD_K
from synestra_cli.signals.thresholds import METRIC_RULES as METRIC_RULES
from synestra_cli.signals.thresholds import MIN_ANOMALY_SAMPLES as MIN_ANOMALY_SAMPLES
from synestra_cli.signals.thresholds import MIN_SLOW_LINES as MIN_SLOW_LINES
from synestra_cli.signals.thresholds import RECOVERY as RECOVERY
from synestra_cli.signals.thresholds import SLOW_FACTOR as SLOW_FACTOR
from synestra_cli.signals.thresholds import STRAGGLER_MIN_GAP as STRAGGLER_MIN_GAP
from synestra_cli.signals.thresholds import STRAGGLER_MIN_Z as STRAGGLER_MIN_Z
from synestra_cli.signals.thresholds import STRAGGLER_NOISE_FLOOR as STRAGGLER_NOISE_FLOOR
from synestra_cli.signals.thresholds import XID_APP as XID_APP
from synestra_cli.signals.thresholds import XID_CONSEQUENCE as XID_CONSEQUENCE
from synestra_cli.signals.thresholds import XID_FELL_OFF as XID_FELL_OFF
from synestra_cli.signals.thresholds import XID_MEMORY as XID_MEMORY
from synestra_cli.signals.thresholds import XID_NVLINK as XID_NVLINK
from synestra_cli.signals.thresholds import MetricRule as MetricRule

SCHEMA = "synestra.explain/3"

LAYERS = ("physical", "link", "traffic", "gpu", "collective", "throughput", "job", "checkpoint")

# --- Time windows --------------------------------------------------------------------------------
# Meta FAIR (A 1.2): a cause counts if detected within 10 min before a failure or 5 min after it.
PRE_WINDOW_S = 600.0
POST_WINDOW_S = 300.0
# Clock skew tolerated between sources (syslog vs job log vs exporters): a cause may appear to follow
# its effect by this much and still precede it.
SKEW_S = 30.0
# Telemetry read past a checkpoint. A fault that began before the effect and persists after the
# checkpoint is evidence: at the sampling sites use (optics and switch counters every 1-5 min) a save
# six minutes after onset has one or two samples of it before, and the rest comes after. Three
# five-minute scrapes. What begins after the checkpoint still cannot be its cause (precedence).
PERSIST_READ_S = 900.0

# --- Checkpoint triggers (explain/triggers.py) ---------------------------------------------------
# A save whose duration exceeds the job's healthy save x this is "abnormally long". The healthy save is the
# lower quartile of the job's saves, not their median: a filesystem slow for most of a short job (three
# of its five saves at 6x) made the slow duration the median, and no save was slow.
SLOW_SAVE_FACTOR = 2.0
HEALTHY_SAVE_QUARTERS = 4  # statistics.quantiles(n=4)[0]: the lower quartile
# A save writes the same bytes each time, so a healthy filesystem gives like durations. When even the lower
# quartile is slow (more than SLOW_SAVE_FACTOR x the job's fastest saves: a filesystem slow for three
# quarters of the job), the fastest two saves within this ratio of each other are the healthy save. Two,
# so that one save logged oddly short (a partial line) cannot make every other save slow.
HEALTHY_SAVE_PAIR_RATIO = 1.5
# A save this close before an attempt's preemption end, or before the exit-signal handler's exit line
# (or after a SIGTERM whose arrival is logged), is the preemption save.
PREEMPT_SAVE_S = 600.0
# Megatron's --exit-signal-handler saves on SIGTERM, then prints this with the exit time (L D.2):
# the signal came before the save, so this line bounds the save from after.
EXIT_SIGNAL_MARK = "exiting program after receiving SIGTERM"
# Slurm states that mean the scheduler took the nodes back (sacct, L D.8).
PREEMPT_STATES = ("PREEMPTED",)
# ... and the sacct states under which a SIGTERM in the job's log may still be the scheduler's preemption.
SIGTERM_STATES = ("CANCELLED",)
OK_STATES = ("COMPLETED", "RUNNING", "TIMEOUT")
# Slurm states of an attempt that failed (sacct, L D.8): explained even when no restore follows.
FAILED_STATES = ("FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL")

# --- Causal templates (explain/attribute.py) -----------------------------------------------------
# effect -> category -> prior: how plausibly the category produces the effect.
TEMPLATES: dict[str, dict[str, float]] = {
    "slowdown": {
        "network.link_degraded": 1.0,
        "cooling.thermal": 1.0,
        "power.capping": 1.0,
        "gpu.hw_slowdown": 1.0,
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
        "host.node_problem": 0.9,
        "gpu.other_xid": 0.8,
        "host.pcie": 0.8,
        "network.link_degraded": 0.5,
        "storage.slow": 0.4,
        "cooling.thermal": 0.3,
        "power.capping": 0.2,
        "gpu.hw_slowdown": 0.2,
    },
    "slow_save": {"storage.slow": 1.0, "network.link_degraded": 0.3},
}
# Specificity: one component beats many; each further candidate of the same category, alike in
# strength, makes it look fabric- or fleet-wide: 1 / (1 + SPREAD_PENALTY x (peers - 1)).
SPREAD_PENALTY = 0.5
# ... peers being the candidates of the category whose strongest signal is within this many decades of
# excess over its own baseline: a ghost link 10^4 past its baseline is not made "fabric-wide" by the
# stray symbol error per scrape that some of a big job's thousands of NICs always show.
SPREAD_PEER_DECADES = 1.0
# A window found against its own history on a series no busier than its peers over the hours read (a stray
# burst of the background: Anomaly.ordinary, signals/thresholds.py PEER_ORDINARY_DECADES) counts this much
# of its strength: three symbol errors in a row on a link that errs every few minutes are not a failing
# part, and must not outweigh a part 500x its peers.
ORDINARY_WEIGHT = 0.5
# Thermal and power trouble on several hosts of one rack is the rack's (cooling, PDU budget); on several GPUs
# of one host, that host's.
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

# --- Worker exit codes (torchrun's worker_failed incidents, formats/training/torch_failures.py) ----------------
# What the exit code of the failed worker (the root cause torchrun names, else the first to fail) says when no
# infrastructure signal outweighs it: (category, confidence). A SIGKILL is the OOM killer's when an oom-kill line
# (the kernel's, slurmstepd's or srun's) is near it (PRE_WINDOW_S before to POST_WINDOW_S after), else only
# "likely an OOM kill or an external kill" (kill -9, a node health check): the same category at low confidence.
# A SIGABRT next to an NCCL watchdog timeout is the watchdog taking the process down: the timeout's cause is the
# failure's. A SIGTERM is a preemption or a cancel when sacct agrees (the attempt CANCELLED / PREEMPTED, or
# its signal 15); else it is torchrun stopping the other workers after one failed, and says nothing.
WORKER_EXIT_VERDICTS: dict[str, tuple[str, float]] = {
    "oom_kill": ("host.oom", 0.85),
    "SIGKILL": ("host.oom", 0.35),
    "SIGABRT": ("software.crash", 0.5),
    "exception": ("software.crash", 0.6),  # exit code 1: an uncaught Python exception
    "SIGSEGV": ("software.crash", 0.5),
    "SIGBUS": ("software.crash", 0.4),
    "SIGTERM": ("scheduler.preemption", 0.9),
}
SCHEDULER_STOP_STATES = ("CANCELLED", "PREEMPTED")
