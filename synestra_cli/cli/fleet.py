"""`synestra fleet`: the components that cost jobs across the fleet, and the lemons (library:
synestra_cli.fleet.lemons)."""

from __future__ import annotations

import click

from synestra_cli.api.shared import iso, plural
from synestra_cli.cli.common import handle_errors
from synestra_cli.cli.options import TOP, db_option, format_option, window_options
from synestra_cli.cli.render import safe

CSV_COLUMNS = [
    "rank",
    "kind",
    "asset",
    "identity",
    "categories",
    "failures",
    "incidents",
    "gpu_hours",
    "jobs",
    "episodes",
    "first_seen",
    "last_seen",
    "lemon",
    "lemon_reasons",
]


def identity(asset: dict) -> str | None:
    """The name a technician acts on: the GPU's UUID, the NIC's far-end switch port, a rack's hosts."""
    if asset["kind"] == "gpu":
        return asset.get("uuid") or asset.get("pci_bus_id")
    if asset["kind"] == "nic":
        return asset.get("far_end")
    if asset["kind"] == "rack":
        n = len(asset.get("hosts") or [])
        return f"{n} host{'' if n == 1 else 's'}"
    if asset["kind"] == "filesystem":
        n = len(asset.get("clients") or [])
        return f"{n} client{'' if n == 1 else 's'} complained"
    return asset.get("rack")


def flat_rows(doc: dict) -> list[dict]:
    return [
        {
            "rank": i,
            "kind": c["asset"]["kind"],
            "asset": c["asset"]["id"],
            "identity": identity(c["asset"]),
            "categories": c["categories"],
            "failures": c["failures"],
            "incidents": c["incidents"],
            "gpu_hours": round(c["gpu_hours"], 3),
            "jobs": c["jobs"],
            "episodes": len(c["episodes"]),
            "first_seen": c["first_seen"],
            "last_seen": c["last_seen"],
            "lemon": c["lemon"],
            "lemon_reasons": "; ".join(c["lemon_reasons"]),
        }
        for i, c in enumerate(doc["components"], 1)
    ]


def _seen(c: dict) -> str:
    lo, hi = c["first_seen"], c["last_seen"]
    return f"{iso(lo, minutes=True)} +{(hi - lo).total_seconds() / 3600:.1f}h" if lo and hi else ""


# (header, justify, min width, max width): nothing is cut (`cooling.the…` or `leaf-01:Ethern…` names
# nothing): a long one wraps; on a narrow screen (80 columns) the identity, the incident and episode
# counts and the span give way (the lemons' lines below name each identity; CSV and JSON keep them all).
COLUMNS = (
    ("#", "right", 2, 3),
    ("component", "left", 18, 24),
    ("identity", "left", 12, 40),
    ("cause", "left", 12, 24),
    ("jobs", "right", 4, 4),
    ("fail", "right", 4, 4),
    ("inc", "right", 3, 3),
    ("GPU-h", "right", 6, 8),
    ("eps", "right", 3, 3),
    ("first seen, span", "left", 24, 24),
    ("", "left", 5, 5),
)
FOLDED = ("component", "identity", "cause")
SPAN_MIN_WIDTH = 140  # narrower than this, the table leaves out the first-seen span
NARROW_WIDTH = 120  # narrower than this, only the columns below
NARROW = ("#", "component", "cause", "jobs", "fail", "GPU-h", "")


def _print_table(out, doc: dict) -> None:
    """A compact table for a terminal: one line per component (CSV and JSON carry every field)."""
    from rich.table import Table

    table = Table(header_style="bold", box=None, pad_edge=False)
    wide, narrow = out.width >= SPAN_MIN_WIDTH, out.width < NARROW_WIDTH
    shown = [c for c in COLUMNS if (wide or c[0] != "first seen, span") and (not narrow or c[0] in NARROW)]
    for col, justify, lo, hi in shown:
        table.add_column(
            col,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=col not in FOLDED,
            overflow="fold" if col in FOLDED else "ellipsis",
            min_width=lo,
            max_width=hi,
        )
    for i, c in enumerate(doc["components"], 1):
        cats = c["categories"]
        cause = (cats[0] + (f" +{len(cats) - 1}" if len(cats) > 1 else "")) if cats else ""
        cells = {  # store text: as text, not markup (safe)
            "#": str(i),
            "component": safe(f"{c['asset']['kind']} {c['asset']['id']}"),
            "identity": safe(identity(c["asset"]) or ""),
            "cause": safe(cause),
            "jobs": str(len(c["jobs"])),
            "fail": str(c["failures"]),
            "inc": str(c["incidents"]),
            "GPU-h": f"{c['gpu_hours']:,.2f}",
            "eps": str(len(c["episodes"])),
            "first seen, span": _seen(c),
            "": "[bold red]LEMON[/]" if c["lemon"] else "",
        }
        table.add_row(*(cells[col[0]] for col in shown))
    out.print(table)


def _print_evidence(out, c: dict) -> None:
    ident = identity(c["asset"])
    out.print(
        "[bold red]lemon[/] "
        + safe(f"{c['asset']['kind']} {c['asset']['id']}{f' ({ident})' if ident else ''}: ")
        + safe("; ".join(c["lemon_reasons"]))
    )
    for h in c["hits"][:6]:
        at = iso(h["at"]) if h["at"] else "?"
        out.print(
            safe(
                f"    job {h['job']} attempt {h['attempt']}: {h['what']} <- {h['category']} "
                f"(first signal {at}, confidence {h['confidence']:.2f})"
            )
        )
    for e in c["episodes"][:4]:
        ev = e["evidence"][0] if e["evidence"] else None
        what = f"{ev['host']}:{ev['entity'] or ''} {ev['signal']}" if ev else ""
        span = f"{iso(e['start'], minutes=True)} .. {iso(e['end'], minutes=True)}"
        out.print(safe(f"    episode {span}: {plural(e['signals'], 'signal')}, {what}"))


EXCLUDE_FORMATS = ("slurm", "kubernetes", "hostlist")


def _exclude(db, since, until, fmt: str, exclude: bool, by: str) -> None:
    """fleet --exclude: the exclusion list in the format asked for (fleet/exclude.py)."""
    from synestra_cli.api.health import exclusions
    from synestra_cli.cli.render import console, dumps

    if fmt == "csv" or by != "component":
        raise click.UsageError("--exclude prints nodes: use --format slurm|kubernetes|hostlist|json|table, no --by")
    found = exclusions(db, since=since, until=until)
    if fmt == "json":
        click.echo(dumps(found.to_json()))
    elif fmt == "slurm":
        for line in found.slurm():
            click.echo(line)
        if found.nodes:
            click.echo(f"# sbatch/srun: --exclude={found.hostlist()}")
    elif fmt == "kubernetes":
        for line in found.kubernetes():
            click.echo(line)
    elif fmt == "hostlist":
        if found.nodes:
            click.echo(found.hostlist())
    else:
        out = console()
        out.print(f"[bold]exclude[/] {plural(len(found.nodes), 'node')} (commands: --format slurm or kubernetes)")
        for n in found.nodes:
            out.print(safe(f"  {n.name}: {n.reason}"), soft_wrap=True)


@click.command("fleet")
@window_options("what happened (default: all the store holds)")
@click.option(
    "--by",
    type=click.Choice(["component", "host", "rack"]),
    default="component",
    show_default=True,
    help="Rank components, or the hosts or racks that hold them (their parts summed).",
)
@click.option("--lemons", "only_lemons", is_flag=True, help="Only the lemons.")
@click.option("--top", type=TOP, help="Only the first N components.")
@click.option(
    "--exclude",
    is_flag=True,
    help="Print the nodes to keep out of the next job (lemons and parts degrading at the window's end) as "
    "commands to run by hand: --format slurm (scontrol drain lines, an --exclude= hostlist), kubernetes "
    "(kubectl cordon/taint/annotate), hostlist (these three imply --exclude), json, table.",
)
@db_option
@format_option("table", "json", "csv", "slurm", "kubernetes", "hostlist")
@handle_errors
def command(since, until, by, only_lemons, top, exclude, db, fmt) -> None:
    """Hosts, GPUs, NICs/links, racks and filesystems ranked by the GPU-hours, failures and incidents
    they cost across every job in the window, with the jobs they hit, when they were first and last
    seen, their identities (GPU UUID, far-end switch port), and the lemons: components that hurt two or
    more jobs, or reported errors in two or more separate episodes, with the evidence.

    \b
    Preemptions, routine saves, the job's own crashes, stragglers and OOMs are never a component's
    fault; one rack event is one incident however many jobs it hit.
    Exit codes: 0 done, 6 store without data. JSON schema: synestra.fleet/1 (docs/fleet.md).

    \b
    Examples:
      synestra fleet --since 2026-11-01 --lemons
      synestra fleet --by host --top 10          # which nodes to drain
      synestra fleet --format json | jq '.components[] | select(.lemon) | .asset'
      synestra fleet --exclude --format slurm       # scontrol drain lines; nothing is run
      synestra fleet --exclude --format kubernetes  # kubectl cordon / taint / annotate lines

    \b
    --exclude prints commands and never runs them; a preemption, a routine save or the job's own crash
    never puts a node on it. JSON schema: synestra.exclude/1 (docs/fleet.md).
    """
    from synestra_cli.api.health import fleet
    from synestra_cli.cli.render import console, dumps, render_rows

    if exclude or fmt in EXCLUDE_FORMATS:
        _exclude(db, since, until, fmt, exclude, by)
        return
    doc = fleet(db, since=since, until=until, by=by).to_json()
    if only_lemons:
        doc["components"] = [c for c in doc["components"] if c["lemon"]]
    if top:
        doc["components"] = doc["components"][:top]
    if fmt == "json":
        click.echo(dumps(doc))
        return
    rows = flat_rows(doc)
    if fmt == "csv":
        render_rows(rows, CSV_COLUMNS, "csv")
        return
    out = console()
    out.print(
        f"[bold]fleet[/] {iso(doc['since'], minutes=True)} .. {iso(doc['until'], minutes=True)}: "
        f"{plural(doc['jobs'], 'job')}, {plural(len(doc['components']), 'component')}, "
        f"{plural(sum(c['lemon'] for c in doc['components']), 'lemon')}"
        if doc["since"]
        else "[bold]fleet[/]"
    )
    _print_table(out, doc)
    for c in doc["components"]:
        if c["lemon"]:
            _print_evidence(out, c)
