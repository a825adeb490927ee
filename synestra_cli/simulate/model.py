"""The contract between the simulator's halves: faults (cluster side) and the job model (job side).

A scenario builds a cluster, runs jobs on it and injects faults. Each fault has two faces:
telemetry effects (syslog, DCGM, fabric counters: simulate/telemetry side) and a Disturbance that
the job feels (simulate/jobs side), which turns into slower steps, longer saves, hangs, crashes and
preemptions, and finally into the job's own logs and sacct rows, with the ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class Cause:
    """Root cause as explain should name it (the explain taxonomy, docs/explain.md)."""

    category: str  # network.link_degraded, gpu.fell_off_bus, storage.slow, ...
    hosts: tuple[str, ...]  # where it is (a switch name for a switch-side fault)
    component: str | None  # gpu3, mlx5_1, leaf-02:Ethernet21, rack-03, nfs-01, ...
    first_signal: datetime  # first time the fault is visible in any export
    reported_healthy: bool = False  # link up the whole time (ghost link)


@dataclass(frozen=True)
class Disturbance:
    """What a fault does to one job."""

    kind: str  # slowdown | crash | slow_storage | preempt
    start: datetime  # when the job first feels it
    end: datetime | None = None  # slowdown / slow_storage end (None: until the job ends)
    factor: float = 1.0  # step-time multiplier (slowdown) or save-time multiplier (slow_storage)
    hang_s: float = 0.0  # crash: fault -> process exit, less ~3 s teardown (e.g. NCCL watchdog timeout)
    incident: str | None = None  # crash: what the log prints: nccl_timeout | cuda_error | python_exception
    rank: int | None = None  # the rank that reports it, when it matters
    exit_state: str = "FAILED"  # crash: the attempt's sacct State (FAILED | NODE_FAIL)
    cause: Cause | None = None
    # crash: the device stays unusable until then (the node's reboot). A worker group that torchrun restarts
    # in place on it dies in its start-up with `lost_error` (CUDA's error string); a Slurm requeue is not
    # affected (the scheduler reboots or replaces the node first).
    lost_until: datetime | None = None
    lost_error: str | None = None


@dataclass(frozen=True)
class JobSpec:
    job_id: str
    name: str
    user: str
    hosts: tuple[str, ...]
    gpus_per_node: int
    submit: datetime
    start: datetime
    train_iters: int  # the job ends (final save) when it reaches this iteration
    time_limit_s: float  # or when it runs out of time
    step_s: float  # healthy step time
    save_every: int  # periodic save cadence (iterations)
    save_s: float  # healthy blocking save duration
    restore_s: float  # checkpoint load duration
    startup_s: float  # process start to first step, excluding the restore
    requeue_s: float  # attempt end to next attempt start after a failure
    log_interval: int = 10  # Megatron prints one iteration line per log_interval steps
    reactive_threshold: float = 1.2  # reactive save when step time > threshold x normal ...
    reactive_after_s: float = 300.0  # ... for this long
    disturbances: tuple[Disturbance, ...] = field(default_factory=tuple)
    # torchrun --max-restarts: a failed worker group is restarted in place this many times per attempt
    elastic_restarts: int = 0
    elastic_restart_s: float = 12.0  # the agent stops the other workers and re-runs the rendezvous
    # the batch script requeues the job itself when its step fails (`srun ... || scontrol requeue`): sacct
    # records the attempt REQUEUED and slurmstepd prints `... DUE TO JOB REQUEUE ***`
    self_requeue: bool = False


@dataclass(frozen=True)
class Rendering:
    """How the exports are written where real sites differ (docs/simulator.md, "Variants"): the same
    faults, told the way another exporter, logger or launcher tells them."""

    launcher_stamps: bool = True  # a launcher stamps every rank-0 line; False: only Megatron's own times
    slurm_notice: bool = True  # Slurm's "CANCELLED ... DUE TO PREEMPTION" notice reaches the job log
    journal_printk: bool = False  # every host keeps journald JSON, kernel lines forwarded through the
    #                                syslog socket with the printk stamp still in MESSAGE
    dcgm_46_names: bool = False  # DCGM 4.6 field names (CLOCKS_EVENT_REASONS, ...), the bitmask as a float
    dcgm_every_s: float | None = None  # DCGM sampling interval (None: the cluster size's default)
    # Which program writes the job's log (simulate/trainers/) and which launcher starts it; the real
    # wordings of each are cited in docs/simulator.md, "Trainers and launchers".
    trainer: str = "megatron"  # megatron | nemo2 | torchtitan | deepspeed | hf_trainer | orbax
    trainer_version: str = "current"  # current | previous: the two real wordings where they differ
    launcher: str = "srun"  # srun | torchrun (torchrun: the elastic agent restarts the workers in place)
    srun_label: bool = False  # `srun -l`: every task's line prefixed with its task id (`3: `)
    slurm_lines: bool = False  # Slurm's own job-end lines (slurmstepd's, srun's) in the job's output
    scheduler: str = "slurm"  # slurm (sacct, job logs) | kubernetes (pods, events, container logs: kubernetes.py)


AS_USUAL = Rendering()
TRAINERS = ("megatron", "nemo2", "torchtitan", "deepspeed", "hf_trainer", "orbax")
LAUNCHERS = ("srun", "torchrun")
