"""The timeline as a Vega-Lite chart (altair), written offline by vl-convert: HTML with the Vega
libraries inlined (no network needed to view it), SVG or PNG.

Top to bottom, on one shared time axis: one lane per attempt coloured by its final state, with its
checkpoints as ticks (routine ones grey, the others coloured by trigger), degradation windows shaded,
each cause's first signal as a labelled rule; the step time; then each cause's key signals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import pandas as pd

from synestra_cli.explain.api import CheckpointExplanation
from synestra_cli.explain.reason import Cause
from synestra_cli.explain.timeline import Timeline

WIDTH = 900
TICKS = ["routine", "reactive", "restart", "preemption", "slow save", "other"]
TICK_COLOURS = ["#616161", "#ef6c00", "#c62828", "#6a1b9a", "#1565c0", "#6d4c41"]
STATES = ["COMPLETED", "FAILED", "PREEMPTED", "NODE_FAIL", "TIMEOUT", "CANCELLED", "RUNNING", "?"]
STATE_COLOURS = ["#c8e6c9", "#ffcdd2", "#e1bee7", "#ffcdd2", "#fff9c4", "#eeeeee", "#bbdefb", "#eeeeee"]
DENSE = 200  # a series with more points than this is drawn as a line without point marks


def _named(c: Cause | None) -> str:
    return " ".join(p for p in (c.category, c.host, c.component) if p) if c else ""


def _tick(cp: CheckpointExplanation) -> str:
    if cp.routine:
        return "routine"
    if cp.trigger in TICKS:
        return str(cp.trigger)
    return "slow save" if cp.slow else "other"


def _present(domain: list[str], colours: list[str], values: pd.Series) -> alt.Scale:
    """A fixed colour per value, the legend listing only the values present (unknown ones last, grey)."""
    seen = set(values)
    pairs = [(d, c) for d, c in zip(domain, colours, strict=True) if d in seen]
    pairs += [(v, "#bdbdbd") for v in sorted(seen - set(domain))]
    return alt.Scale(domain=[d for d, _ in pairs], range=[c for _, c in pairs])


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def _x(title: str | None = None) -> alt.X:
    return alt.X("start:T", title=title, axis=alt.Axis(format="%H:%M", labelAngle=0))


def _overlays(tl: Timeline, height: int) -> list[alt.Chart]:
    """Degradation windows shaded and each cause's first signal as a rule, for every strip."""
    win = _frame(tl.windows, ["attempt", "start", "end", "factor"])
    causes = _frame([{"start": c["first_signal"], "label": c["label"]} for c in tl.causes], ["start", "label"])
    shade = (
        alt.Chart(win)
        .mark_rect(color="#fff3e0", opacity=0.9)
        .encode(x="start:T", x2="end:T", tooltip=["start:T", "end:T", alt.Tooltip("factor:Q", title="step time x")])
    )
    rule = (
        alt.Chart(causes)
        .mark_rule(color="#b71c1c", strokeDash=[4, 3], strokeWidth=1.5)
        .encode(x="start:T", tooltip=["label:N", "start:T"])
    )
    return [shade.properties(width=WIDTH, height=height), rule.properties(width=WIDTH, height=height)]


def _lanes(tl: Timeline) -> Any:
    att = _frame(
        [{**a, "lane": f"attempt {a['attempt']} {a['state']}"} for a in tl.attempts],
        ["attempt", "start", "end", "state", "lane"],
    )
    lane_of = dict(zip(att["attempt"], att["lane"], strict=True))
    first = att["lane"].iloc[0] if len(att) else "attempt 1"
    cps = _frame(
        [
            {
                "start": cp.start,
                "lane": lane_of.get(cp.attempt, first),
                "iteration": cp.iteration,
                "kind": cp.kind,
                "trigger": cp.trigger,
                "tick": _tick(cp),
                "cause": _named(cp.cause),
            }
            for cp in tl.job.checkpoints
            if cp.start
        ],
        ["start", "lane", "iteration", "kind", "trigger", "tick", "cause"],
    )
    y = alt.Y("lane:N", title=None, sort=list(att["lane"]))
    bars = (
        alt.Chart(att)
        .mark_bar(height=22, cornerRadius=3)
        .encode(
            x=_x(),
            x2="end:T",
            y=y,
            color=alt.Color(
                "state:N",
                scale=_present(STATES, STATE_COLOURS, att["state"]),
                legend=alt.Legend(title="attempt state", orient="top"),
            ),
            tooltip=["lane:N", "start:T", "end:T"],
        )
    )
    ticks = (
        alt.Chart(cps)
        .mark_tick(thickness=2, size=30)
        .encode(
            x="start:T",
            y=y,
            color=alt.Color(
                "tick:N",
                scale=_present(TICKS, TICK_COLOURS, cps["tick"]),
                legend=alt.Legend(title="checkpoint", orient="top"),
            ),
            tooltip=["kind:N", "iteration:Q", "trigger:N", "start:T", "cause:N"],
        )
    )
    height = max(60, 40 * len(att))
    layers = [*_overlays(tl, height), bars.properties(width=WIDTH, height=height), ticks]
    return (
        alt.layer(*layers)
        .resolve_scale(color="independent")
        .properties(title=f"job {tl.job.job}: attempts and checkpoints (UTC)")
    )


def _causes(tl: Timeline) -> Any:
    """One row per cause: a mark at each of its signals, the first one larger and labelled."""
    sig = _frame(
        [{"start": t, "cause": c["label"], "signal": what} for c in tl.causes for t, what in c["signals"]],
        ["start", "cause", "signal"],
    )
    first = _frame(
        [
            {
                "start": c["first_signal"],
                "cause": c["label"],
                "text": f"{c['label']}: {c['first_text']}",
                "action": c["action"],
            }
            for c in tl.causes
        ],
        ["start", "cause", "text", "action"],
    )
    y = alt.Y("cause:N", title=None, axis=None, sort=[c["label"] for c in tl.causes])
    dots = (
        alt.Chart(sig)
        .mark_point(color="#b71c1c", size=30, opacity=0.6)
        .encode(x=_x(), y=y, tooltip=["cause:N", "signal:N", "start:T"])
    )
    big = (
        alt.Chart(first)
        .mark_point(shape="diamond", filled=True, color="#b71c1c", size=140)
        .encode(x="start:T", y=y, tooltip=["text:N", "start:T", "action:N"])
    )
    text = (
        alt.Chart(first)
        .mark_text(align="left", dx=9, color="#b71c1c", fontWeight="bold", fontSize=11)
        .encode(x="start:T", y=y, text="text:N")
    )
    height = max(30, 26 * len(tl.causes))
    return alt.layer(*_overlays(tl, height), dots.properties(width=WIDTH, height=height), big, text).properties(
        title="causes: first signal and the signals of its chain"
    )


def _restarts(tl: Timeline) -> Any:
    """One row per restart, its phases as bars between the stages the logs date (explain/restart_text.py)."""
    df = _frame(tl.restarts, ["restart", "phase", "start", "end"])
    rows = list(dict.fromkeys(df["restart"]))
    bars = (
        alt.Chart(df)
        .mark_bar(height=16)
        .encode(
            x=_x(),
            x2="end:T",
            y=alt.Y("restart:N", title=None, sort=rows),
            color=alt.Color("phase:N", legend=alt.Legend(title="restart phase", orient="top")),
            tooltip=["restart:N", "phase:N", "start:T", "end:T"],
        )
    )
    height = max(30, 24 * len(rows))
    return alt.layer(*_overlays(tl, height), bars.properties(width=WIDTH, height=height)).properties(
        title="restarts in stages: detection, stopping, requeue, start-up, load, warm-up"
    )


def _strip(df: pd.DataFrame, field: str, title: str, tl: Timeline, colour: str) -> Any:
    points = alt.OverlayMarkDef(size=8) if len(df) <= DENSE else False
    line = (
        alt.Chart(df)
        .mark_line(color=colour, strokeWidth=1.2, point=points)
        .encode(
            x=_x(),
            y=alt.Y(f"{field}:Q", title=None, scale=alt.Scale(zero=False)),
            detail="attempt:N",
            tooltip=["start:T", alt.Tooltip(f"{field}:Q", format=".3g")],
        )
    )
    return alt.layer(*_overlays(tl, 90), line.properties(width=WIDTH, height=90)).properties(title=title)


def chart(tl: Timeline) -> Any:
    steps = pd.DataFrame(
        [{"start": s["ts"], "step_time_s": s["step_time_s"], "attempt": s["attempt"]} for s in tl.steps],
        columns=["start", "step_time_s", "attempt"],
    )
    strips = [_causes(tl)] if tl.causes else []
    strips += [_lanes(tl)] + ([_restarts(tl)] if tl.restarts else [])
    strips += [_strip(steps, "step_time_s", "step time (s)", tl, "#1565c0")]
    for s in tl.series:
        df = pd.DataFrame([{"start": t, "y": v, "attempt": 0} for t, v in s.points], columns=["start", "y", "attempt"])
        strips.append(_strip(df, "y", f"{s.label}  [{s.cause}]", tl, "#2e7d32"))
    out = alt.vconcat(*strips, spacing=14).resolve_scale(x="shared", color="independent")
    return out.configure_view(stroke="#eeeeee").configure_axis(grid=True, gridColor="#f3f3f3")


def write(tl: Timeline, path: Path, fmt: str | None = None) -> str:
    """HTML (self-contained), SVG or PNG: fmt, else by the file's suffix; returns the format written."""
    suffix = path.suffix.lower()
    fmt = fmt or {".png": "png", ".svg": "svg", ".html": "html", ".htm": "html"}.get(suffix, "html")
    c = chart(tl)
    if fmt == "html":
        c.save(str(path), format="html", inline=True)
    elif fmt == "png":
        c.save(str(path), format="png", scale_factor=2)
    else:
        c.save(str(path), format="svg")
    return fmt
