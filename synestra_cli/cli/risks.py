"""`synestra risks`: components degrading now, before they cost a checkpoint (library:
synestra_cli.fleet.risks)."""

from __future__ import annotations

import sys

import click

from synestra_cli.api.shared import ExitCode, iso, path, plural
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import HISTORY_HOURS, RISK_FAIL_OVER, TIME_HELP, UTC_TIME, db_option, format_option

CSV_COLUMNS = [
    "rank",
    "status",
    "kind",
    "asset",
    "identity",
    "categories",
    "since",
    "score",
    "jobs",
    "gpu_hours_per_hour",
    "action",
]


def _rows(doc: dict) -> list[dict]:
    from synestra_cli.cli.fleet import identity

    return [
        {
            "rank": i,
            "status": r["status"],
            "kind": r["asset"]["kind"],
            "asset": r["asset"]["id"],
            "identity": identity(r["asset"]),
            "categories": r["categories"],
            "since": r["since"],
            "score": r["score"],
            "jobs": [j["job"] for j in r["jobs"]],
            "gpu_hours_per_hour": r["gpu_hours_per_hour"],
            "action": r["action"],
        }
        for i, r in enumerate(doc["risks"], 1)
    ]


def _print(doc: dict) -> None:
    from rich.text import Text

    from synestra_cli.cli.fleet import identity
    from synestra_cli.cli.render import console, printable, safe

    out = console()
    out.print(
        f"[bold]risks at {iso(doc['at'])}[/]: {plural(doc['degrading'], 'component')} degrading now, "
        f"{plural(len(doc['risks']) - doc['degrading'], 'known lemon')}"
    )
    for i, r in enumerate(doc["risks"], 1):  # the store's words (hosts, causes, reasons) as text: safe()
        a = r["asset"]
        since = f" since {iso(r['since'])}" if r["since"] else ""
        jobs = ", ".join(f"{j['job']} ({plural(j['gpus'], 'GPU')})" for j in r["jobs"]) or "no job running on it"
        style = "bold red" if r["status"] == "degrading" else "yellow"
        ident = identity(a)
        out.print(
            f"[{style}]{i}. {r['status']}[/] "
            + safe(
                f"{a['kind']} {a['id']}{f' ({ident})' if ident else ''}: "
                f"{', '.join(r['categories'])}{since}, score {r['score']:.2f}"
            )
        )
        out.print(safe(f"   jobs: {jobs}; at stake {r['gpu_hours_per_hour']:,.0f} GPU-h per hour"))
        for reason in r["lemon_reasons"]:
            out.print(safe(f"   lemon: {reason}"))
        for lk in r["evidence"][:5]:
            ev = lk["evidence"]
            # a metric's words carry its values already: only a log line adds where to read it
            where = f"  {path(ev.get('source'))}:{ev.get('line')}" if ev.get("type") == "log" else ""
            line = f"   {iso(lk['time'])} {lk['layer']:<9} {lk['host']}:{lk['entity'] or ''} {lk['signal']}"
            out.print(Text(printable(line)) + Text(printable(where), style="dim"))
        out.print(safe(f"   action: {r['action']}"))


@click.command("risks")
@click.option(
    "--at",
    "at",
    type=UTC_TIME,
    help=f"Judge the fleet as of this time (default: the store's latest data; {TIME_HELP}).",
)
@click.option(
    "--history-hours",
    type=HISTORY_HOURS,
    default=168.0,  # api.health.HISTORY_HOURS (the library's default, kept literal: --help imports nothing)
    show_default=True,
    help="Look for known lemons in the jobs that ended this long before --at (0: skip, faster).",
)
@click.option(
    "--fail-over",
    "fail_over",
    type=RISK_FAIL_OVER,
    metavar="N",
    help=f"Exit {int(ExitCode.THRESHOLD)} if more than N components are degrading now (0: any).",
)
@db_option
@format_option("table", "json", "csv")
@handle_errors
def command(at, history_hours, fail_over, db, fmt) -> None:
    """Components degrading now, before they cost a checkpoint: error-counter rates rising, receive
    power sagging, FEC corrected codewords climbing, temperatures ramping, Xid and AER events, and the
    lemons already known. Each with explain's evidence, the jobs running on it, the GPU-hours at stake
    per hour and a recommended action.

    \b
    Exit codes: 0 done, 6 store without telemetry, 7 with --fail-over N: more than N components
    degrading. JSON schema: synestra.risks/1 (docs/fleet.md).

    \b
    Examples:
      synestra risks
      synestra risks --at 2026-11-02T03:58:00 --format json | jq '.risks[0]'
      synestra risks --history-hours 0 --fail-over 0 || page-oncall   # every 5 minutes, from cron
    """
    from synestra_cli.api.health import risks
    from synestra_cli.cli.render import dumps, render_rows

    report = risks(db, at=at, history_hours=history_hours)
    doc = report.to_json()
    if report.stale:
        click.echo(
            f"risks: warning: the store's latest data is from {iso(report.latest_data)}, "
            f"before {iso(report.at)}: ingest the latest exports first",
            err=True,
        )
    if fmt == "json":
        click.echo(dumps(doc))
    elif fmt == "csv":
        render_rows(_rows(doc), CSV_COLUMNS, "csv")
    else:
        _print(doc)
    if fail_over is not None and doc["degrading"] > fail_over:
        click.echo(f"risks: {plural(doc['degrading'], 'component')} degrading, more than {fail_over}", err=True)
        sys.exit(int(ExitCode.THRESHOLD))
