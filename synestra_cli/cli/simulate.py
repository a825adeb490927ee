"""`synestra simulate OUTDIR --scenario NAME`: write a simulated cluster's exports and their ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import click

from synestra_cli.api.catalog import LAUNCHERS, MIN_NODES, SCENARIOS, SCHEDULERS, TRAINERS, simulate
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import OUTPUT_FOLDER, SEED, Number, format_option


@click.command("simulate")
@click.argument("outdir", type=OUTPUT_FOLDER)
@click.option("--scenario", required=True, type=click.Choice(sorted(SCENARIOS)), help="What goes wrong.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--nodes", type=click.IntRange(MIN_NODES, 4096), default=16, show_default=True, help="Hosts in the cluster."
)
@click.option(
    "--hours",
    type=Number(1.0, 24.0 * 14, "hours"),
    default=6.0,
    show_default=True,
    help="Length of the simulated window.",
)
@click.option("--gpus-per-node", type=click.IntRange(1, 8), default=8, show_default=True)
@click.option("--gzip", "gz", is_flag=True, help="Compress the telemetry and syslog files (.gz; ingest reads them).")
@click.option("--force", is_flag=True, help="Replace a simulation already in OUTDIR.")
@click.option(
    "--trainer",
    type=click.Choice(TRAINERS),
    default=None,
    help="Who writes the job's log, in its real wording [default: megatron].",
)
@click.option(
    "--trainer-version",
    type=click.Choice(["current", "previous"]),
    default=None,
    help="The trainer's (and torchrun's) current wording or the previous one where they differ [default: current].",
)
@click.option(
    "--launcher",
    type=click.Choice(LAUNCHERS),
    default=None,
    help="srun alone, or torchrun under srun (its agent restarts a failed worker group in place) [default: srun].",
)
@click.option(
    "--srun-label", is_flag=True, default=None, help="`srun -l`: every task's line prefixed with its task id."
)
@click.option(
    "--slurm-lines/--no-slurm-lines",
    default=None,
    help="Slurm's own job-end lines in the job's output (the batch script then requeues the job itself) "
    "[default: the scenario's; off but for gpu-fell-off-bus-reboot].",
)
@click.option(
    "--scheduler",
    type=click.Choice(SCHEDULERS),
    default="slurm",
    show_default=True,
    help="How the jobs are told: Slurm (sacct, job logs) or Kubernetes (pods, events, node conditions, "
    "container logs; job ids namespace/name).",
)
@format_option("json", default="json")
@handle_errors
def command(
    outdir: Path,
    scenario: str,
    seed: int,
    nodes: int,
    hours: float,
    gpus_per_node: int,
    gz: bool,
    force: bool,
    trainer: str | None,
    trainer_version: str | None,
    launcher: str | None,
    srun_label: bool | None,
    slurm_lines: bool | None,
    scheduler: str,
    fmt: str,
) -> None:
    """Simulate a GPU cluster that fails in a known way: OUTDIR/exports/ holds syslog, DCGM, fabric
    counters, optics, topology, the training jobs' logs and sacct; OUTDIR/truth.json says what happened.
    The jobs' logs are Megatron-LM's under srun unless --trainer/--launcher say otherwise.

    Prints the run's summary on stdout (JSON schema synestra.simulate/1). Schema and physics:
    docs/simulator.md.

    \b
    Example:
      synestra simulate /tmp/sim --scenario ghost-link --seed 3 --nodes 16 --hours 6
      synestra simulate /tmp/sim2 --scenario ecc-dbe --trainer nemo2 --launcher torchrun --slurm-lines
      synestra ingest /tmp/sim/exports && synestra explain --job 1001
      synestra simulate /tmp/k8s --scenario preemption --scheduler kubernetes --nodes 8 --hours 4
    """
    meta = simulate(
        outdir,
        scenario,
        seed=seed,
        nodes=nodes,
        hours=hours,
        gpus_per_node=gpus_per_node,
        overwrite=force,
        gz=gz,
        trainer=trainer,
        trainer_version=trainer_version,
        launcher=launcher,
        srun_label=srun_label,
        slurm_lines=slurm_lines,
        scheduler=scheduler,
    )
    click.echo(json.dumps({"schema": "synestra.simulate/1", **meta}))
