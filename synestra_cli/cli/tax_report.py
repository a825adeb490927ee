"""`synestra tax-report`: the checkpoint tax, goodput and interval advice."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal

import click

from synestra_cli.api.shared import ExitCode, plural
from synestra_cli.cli.common import engine_option, handle_errors
from synestra_cli.cli.options import (
    CAPACITY_GPUS,
    GPU_HOUR_PRICE,
    TAX_FAIL_OVER,
    db_option,
    format_option,
    host_option,
    job_option,
    refuse_together,
    window_options,
)
from synestra_cli.cli.render import console, dumps, human_duration, printable, render_rows, safe

if TYPE_CHECKING:  # the command imports the library when it runs (fast --help)
    from synestra_cli.api.words import FleetDoc, IntervalDoc, JobTaxDoc, RankedCauseDoc

BAR_WIDTH = 40
JOB_CSV_COLUMNS = ["job", "gpus", "wall_s", "gpu_hours", "checkpoint_tax", "hidden_tax", "goodput", "failures"]
USD_CSV_COLUMNS = ["wall_usd", "checkpoint_tax_usd", "hidden_tax_usd"]


def _dollars(usd: Mapping[str, object], key: str) -> str:
    return f" (${usd[key]:,.2f})" if usd else ""


def _usd(gpu_hours: float, price: float | None) -> str:
    """`  $12.34` beside a GPU-hour figure when --gpu-hour-price is given, else nothing."""
    return "" if price is None else f" (${gpu_hours * price:,.2f})"


def _pct(x: float | None) -> str:
    """A ratio, or n/a when it has no denominator (CPU-only jobs hold no GPU-hours)."""
    return "n/a" if x is None else f"{x:.1%}"


def _print_job(doc: JobTaxDoc, console, price: float | None = None) -> None:
    from rich.table import Table

    usd: Mapping[str, object] = doc.get("usd") or {}
    wall_usd = f", ${usd['wall']:,.2f}" if usd else ""
    console.print(
        f"[bold]job {safe(doc['job'])}[/]  {plural(doc['gpus'], 'GPU')}, wall {human_duration(doc['wall_s'])} "
        f"({doc['gpu_hours']:.1f} GPU-h{wall_usd})   "
        f"checkpoint tax [bold red]{doc['checkpoint_tax']:.1%}[/]{_dollars(usd, 'checkpoint_tax')}  "
        f"hidden tax [bold yellow]{doc['hidden_tax']:.1%}[/]{_dollars(usd, 'hidden_tax')}  "
        f"goodput [bold green]{doc['goodput']:.1%}[/]"
    )
    table = Table(show_header=True, header_style="bold", box=None)
    columns = ("bucket", "time", "GPU-h", *(("USD",) if price is not None else ()), "share", "")
    for col in columns:
        table.add_column(col, justify="left" if col in ("bucket", "") else "right")
    for name, secs in doc["buckets_s"].items():
        share = secs / doc["wall_s"] if doc["wall_s"] else 0.0
        gh = doc["buckets_gpu_hours"][name]
        table.add_row(
            name,
            human_duration(secs),
            f"{gh:,.2f}",
            *((f"${gh * price:,.2f}",) if price is not None else ()),
            f"{share:.1%}",
            "█" * round(share * BAR_WIDTH),
        )
    console.print(table)
    for cause in doc["by_cause"][:5]:
        where = " ".join(x for x in (cause.get("host"), cause.get("component")) if x)
        console.print(
            f"  cause {safe(cause['category'])} {safe(where)}: {cause['gpu_hours']:.2f} GPU-h"
            + _usd(cause["gpu_hours"], price)
        )
    for note in doc["notes"]:
        console.print(f"  [yellow]note[/]: {safe(note)}")
    iv = doc["interval"]
    if iv["daly_s"]:
        _print_advice(iv, " ", console)
    else:
        console.print(f"  interval: {safe(iv['note'])}")
    console.print()


def _print_advice(iv: IntervalDoc, who: str, console) -> None:
    """Young/Daly advice on one line (the fleet's names the failures it pooled), then its action."""
    pooled = f" ({iv['failures']} failures)" if who == "fleet" else ""
    mtbf = f"MTBF {(iv['mtbf_s'] or 0) / 3600:.1f} h{pooled},"
    console.print(
        f"{who} interval: save {iv['save_cost_s']:.0f} s, {mtbf} current {(iv['current_interval_s'] or 0) / 60:.1f} "
        f"min -> Daly {(iv['daly_s'] or 0) / 60:.1f} min (waste {iv['waste_current'] or 0:.1%} -> "
        f"{iv['waste_recommended']:.1%})"
    )
    if action := iv["action"]:
        console.print(f"{who} action: {action['text']}")


def _print_fleet(fleet: FleetDoc, causes: list[RankedCauseDoc], by: str, console, price: float | None = None) -> None:
    usd: Mapping[str, object] = fleet.get("usd") or {}
    console.print(
        f"[bold]fleet[/]: {plural(fleet['jobs'], 'job')}, {fleet['allocated_gpu_hours']:,.1f} GPU-h allocated"
        f"{_dollars(usd, 'allocated')}, "
        f"checkpoint tax {_pct(fleet['checkpoint_tax'])}{_dollars(usd, 'checkpoint_tax')}, "
        f"hidden tax {_pct(fleet['hidden_tax'])}{_dollars(usd, 'hidden_tax')}, "
        f"ETTR {_pct(fleet['ettr'])}, {fleet['failures']} failures"
        + ("" if fleet["allocated_gpu_hours"] else " (no GPUs allocated: ratios are not defined)")
    )
    iv = fleet["interval"]
    if iv["daly_s"]:
        _print_advice(iv, "fleet", console)
    if "economic_availability_capacity" in fleet:
        console.print(f"economic availability vs capacity: {_pct(fleet['economic_availability_capacity'])}")
    if causes:
        console.print(f"[bold]costliest by {by}[/]")
        for row in causes[:10]:
            console.print(
                f"  {safe(row['key']):<40} {row['gpu_hours']:>10,.2f} GPU-h{_usd(row['gpu_hours'], price)}  "
                f"{plural(row['jobs'], 'job')}"
            )


@click.command("tax-report")
@job_option("Only these jobs (default: every job in the window, as with --all); repeat it or use commas.")
@click.option("--all", "all_jobs", is_flag=True, help="Every job in the window, with the fleet view.")
@window_options("jobs that ran")
@host_option("jobs")
@click.option("--gpu-hour-price", "price", type=GPU_HOUR_PRICE, help="USD per GPU-hour: adds dollars to every figure.")
@click.option("--capacity-gpus", type=CAPACITY_GPUS, help="GPUs of the cluster: economic availability vs capacity.")
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
    type=TAX_FAIL_OVER,
    metavar="PCT",
    help=f"Exit {int(ExitCode.THRESHOLD)} if a job's checkpoint tax exceeds PCT percent (every such job is named).",
)
@click.option("--hidden", is_flag=True, help="With --fail-over: test the hidden (degraded-throughput) tax instead.")
@format_option("table", "json", "csv")
@db_option
@engine_option
@handle_errors
def command(jobs, all_jobs, since, until, hosts, price, capacity_gpus, by, fail_over, hidden, fmt, db, engine) -> None:
    """Account the checkpoint tax: each job's wall time in buckets that sum to it, the causes that cost
    most, and Young/Daly checkpoint-interval advice. Formulas: docs/accounting.md.

    \b
    Exit codes: 0 done, 5 unknown job, 6 store without jobs, 7 over --fail-over.
    JSON schema: synestra.tax/1 (docs/accounting.md); csv: one row per job.

    \b
    Example:
      synestra tax-report --all --gpu-hour-price 2.5 --by host
      synestra tax-report --since -7d --host gpu-[001-004] --format csv
      synestra tax-report --job 1001,1003 --fail-over 15 || page-oncall
    """
    refuse_together({"--job": jobs, "--all": all_jobs})
    if hidden and fail_over is None:
        raise click.UsageError("--hidden needs --fail-over PCT")
    from synestra_cli.api.taxes import tax_report
    from synestra_cli.api.words import BUCKETS
    from synestra_cli.cli.progress import progress_on_tty

    report = tax_report(
        db=db,
        jobs=jobs,
        hosts=hosts,
        since=since,
        until=until,
        price=price,
        capacity_gpus=capacity_gpus,
        by=by,
        engine=engine,
        long_steps=progress_on_tty,
    )
    doc = report.to_json()
    docs = doc["jobs"]
    if fmt == "json":
        click.echo(dumps(doc))
    elif fmt == "csv":
        rows = [
            {
                **d,
                **{f"{k}_s": v for k, v in d["buckets_s"].items()},
                **{f"{k}_usd": v for k, v in (d.get("usd") or {}).items()},
            }
            for d in docs
        ]
        columns = JOB_CSV_COLUMNS + [f"{b}_s" for b in BUCKETS] + (USD_CSV_COLUMNS if price is not None else [])
        render_rows(rows, columns, "csv")
    else:
        out = console()
        for d in docs:
            _print_job(d, out, price)
        _print_fleet(doc["fleet"], doc["causes"], by, out, price)
    if fail_over is not None:
        _fail_over(docs, "hidden_tax" if hidden else "checkpoint_tax", fail_over)


def _fail_over(docs: list[JobTaxDoc], key: Literal["checkpoint_tax", "hidden_tax"], limit: float) -> None:
    """Every job over the line on stderr, worst first, then exit 7."""
    over = sorted((d for d in docs if d[key] is not None and d[key] * 100 > limit), key=lambda d: -d[key])
    if not over:
        return
    what = key.replace("_", " ")
    for d in over:
        click.echo(f"tax-report: job {printable(d['job'])} {what} {d[key]:.1%} exceeds {limit}%", err=True)
    click.echo(f"tax-report: {len(over)} of {plural(len(docs), 'job')} over {limit}%", err=True)
    sys.exit(int(ExitCode.THRESHOLD))
