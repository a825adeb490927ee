"""The scenarios: which jobs run where, which faults strike when, and which decoys surround them.

A scenario places jobs on the cluster and faults on hosts. A job feels every non-decoy fault on its
hosts (physics, not labels: a degraded link slows whichever job uses the node). Decoys are faults
explain must not blame on the main job: on nodes outside it, beginning after the checkpoint they might
be blamed for, or noisy-but-healthy links. ``simulate`` runs the jobs and writes the exports.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np

from synestra_cli.errors import InputError
from synestra_cli.simulate import export, groundtruth, kube_export, kubernetes, subtle, trainers
from synestra_cli.simulate import faults as F
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.jobs import US
from synestra_cli.simulate.model import Cause
from synestra_cli.simulate.noise import aer_corrected, benign_noise
from synestra_cli.simulate.plan import Plan

EPOCH = 1793577600.0  # 2026-11-02T00:00:00Z: fixed, so output depends on the seed alone
MAIN_JOB = "1001"
MIN_NODES = 4  # the main job on two, a decoy outside it
SCHEDULERS = ("slurm", "kubernetes")
ELASTIC_RESTARTS = 3  # torchrun --max-restarts under the torchrun launcher


def base_plan(cl: Cluster, hours: float, rng: np.random.Generator) -> Plan:
    """The main job on the first half of the nodes, another job on the next quarter, the rest idle."""
    t0, t1 = EPOCH, EPOCH + hours * 3600.0
    plan = Plan(cl, t0, t1, rng)
    n_main = max(2, cl.nodes // 2)
    n_other = max(1, cl.nodes // 4)
    plan.jobs.append(plan.job(MAIN_JOB, cl.hosts[:n_main], t0 + 300.0, t1))
    if n_main + n_other < cl.nodes:
        plan.jobs.append(plan.job("1002", cl.hosts[n_main : n_main + n_other], t0 + 900.0, t1, name="llama-8b-sft"))
    return plan


def _decoy(plan: Plan, fault: F.Fault) -> F.Fault:
    return fault.as_decoy("outside_job")


# ------------------------------------------------------------------ one builder per scenario
# Each adds the scenario's fault to the main job and a decoy of the same kind outside it.


def ghost_link(p: Plan) -> None:
    host, nic = p.pick(p.main.hosts), int(p.rng.integers(p.cl.nics_per_host))
    p.faults.append(F.ghost_link(p.cl, host, nic, p.at(0.35, 0.45), p.at(0.8, 0.9), p.rng))
    out = p.pick(p.outside())
    p.faults.append(_decoy(p, F.ghost_link(p.cl, out, p.gpu(), p.at(0.1, 0.2), p.at(0.5, 0.6), p.rng)))


DeviceFault = Callable[[Cluster, str, int, float, np.random.Generator], F.Fault]  # (cluster, host, device, start, rng)


def _device_fault(p: Plan, fault: DeviceFault) -> None:
    """The fault on one device (GPU or NIC) of a job host at 40-50% of the run, and a decoy of it
    on a host outside the job earlier (at 15-25%)."""
    p.faults.append(fault(p.cl, p.pick(p.main.hosts), p.gpu(), p.at(0.4, 0.5), p.rng))
    p.faults.append(_decoy(p, fault(p.cl, p.pick(p.outside()), p.gpu(), p.at(0.15, 0.25), p.rng)))


def gpu_fell_off_bus(p: Plan) -> None:
    _device_fault(p, F.gpu_fell_off_bus)


def gpu_fell_off_bus_reboot(p: Plan) -> None:
    """The GPU falls off the bus and the site reboots the node before NCCL's watchdog: Slurm ends the job
    NODE_FAIL and requeues it; its output carries srun's and slurmstepd's node-failure lines."""
    _device_fault(p, F.gpu_fell_off_bus_rebooted)
    p.render = replace(p.render, slurm_lines=True)


def ecc_dbe(p: Plan) -> None:
    _device_fault(p, F.ecc_dbe)


def nvlink(p: Plan) -> None:
    _device_fault(p, F.nvlink)


def link_flap(p: Plan) -> None:
    _device_fault(p, F.link_flap)


def thermal_rack(p: Plan) -> None:
    rack = p.cl.rack(p.pick(p.main.hosts))
    p.faults.append(F.thermal_rack(p.cl, rack, p.at(0.35, 0.45), p.at(0.75, 0.85), p.rng))
    others = [r for r in p.cl.racks if not set(p.cl.rack_hosts(r)) & set(p.main.hosts)]
    if others:
        p.faults.append(_decoy(p, F.thermal_rack(p.cl, p.pick(others), p.at(0.1, 0.2), p.at(0.3, 0.35), p.rng)))


def power_capping(p: Plan) -> None:
    rack = p.cl.rack(p.pick(p.main.hosts))
    hosts = tuple(h for h in p.cl.rack_hosts(rack) if h in p.main.hosts)
    p.faults.append(F.power_capping(p.cl, hosts, p.at(0.35, 0.45), p.at(0.75, 0.85), p.rng, rack))
    out = p.outside()
    p.faults.append(
        _decoy(p, F.power_capping(p.cl, out[:1], p.at(0.1, 0.2), p.at(0.3, 0.35), p.rng, p.cl.rack(out[0])))
    )


def slow_storage(p: Plan) -> None:
    # The server serves every host: all of them complain. The stall spans a periodic save or two.
    start = p.at(0.4, 0.45)
    span = 2.5 * p.main.save_every * p.main.step_s
    p.faults.append(F.slow_storage(p.cl, p.cl.hosts, start, start + span, p.rng, lustre=bool(p.rng.integers(2))))
    blip = p.at(0.1, 0.15)
    blip_fault = F.slow_storage(p.cl, p.cl.hosts, blip, blip + 40.0, p.rng)
    p.faults.append(blip_fault.as_decoy("harmless_blip", harmless=True))


def preemption(p: Plan) -> None:
    p.faults.append(F.preemption(p.cl, p.main.hosts, p.at(0.4, 0.5)))
    link_decoys(p)


def software_crash(p: Plan) -> None:
    p.faults.append(F.software_crash(p.cl, p.main.hosts, p.at(0.4, 0.5)))
    link_decoys(p)


def straggler_compute(p: Plan) -> None:
    host = p.pick(p.main.hosts)
    rank = p.main.hosts.index(host) * p.cl.gpus_per_node + p.gpu()
    p.faults.append(F.straggler(p.cl, p.main.hosts, host, p.at(0.35, 0.45), p.at(0.75, 0.85), p.rng, rank))
    link_decoys(p)


def routine(p: Plan) -> None:
    link_decoys(p)


# ------------------------------------------------------------------ variants: the same physics, told otherwise


def power_brake(p: Plan) -> None:
    """One node's power supply brakes its GPUs (HW power brake + HW slowdown), exported by DCGM 4.6
    (CLOCKS_EVENT_REASONS, as a float) every 60 s; a braked node outside the job is the decoy."""
    p.faults.append(F.power_brake(p.cl, p.pick(p.main.hosts), p.at(0.35, 0.45), p.at(0.75, 0.85), p.rng))
    p.faults.append(_decoy(p, F.power_brake(p.cl, p.pick(p.outside()), p.at(0.1, 0.2), p.at(0.3, 0.35), p.rng)))
    p.render = replace(p.render, dcgm_46_names=True, dcgm_every_s=60.0)


def slow_storage_journald(p: Plan) -> None:
    """The storage stall, every host keeping journald JSON whose kernel MESSAGEs hold the printk stamp."""
    slow_storage(p)
    p.render = replace(p.render, journal_printk=True)


def preemption_exit_signal(p: Plan) -> None:
    """The preemption, told by Megatron alone: no Slurm notice in the log, no launcher stamps (undated
    checkpoint lines; only `[...] datetime:` and iteration lines carry a time), sacct PREEMPTED 0:15."""
    preemption(p)
    p.render = replace(p.render, launcher_stamps=False, slurm_notice=False)


def link_decoys(p: Plan) -> None:
    """A real degraded link outside the main job (it slows whatever runs there, not the main job)."""
    out = p.pick(p.outside())
    p.faults.append(_decoy(p, F.ghost_link(p.cl, out, p.gpu(), p.at(0.2, 0.3), p.at(0.6, 0.7), p.rng)))


SCENARIOS: dict[str, Callable[[Plan], None]] = {
    "ghost-link": ghost_link,
    "gpu-fell-off-bus": gpu_fell_off_bus,
    "ecc-dbe": ecc_dbe,
    "nvlink": nvlink,
    "link-flap": link_flap,
    "thermal-rack": thermal_rack,
    "power-capping": power_capping,
    "slow-storage": slow_storage,
    "preemption": preemption,
    "software-crash": software_crash,
    "straggler-compute": straggler_compute,
    "routine": routine,
    "power-brake": power_brake,
    "slow-storage-journald": slow_storage_journald,
    "preemption-exit-signal": preemption_exit_signal,
    "gpu-fell-off-bus-reboot": gpu_fell_off_bus_reboot,
    "power-cap-host": subtle.power_cap_host_scenario,
    "gray-gpu": subtle.gray_gpu_scenario,
}


def campaign(p: Plan) -> None:
    """Many jobs over days: parallel lanes of nodes, each running jobs back to back, each job meeting one
    fault kind (or none). A lane's faults are decoys for the other lanes' jobs."""
    kinds = [
        "ghost-link",
        "routine",
        "gpu-fell-off-bus",
        "thermal-rack",
        "slow-storage",
        "ecc-dbe",
        "preemption",
        "link-flap",
        "straggler-compute",
        "power-capping",
        "nvlink",
        "software-crash",
    ]
    p.jobs.clear()
    part = max(2, min(8, p.cl.nodes // 2))
    lanes = max(1, p.cl.nodes // part)
    per_lane = max(2, int((p.t1 - p.t0) // (8 * 3600)))
    span = (p.t1 - p.t0) / per_lane
    for k in range(per_lane * lanes):
        lane, slot = k % lanes, k // lanes
        lo = p.t0 + slot * span + lane * 600.0
        hosts = p.cl.hosts[lane * part : (lane + 1) * part]
        sub = Plan(p.cl, lo, lo + span, p.rng)
        sub.jobs.append(
            sub.job(
                str(1001 + k),
                hosts,
                lo + 300.0,
                sub.t1 - 900.0,
                name=str(p.pick(("gpt3-175b-pretrain", "llama-70b-sft", "moe-8x22b"))),
            )
        )
        SCENARIOS[kinds[k % len(kinds)]](sub)
        p.jobs += sub.jobs
        p.faults += [
            f if f.decoy_reason or set(f.hosts) & set(hosts) else f.as_decoy("outside_job") for f in sub.faults
        ]


SCENARIOS["campaign"] = campaign


def after_checkpoint_decoy(p: Plan, tl) -> F.Fault | None:
    """A burst of symbol errors and a corrected AER on a job host, starting just after the checkpoint
    it might be blamed for (the first non-periodic one, else the first save): harmless by design."""
    ckpts = [c for c in tl.checkpoints if c.trigger != "periodic"] or list(tl.checkpoints)
    if not ckpts:
        return None
    c = ckpts[0]
    start = c.end / US + float(p.rng.uniform(60, 180))
    # never on the component of a real fault: the decoy must be told apart by what it is, not by when
    taken = {(h, f.cause.component) for f in p.faults if not f.decoy_reason for h in f.hosts}
    free = [(h, n) for h in tl.spec.hosts for n in range(p.cl.nics_per_host) if (h, f"mlx5_{n}") not in taken]
    host, nic = p.pick(free)
    cause = Cause("network.link_degraded", (host,), f"mlx5_{nic}", F.dt(start))
    effects = (F.Effect("link_errors", host, start, start + 900.0, nic, -1.0),)
    logs = tuple(aer_corrected(p.cl, host, start, p.rng))
    return F.Fault("symbol_error_burst", (host,), start, cause, effects, logs, None, start + 900.0, "after_checkpoint")


def simulate(
    outdir: Path,
    scenario: str,
    seed: int = 0,
    nodes: int = 16,
    hours: float = 6.0,
    gpus_per_node: int = 8,
    overwrite: bool = False,
    gz: bool = False,
    intervals: export.Intervals | None = None,
    telemetry: bool = True,
    scheduler: str = "slurm",
    **rendering: object,
) -> dict:
    """Write one scenario's exports under ``outdir/exports`` and its ``outdir/truth.json``.

    ``rendering`` overrides the scenario's Rendering fields (``trainer``, ``launcher``, ``slurm_lines``,
    ``srun_label``, ``trainer_version``; None keeps the scenario's): the job's log is written by that
    trainer under that launcher. torchrun restarts a failed worker group in place (``--max-restarts 3``),
    and with Slurm's lines the batch script requeues the job itself: both change the job's history, and
    truth.json follows.

    ``intervals`` overrides the sampling the cluster's size implies (Intervals.for_size), so that a
    test can put a small job under a campus's sparse sampling. ``telemetry=False`` writes only the job
    logs and sacct (the accounting's inputs, the same bytes as in a full run): the metrics and syslogs
    are most of a run's time and are not written. ``scheduler="kubernetes"``: the same faults seen through
    pods, events, node conditions and container logs instead of sacct and job logs (kubernetes.py).

    Everything is written into a scratch folder inside outdir and moved into place at the end: an
    interrupted run leaves no half-written simulation behind.
    """
    if scenario not in SCENARIOS:
        raise InputError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    if scheduler not in SCHEDULERS:
        raise InputError(f"unknown scheduler {scheduler!r}; known: {', '.join(SCHEDULERS)}")
    if nodes < MIN_NODES:
        raise InputError(f"--nodes must be at least {MIN_NODES}: the job and a decoy outside it")
    outdir = Path(outdir)
    targets = [outdir / "exports", outdir / "truth.json"]
    if any(t.exists() for t in targets) and not overwrite:
        raise InputError(f"{outdir} already holds a simulation: remove it or pass --force")
    outdir.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".simulating-", dir=outdir))
    try:
        meta = _generate(
            scratch, scenario, seed, nodes, hours, gpus_per_node, gz, intervals, telemetry, rendering, scheduler
        )
        for t in targets:
            if t.is_dir():
                shutil.rmtree(t)
            elif t.exists():
                t.unlink()
            (scratch / t.name).rename(t)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return meta


RENDERING_KEYS = ("trainer", "trainer_version", "launcher", "srun_label", "slurm_lines")


def _render_as(plan: Plan, overrides: dict) -> None:
    """The rendering asked for, and what it changes in the jobs: torchrun restarts in place, a batch
    script that prints Slurm's lines requeues itself."""
    unknown = set(overrides) - set(RENDERING_KEYS)
    if unknown:
        raise InputError(f"unknown rendering option(s): {', '.join(sorted(unknown))}")
    plan.render = replace(plan.render, **overrides)
    trainers.check(plan.render)
    restarts = ELASTIC_RESTARTS if plan.render.launcher == "torchrun" else 0
    plan.jobs[:] = [replace(j, elastic_restarts=restarts, self_requeue=plan.render.slurm_lines) for j in plan.jobs]


def _generate(
    outdir: Path,
    scenario: str,
    seed: int,
    nodes: int,
    hours: float,
    gpus_per_node: int,
    gz: bool,
    intervals: export.Intervals | None = None,
    telemetry: bool = True,
    rendering: dict | None = None,
    scheduler: str = "slurm",
) -> dict:
    cl = Cluster(nodes, gpus_per_node, seed=seed)
    rng = np.random.default_rng([seed, 1])
    plan = base_plan(cl, hours, rng)
    SCENARIOS[scenario](plan)
    _render_as(plan, {k: v for k, v in (rendering or {}).items() if v is not None})
    if scheduler == "kubernetes":
        kubernetes.on_kubernetes(plan)
    timelines = export.run_jobs(plan, seed)
    # the exports cover every job to its end (a requeued job may outlive the nominal window)
    plan.t1 = max(plan.t1, float(np.ceil(max(tl.attempts[-1].end for tl in timelines) / US / 3600.0) * 3600.0))
    decoy = after_checkpoint_decoy(plan, timelines[0])
    plan.faults += [decoy] if decoy else []
    used = {h for j in plan.jobs for h in j.hosts}
    noise = benign_noise(
        cl,
        plan.t0,
        plan.t1,
        rng,
        tuple(h for h in cl.hosts if h not in used),
        tuple(h for j in plan.jobs[1:] for h in j.hosts if h not in plan.main.hosts),
    )
    effects: dict[str, list[F.Effect]] = {}
    for e in [e for f in plan.faults for e in f.effects] + noise.effects:
        effects.setdefault(e.host, []).append(e)
    root = outdir / "exports"
    iv = intervals or export.Intervals.for_size(nodes, hours)
    iv = replace(iv, dcgm=plan.render.dcgm_every_s) if plan.render.dcgm_every_s else iv
    samples = 0
    if telemetry:
        samples = export.write_telemetry(
            root, cl, (plan.t0, plan.t1), iv, seed, export.host_loads(cl, timelines), effects, gz, plan.render
        )
        logs = [ln for f in plan.faults for ln in f.logs] + noise.logs
        export.write_syslogs(root, cl, plan.t0, plan.t1, seed, logs, effects, gz, plan.render)
    if scheduler == "kubernetes":
        kube_export.write_kubernetes(root, cl, timelines, effects, plan.render, seed)
    else:
        export.write_jobs(root, timelines, plan.render)
    meta = {
        "scenario": scenario,
        "seed": seed,
        "nodes": nodes,
        "hours": hours,
        "gpus_per_node": gpus_per_node,
        "gzip": gz,
        "start": groundtruth.iso(plan.t0),
        "end": groundtruth.iso(plan.t1),
        "main_job": plan.main.job_id,
        **({"scheduler": scheduler} if scheduler != "slurm" else {}),
        "metric_samples": samples,
        "rendering": {k: getattr(plan.render, k) for k in RENDERING_KEYS},
    }
    groundtruth.write(outdir / "truth.json", meta, timelines, plan.faults)
    return meta
