"""`synestra tax-report`: the checkpoint tax, goodput and interval advice."""

from __future__ import annotations

import sys

import click

from synestra_cli.cli.common import FiniteFloat, check_window, db_option, engine_option, handle_errors
from synestra_cli.cli.render import console, dumps, printable, render_rows
from synestra_cli.errors import ExitCode

BAR_WIDTH = 40
JOB_CSV_COLUMNS = ["job", "gpus", "wall_s", "gpu_hours", "checkpoint_tax", "hidden_tax", "goodput", "failures"]


def _pct(x: float | None) -> str:
    """A ratio, or n/a when it has no denominator (CPU-only jobs hold no GPU-hours)."""
    return "n/a" if x is None else f"{x:.1%}"


def _safe(value) -> str:
    """Text from the logs (job ids, hosts, components) shown as text: no markup, no escape sequences."""
    from rich.markup import escape

    return escape(printable(value))


def _print_job(doc: dict, console) -> None:
    from rich.table import Table

    console.print(
        f"[bold]job {_safe(doc['job'])}[/]  {doc['gpus']} GPUs, wall {doc['wall_s'] / 3600:.2f} h "
        f"({doc['gpu_hours']:.1f} GPU-h)   checkpoint tax [bold red]{doc['checkpoint_tax']:.1%}[/]  "
        f"hidden tax [bold yellow]{doc['hidden_tax']:.1%}[/]  goodput [bold green]{doc['goodput']:.1%}[/]"
    )
    table = Table(show_header=True, header_style="bold", box=None)
    for col in ("bucket", "seconds", "GPU-h", "share", ""):
        table.add_column(col, justify="left" if col in ("bucket", "") else "right")
    for name, secs in doc["buckets_s"].items():
        share = secs / doc["wall_s"] if doc["wall_s"] else 0.0
        table.add_row(
            name,
            f"{secs:,.0f}",
            f"{doc['buckets_gpu_hours'][name]:,.2f}",
            f"{share:.1%}",
            "█" * round(share * BAR_WIDTH),
        )
    console.print(table)
    for cause in doc["by_cause"][:5]:
        where = " ".join(x for x in (cause.get("host"), cause.get("component")) if x)
        console.print(f"  cause {_safe(cause['category'])} {_safe(where)}: {cause['gpu_hours']:.2f} GPU-h")
    for note in doc["notes"]:
        console.print(f"  [yellow]note[/]: {_safe(note)}")
    iv = doc["interval"]
    if iv["daly_s"]:
        console.print(
            f"  interval: save {iv['save_cost_s']:.0f} s, MTBF {iv['mtbf_s'] / 3600:.1f} h, current "
            f"{(iv['current_interval_s'] or 0) / 60:.1f} min -> Daly {iv['daly_s'] / 60:.1f} min "
            f"(waste {iv['waste_current'] or 0:.1%} -> {iv['waste_recommended']:.1%})"
        )
        if iv.get("action"):
            console.print(f"  action: {iv['action']['text']}")
    else:
        console.print(f"  interval: {_safe(iv['note'])}")
    console.print()


def _print_fleet(fleet: dict, causes: list[dict], by: str, console) -> None:
    console.print(
        f"[bold]fleet[/]: {fleet['jobs']} jobs, {fleet['allocated_gpu_hours']:,.1f} GPU-h allocated, "
        f"checkpoint tax {_pct(fleet['checkpoint_tax'])}, hidden tax {_pct(fleet['hidden_tax'])}, "
        f"ETTR {_pct(fleet['ettr'])}, {fleet['failures']} failures"
        + ("" if fleet["allocated_gpu_hours"] else " (no GPUs allocated: ratios are not defined)")
    )
    iv = fleet["interval"]
    if iv["daly_s"]:
        console.print(
            f"fleet interval: save {iv['save_cost_s']:.0f} s, MTBF {iv['mtbf_s'] / 3600:.1f} h "
            f"({iv['failures']} failures), current {(iv['current_interval_s'] or 0) / 60:.1f} min -> "
            f"Daly {iv['daly_s'] / 60:.1f} min (waste {iv['waste_current'] or 0:.1%} -> "
            f"{iv['waste_recommended']:.1%})"
        )
        if iv.get("action"):
            console.print(f"fleet action: {iv['action']['text']}")
    if "economic_availability_capacity" in fleet:
        console.print(f"economic availability vs capacity: {_pct(fleet['economic_availability_capacity'])}")
    if causes:
        console.print(f"[bold]costliest by {by}[/]")
        for row in causes[:10]:
            console.print(f"  {_safe(row['key']):<40} {row['gpu_hours']:>10,.2f} GPU-h  {row['jobs']} job(s)")


@click.command("tax-report")
@click.option("--job", "job_id", help="One job (default: every job, as with --all).")
@click.option("--all", "all_jobs", is_flag=True, help="Every job in the window, with the fleet view.")
@click.option("--since", type=click.DateTime(), help="Jobs that ran after this UTC time.")
@click.option("--until", type=click.DateTime(), help="Jobs that ran before this UTC time.")
@click.option(
    "--gpu-hour-price", "price", type=FiniteFloat(0.0), help="USD per GPU-hour: adds dollars to every figure."
)
@click.option(
    "--capacity-gpus", type=click.IntRange(min=1), help="GPUs of the cluster: economic availability vs capacity."
)
@click.option(
    "--by",
    type=click.Choice(["category", "host", "component", "job"]),
    default="category",
    show_default=True,
    help="How causes are ranked.",
)
@click.option(
    "--fail-over",
    "fail_over",
    type=FiniteFloat(0.0, 100.0),
    metavar="PCT",
    help=f"Exit {int(ExitCode.THRESHOLD)} if a job's checkpoint tax exceeds PCT percent.",
)
@click.option("--hidden", is_flag=True, help="With --fail-over: test the hidden (degraded-throughput) tax instead.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table", show_default=True)
@db_option
@engine_option
@handle_errors
def command(job_id, all_jobs, since, until, price, capacity_gpus, by, fail_over, hidden, fmt, db, engine) -> None:
    """Account the checkpoint tax: each job's wall time in buckets that sum to it, the causes that cost
    most, and Young/Daly checkpoint-interval advice. Formulas: docs/accounting.md.

    \b
    Example:
      synestra tax-report --all --gpu-hour-price 2.5 --by host
      synestra tax-report --job 1001 --fail-over 15 || page-oncall
    """
    check_window(since, until)
    from synestra_cli.accounting.attribution import build_report
    from synestra_cli.accounting.buckets import BUCKETS
    from synestra_cli.accounting.report import SCHEMA, job_doc
    from synestra_cli.clusters import resolve_job
    from synestra_cli.explain import memo
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        job_id = resolve_job(conn, job_id) if job_id and not all_jobs else job_id
        if engine != "local":  # explained by Ray workers, then reused as kept explanations (engine/)
            from synestra_cli.engine import explain_on
            from synestra_cli.explain.api import jobs_in_window

            explain_on(engine, conn, db, [job_id] if job_id and not all_jobs else jobs_in_window(conn, since, until))
        full = build_report(conn, None if all_jobs else job_id, since, until, price, capacity_gpus, by)
    memo.save_to(db, full.key, full.computed)  # the next report reuses them (explain/memo.py)
    report, fleet, causes = full.report, full.fleet, full.causes
    docs = [job_doc(t, price) for t in report.jobs]
    if fmt == "json":
        click.echo(dumps({"schema": SCHEMA, "jobs": docs, "fleet": fleet, "by": by, "causes": causes}))
    elif fmt == "csv":
        rows = [{**d, **{f"{k}_s": v for k, v in d["buckets_s"].items()}} for d in docs]
        render_rows(rows, JOB_CSV_COLUMNS + [f"{b}_s" for b in BUCKETS], "csv")
    else:
        out = console()
        for d in docs:
            _print_job(d, out)
        _print_fleet(fleet, causes, by, out)
    key = "hidden_tax" if hidden else "checkpoint_tax"
    if fail_over is not None and any(d[key] * 100 > fail_over for d in docs):
        worst = max(docs, key=lambda d: d[key])
        click.echo(
            f"tax-report: job {worst['job']} {key.replace('_', ' ')} {worst[key]:.1%} exceeds {fail_over}%", err=True
        )
        sys.exit(int(ExitCode.THRESHOLD))
