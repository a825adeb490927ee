"""The human view of `synestra explain`: a rich tree per job, checkpoint -> cause -> chain.

Times in the chain are relative to the checkpoint (`-4m10s`), layers are coloured, and runs of
routine checkpoints fold into one line each.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text
from rich.tree import Tree

from synestra_cli.api.shared import iso, plural, relative_in
from synestra_cli.api.words import (
    Cause,
    ChainLink,
    CheckpointExplanation,
    CheckpointTaxDoc,
    ExplainTaxDoc,
    FailureExplanation,
    JobExplanation,
    RestartDoc,
    describe,
    loop_line,
    stages_line,
)
from synestra_cli.cli.render import printable

MAX_SIGNALS = 6  # cause-side chain links shown per checkpoint in the table view
SIGNAL_LAYERS = ("physical", "link", "traffic", "gpu")

LAYER_STYLE = {
    "physical": "red",
    "link": "magenta",
    "traffic": "yellow",
    "gpu": "green",
    "collective": "cyan",
    "throughput": "blue",
    "job": "bright_white",
    "checkpoint": "bold",
}


def _text(s: str, style: str = "") -> Text:
    """Text from the store (host names, log signals, file names): escape sequences shown, not obeyed;
    paths under the working directory relative to it."""
    return Text(printable(relative_in(s)), style=style)


def _add(text: Text, s: str, style: str = "") -> None:
    text.append(printable(relative_in(s)), style=style)


def _rel(t: datetime | None, ref: datetime | None) -> str:
    if t is None or ref is None:
        return "?"
    s = round((t - ref).total_seconds())
    sign = "-" if s < 0 else "+"
    m, sec = divmod(abs(s), 60)
    h, m = divmod(m, 60)
    return sign + (f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s")


def _num(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _evidence(lk: ChainLink) -> str:
    ev = lk.evidence
    if ev.get("type") == "metric" and lk.layer != "throughput":
        return ""  # the signal's words carry its values
    if ev.get("type") == "metric":
        unit = "/s" if ev.get("unit") == "per_second" else (" s" if ev.get("unit") == "s" else "")
        return f"{_num(ev['before'])} -> {_num(ev['after'])}{unit}"
    if ev.get("type") == "log" and ev.get("source"):
        return f"{ev['source']}:{ev.get('line')}"
    if ev.get("type") == "scheduler":
        return f"exit {ev.get('exit_code')}"
    return ""


def _link(lk: ChainLink, ref: datetime | None) -> Text:
    where = ":".join(p for p in (lk.host, lk.entity) if p)
    text = _text(f"{_rel(lk.time, ref):>8}  ")
    _add(text, f"{lk.layer:<10}", style=LAYER_STYLE.get(lk.layer, ""))
    _add(text, f" {where + '  ' if where else ''}{lk.signal}")
    evidence = _evidence(lk)
    if evidence:
        _add(text, f"  {evidence}", style="dim")
    return text


def _cause(c: Cause, prefix: str = "cause") -> Text:
    text = _text(f"{prefix}: ")
    _add(text, c.category, style="bold red" if prefix == "cause" else "")
    where = " ".join(dict.fromkeys(p for p in (c.host, c.component) if p))
    _add(text, f"  {where}" if where else "  (no host named)")
    _add(text, f"  confidence {c.confidence:.2f}", style="dim")
    if c.reported_healthy:
        _add(text, "  (link reported healthy: never went down)", style="yellow")
    return text


def _charged(tax: CheckpointTaxDoc) -> Text:
    parts = ", ".join(f"{b} {s:,.0f} s" for b, s in sorted(tax["buckets_s"].items(), key=lambda kv: -kv[1]))
    return _text(f"tax charged to this cause here: {parts}  = {tax['gpu_hours']:,.2f} GPU-h", style="yellow")


def _checkpoint(node: Tree, cp: CheckpointExplanation, restart: RestartDoc | None = None) -> None:
    when = iso(cp.start) if cp.start else "time not logged"
    dur = f"{cp.duration_s:.1f} s" if cp.duration_s is not None else "? s"
    if cp.precision == "bounded" and cp.duration_s is not None:  # its lines carry no time: a bound, not a measure
        dur = f"at most {dur} (not dated)"
    elif cp.precision == "inferred" and cp.duration_s is not None:  # its neighbours' times
        dur = f"{dur} (not dated)"
    head = _text(f"{cp.kind} @ iteration {cp.iteration}  {when}  {dur}  ")
    _add(head, cp.trigger.upper() + (" (slow)" if cp.slow else ""), style="bold")
    branch = node.add(head)
    if restart is not None:
        branch.add(_text(stages_line(restart), style="cyan"))
    if cp.cause:
        branch.add(_cause(cp.cause))
        _runbook(branch, cp.cause)
    if cp.tax and cp.tax["seconds"] > 0:
        branch.add(_charged(cp.tax))
    _chain(branch, cp)
    for alt in cp.alternatives:
        node = branch.add(_cause(alt, "alternative"))
        if alt.action:
            node.add(_text(f"if so: {alt.action['text']}", style="dim"))


MAX_ASSETS = 3  # assets shown in the table view (a hot rack lists its hot GPUs: JSON has them all)


def _runbook(branch: Tree, c: Cause) -> None:
    """The action first (what to do), then what it is done to."""
    if c.action:
        branch.add(_text(f"action: {c.action['text']}", style="bold green"))
        branch.add(_text(f"  why: {c.action['why']}", style="dim"))
    shown = list(c.assets[:MAX_ASSETS])
    for a in shown:
        branch.add(_text(f"asset: {describe(a)}"))
    if len(c.assets) > len(shown):
        branch.add(
            _text(f"      ... {_more(len(c.assets) - len(shown), 'asset')}: --format json lists them all", style="dim")
        )


def _failure(node: Tree, f: FailureExplanation) -> None:
    when = iso(f.at) if f.at else "time not known"
    how = " ".join(p for p in (f.state, f.exit_code) if p)
    head = _text(f"attempt {f.attempt} failed  {when}  {how + '  ' if how else ''}")
    _add(head, "FAILURE (no restore after it)", style="bold")
    branch = node.add(head)
    if f.cause:
        branch.add(_cause(f.cause))
    _chain(branch, f)
    for alt in f.alternatives:
        branch.add(_cause(alt, "alternative"))


def _chain(branch: Tree, cp: CheckpointExplanation | FailureExplanation) -> None:
    """A rack-wide fault has dozens of signals: show the first few, every effect, and count the rest
    (the JSON keeps them all)."""
    hidden = 0
    signals = 0
    for lk in cp.chain:
        if lk.layer in SIGNAL_LAYERS:
            signals += 1
            if signals > MAX_SIGNALS:
                hidden += 1
                continue
        if lk.layer == "checkpoint" and hidden:
            branch.add(_text(f"      ... {_more(hidden, 'signal')}: --format json lists them all", style="dim"))
        branch.add(_link(lk, cp.start if isinstance(cp, CheckpointExplanation) else cp.at))


def _folded(node: Tree, run: list[CheckpointExplanation]) -> None:
    kinds: dict[str, int] = {}
    for cp in run:
        kinds[cp.trigger] = kinds.get(cp.trigger, 0) + 1
    its = ", ".join(str(cp.iteration) for cp in run[:6]) + (" ..." if len(run) > 6 else "")
    summary = ", ".join(f"{k} {n}" for k, n in kinds.items())
    node.add(_text(f"{plural(len(run), 'routine checkpoint')} ({summary}): iterations {its}", style="dim"))


def _more(n: int, word: str) -> str:
    """`1 more signal`, `2 more signals`."""
    return f"{n} more {word if n == 1 else word + 's'}"


def _take_restart(pending: list[RestartDoc], cp: CheckpointExplanation) -> RestartDoc | None:
    """The restart a restore ended (its attempt's first), taken from those still to show."""
    if cp.kind != "restore":
        return None
    found = next((r for r in pending if r["attempt"] == cp.attempt), None)
    if found is not None:
        pending.remove(found)
    return found


def render_job(console: Console, job: JobExplanation) -> None:
    cadence = f"saves every {job.cadence} iterations" if job.cadence else "no save cadence learned"
    head = f"job {job.job}  {plural(len(job.hosts), 'host')}  {plural(job.attempts, 'attempt')}  {cadence}"
    tree = Tree(_text(head, style="bold"))
    for loop in job.restart_loops:
        tree.add(_text(loop_line(loop), style="bold magenta"))
    pending = list(job.restarts)  # each restart shown under its restore, or on its own after the checkpoints
    run: list[CheckpointExplanation] = []
    for cp in job.checkpoints:
        if cp.routine:
            run.append(cp)
            continue
        if run:
            _folded(tree, run)
            run = []
        _checkpoint(tree, cp, _take_restart(pending, cp))
    if run:
        _folded(tree, run)
    for r in pending:
        tree.add(_text(stages_line(r), style="cyan"))
    for f in job.failures:
        _failure(tree, f)
    if not job.checkpoints:
        tree.add(_text("no checkpoints logged for this job", style="dim"))
    if job.tax:
        _tax_summary(tree, job.tax)
    console.print(tree)


def _tax_summary(tree: Tree, tax: ExplainTaxDoc) -> None:
    node = tree.add(
        _text(
            f"tax: checkpoint {tax['checkpoint_tax']:.1%}  hidden {tax['hidden_tax']:.1%}  goodput "
            f"{tax['goodput']:.1%}  of {tax['gpu_hours']:,.1f} GPU-h ({tax['gpus']} GPUs)",
            style="bold",
        )
    )
    shown = [f"{b} {s:,.0f} s" for b, s in tax["buckets_s"].items() if s > 0]
    node.add(_text("buckets: " + ", ".join(shown), style="dim"))
    if action := tax.get("cadence_action"):
        node.add(_text(f"action: {action['text']}", style="bold green"))
    for c in tax["by_cause"]:
        where = " ".join(p for p in (c["host"], c["component"]) if p)
        node.add(_text(f"{c['category']} {where}: {c['seconds']:,.0f} s = {c['gpu_hours']:,.2f} GPU-h"))
