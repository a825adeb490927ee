"""`synestra simulate OUTDIR --scenario NAME`: write a simulated cluster's exports and their ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import click

from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import OUTPUT_FOLDER, SEED, Number, format_option
from synestra_cli.simulate.scenarios import MIN_NODES, SCENARIOS, simulate


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
    fmt: str,
) -> None:
    """Simulate a GPU cluster that fails in a known way: OUTDIR/exports/ holds syslog, DCGM, fabric
    counters, optics, topology, Megatron-LM logs and sacct; OUTDIR/truth.json says what happened.

    Prints the run's summary on stdout (JSON schema synestra.simulate/1). Schema and physics:
    docs/simulator.md.

    \b
    Example:
      synestra simulate /tmp/sim --scenario ghost-link --seed 3 --nodes 16 --hours 6
      synestra ingest /tmp/sim/exports && synestra explain --job 1001
    """
    meta = simulate(
        outdir, scenario, seed=seed, nodes=nodes, hours=hours, gpus_per_node=gpus_per_node, overwrite=force, gz=gz
    )
    click.echo(json.dumps({"schema": "synestra.simulate/1", **meta}))
