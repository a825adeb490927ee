"""`explain --format markdown`: a ticket to paste into an issue tracker as it is.

Per non-routine checkpoint: a title line, the verdict, the action (with why and the rule's source),
the assets, the chain as a table (UTC time, offset to the checkpoint, layer, where, signal, file:line or
values), the alternatives with the evidence for each, and the cost (the save or restore itself and the
badput charged to the cause through it, as tax-report computes it). GitHub-flavoured Markdown tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from synestra_cli.explain.assets import describe
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.document import ExplainTaxDoc
from synestra_cli.explain.evidence import Cause
from synestra_cli.explain.explanation import CheckpointExplanation, JobExplanation
from synestra_cli.explain.restart_text import WORDS, loop_line, span, stage_times, stages_line
from synestra_cli.shown import iso, plural


def _cell(text: Any) -> str:
    return str(text if text is not None else "").replace("|", "\\|").replace("\n", " ").strip()


def _when(t: Any) -> str:
    if isinstance(t, str):
        t = datetime.fromisoformat(t.replace("Z", ""))
    return iso(t) if isinstance(t, datetime) else "?"


def _offset(t: datetime | None, ref: datetime | None) -> str:
    if t is None or ref is None:
        return ""
    s = round((t - ref).total_seconds())
    m, sec = divmod(abs(s), 60)
    h, m = divmod(m, 60)
    return ("-" if s < 0 else "+") + (f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s" if m else f"{sec}s")


def _where(c: Cause) -> str:
    return " ".join(dict.fromkeys(p for p in (c.host, c.component) if p)) or "no host named"


def _evidence(lk: ChainLink) -> str:
    ev = lk.evidence
    if ev.get("type") == "log" and ev.get("source"):
        return f"`{ev['source']}:{ev.get('line')}`"
    if ev.get("type") == "metric":
        w = ev.get("window") or {}
        span = f"{_when(w.get('start'))} .. {_when(w.get('end'))}" if w.get("start") else ""
        return _cell(f"`{ev.get('metric')}` {span}")
    if ev.get("type") == "scheduler":
        return _cell(f"sacct state {ev.get('state')}, exit {ev.get('exit_code')}")
    return ""


def _chain_table(links: list[ChainLink], ref: datetime | None) -> list[str]:
    rows = ["| time (UTC) | offset | layer | where | signal | evidence |", "| --- | --- | --- | --- | --- | --- |"]
    for lk in links:
        where = ":".join(p for p in (lk.host, lk.entity) if p)
        rows.append(
            f"| {_when(lk.time)} | {_offset(lk.time, ref)} | {lk.layer} | {_cell(where)} | "
            f"{_cell(lk.signal)} | {_evidence(lk)} |"
        )
    return rows


def _action(c: Cause) -> list[str]:
    if not c.action:
        return []
    return [
        f"**Action:** {c.action['text']}",
        "",
        f"*Why:* {c.action['why']}",
        "",
        f"*Rule source:* {c.action['source']}",
        "",
    ]


def _alternatives(alts: list[Cause], ref: datetime | None) -> list[str]:
    if not alts:
        return ["No alternative scored above the evidence threshold.", ""]
    out: list[str] = []
    for a in alts:
        out.append(
            f"- **{a.category}** {_where(a)}, confidence {a.confidence:.2f}"
            + (f"; if so: {a.action['text']}" if a.action else "")
        )
        for lk in a.evidence:
            where = ":".join(p for p in (lk.host, lk.entity) if p)
            ev = _evidence(lk)
            out.append(
                f"  - {_when(lk.time)} ({_offset(lk.time, ref)}) {lk.layer} {where} {lk.signal}"
                + (f", {ev}" if ev else "")
            )
    return [*out, ""]


def _cost(cp: CheckpointExplanation) -> list[str]:
    own = (
        f"this {cp.kind} blocked the job {cp.duration_s:.1f} s"
        if cp.duration_s is not None
        else f"this {cp.kind}'s duration was not logged"
    )
    if cp.precision == "bounded" and cp.duration_s is not None:
        own = (
            f"this {cp.kind} blocked the job at most {cp.duration_s:.1f} s (its lines carry no time: it is dated "
            "only by the lines around it)"
        )
    if not cp.tax:
        return [
            f"- {own}",
            "- badput: run `synestra explain --job ID --format markdown` on the whole job, or "
            "`synestra tax-report`, when attempt times are in the store",
            "",
        ]
    parts = ", ".join(f"{b} {s:,.0f} s" for b, s in sorted(cp.tax["buckets_s"].items(), key=lambda kv: -kv[1]))
    return [
        f"- {own}",
        f"- charged to this cause here: {parts or 'nothing'} = **{cp.tax['gpu_hours']:,.2f} GPU-h**",
        "",
    ]


def _restart_stages(job: JobExplanation, cp: CheckpointExplanation, h: str) -> list[str]:
    """The restart a restore ended, stage by stage: when each stage began and how long it lasted."""
    r = next((r for r in job.restarts if cp.kind == "restore" and r["attempt"] == cp.attempt), None)
    if r is None:
        return []
    rows = ["| stage | time (UTC) | after the stage before |", "| --- | --- | --- |"]
    prev = None
    for name, t in stage_times(r):
        after = span((t - prev).total_seconds()) if t is not None and prev is not None else ""
        rows.append(f"| {WORDS[name]} | {_when(t) if t else 'not dated'} | {after} |")
        prev = t or prev
    return [f"{h}# Restart", "", _cell(stages_line(r)) + ".", "", *rows, ""]


def _title(job: JobExplanation, cp: CheckpointExplanation) -> str:
    c = cp.cause
    what = f"{c.category} on {_where(c)}" if c else "routine"
    return f"Job {job.job}: {what} behind the {cp.trigger} {cp.kind} at iteration {cp.iteration}"


def checkpoint_markdown(job: JobExplanation, cp: CheckpointExplanation, level: int = 1) -> list[str]:
    h = "#" * level
    c = cp.cause
    out = [f"{h} {_title(job, cp)}", ""]
    when = _when(cp.start) if cp.start else "time not logged"
    verdict = (
        (
            f"`{c.category}` on **{_where(c)}**, confidence {c.confidence:.2f}, first signal "
            f"{_when(c.first_signal) if c.first_signal else 'unknown'}"
        )
        if c
        else "routine: no cause"
    )
    healthy = " The link never reported itself down." if c and c.reported_healthy else ""
    out += [
        f"**Verdict:** {verdict}.{healthy} The {cp.kind} at iteration {cp.iteration} ({when}, attempt "
        f"{cp.attempt}) was a **{cp.trigger}** {cp.kind}{' (slow)' if cp.slow else ''}.",
        "",
    ]
    if c:
        out += _action(c)
        out += [f"{h}# Assets", "", *(f"- {describe(a)}" for a in c.assets), ""] if c.assets else []
    out += _restart_stages(job, cp, h)
    out += [f"{h}# Chain", "", *_chain_table(cp.chain, cp.start), ""]
    out += [f"{h}# Alternatives", "", *_alternatives(cp.alternatives, cp.start)]
    out += [f"{h}# Cost", "", *_cost(cp)]
    return out


def _job_tax(tax: ExplainTaxDoc | None) -> list[str]:
    if not tax:
        return []
    return [
        "## Job tax",
        "",
        f"Checkpoint tax {tax['checkpoint_tax']:.1%}, hidden tax {tax['hidden_tax']:.1%}, "
        f"goodput {tax['goodput']:.1%} of {tax['gpu_hours']:,.1f} GPU-h ({tax['gpus']} GPUs).",
        "",
        *(
            f"- {c['category']} {' '.join(p for p in (c['host'], c['component']) if p)}: {c['gpu_hours']:,.2f} GPU-h"
            for c in tax["by_cause"]
        ),
        "",
        *(
            [f"**Save cadence:** {action['text']} ({action['why']})", ""]
            if (action := tax.get("cadence_action"))
            else []
        ),
    ]


def job_markdown(job: JobExplanation, checkpoints: list[CheckpointExplanation] | None = None) -> str:
    """The ticket: one checkpoint alone (title level 1), or the job's non-routine checkpoints under
    one title, with the routine ones counted."""
    chosen = checkpoints if checkpoints is not None else job.checkpoints
    shown = [cp for cp in chosen if not cp.routine] or (chosen if checkpoints is not None else [])
    if len(shown) == 1 and checkpoints is not None:
        return "\n".join(checkpoint_markdown(job, shown[0], 1)).rstrip() + "\n"
    causes = ", ".join(f"{cp.cause.category} {_where(cp.cause)}" for cp in shown if cp.cause) or "none"
    routine = sum(cp.routine for cp in chosen)
    out = [
        f"# Job {job.job}: {plural(len(shown), 'non-routine checkpoint')}: {causes}",
        "",
        f"{plural(len(job.hosts), 'host')} ({', '.join(job.hosts)}), {plural(job.attempts, 'attempt')}, "
        f"{plural(routine, 'routine checkpoint')}"
        + (f", saves every {job.cadence} iterations." if job.cadence else "."),
        "",
    ]
    out += [*(f"**{_cell(loop_line(lp))}**" for lp in job.restart_loops), ""] if job.restart_loops else []
    for cp in shown:
        out += checkpoint_markdown(job, cp, 2)
    out += _job_tax(job.tax)
    return "\n".join(out).rstrip() + "\n"
