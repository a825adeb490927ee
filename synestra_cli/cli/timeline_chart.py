"""The timeline as a Vega-Lite chart (altair), written offline by vl-convert: HTML with the Vega
libraries inlined (no network needed to view it, and as wide as the window), SVG or PNG (WIDTH).

A picture that stands alone in a ticket: a title and a headline (the job, the verdict, the action, the
tax), then on one shared time axis: where the time went (every tax bucket as a coloured span, with its
legend), the causes' events as marks (an Xid, a link down, a watchdog timeout) and each cause's first
signal labelled, one lane per attempt coloured by its final state with its checkpoints as ticks, the
step time, then each cause's key signals. Degradation windows are shaded and each cause's first signal
is a dashed rule in every strip; both are in the legend.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from synestra_cli.api.words import Cause, CheckpointExplanation, Timeline

WIDTH = 1400  # PNG and SVG; the HTML page fills the window ("container")
HEADLINE_COLOUR = "#b71c1c"
BAND_COLOURS = {  # explain/timeline_bands.py BUCKETS, in legend order
    "save": "#1e88e5",
    "restore": "#8e24aa",
    "start-up": "#fdd835",
    "lost work": "#e53935",
    "hang": "#6d4c41",
    "requeue": "#00897b",
    "degraded": "#fb8c00",
}
# A restart's phases (explain/restart_text.py PHASES): those that are a tax bucket too in its colour
# (requeue, start-up, load as restore); detection, stopping and warm-up in their own.
PHASE_COLOURS = {
    "detection": "#3949ab",
    "stopping": "#78909c",
    "restart in place": "#00897b",
    "requeue": "#00897b",
    "start-up": "#fdd835",
    "load": "#8e24aa",
    "warm-up": "#26c6da",
}
RULE_LEGEND = "first signal of a cause"
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


def _overlays(tl: Timeline, height: int, width: Any, legend: bool = False) -> list[alt.Chart]:
    """Degradation windows shaded and each cause's first signal as a dashed rule, for every strip (the
    rule's legend once, in the strip that asks for it)."""
    win = _frame(tl.windows, ["attempt", "start", "end", "factor"])
    causes = _frame(
        [{"start": c["first_signal"], "label": c["label"], "what": RULE_LEGEND} for c in tl.causes],
        ["start", "label", "what"],
    )
    shade = (
        alt.Chart(win)
        .mark_rect(color="#fff3e0", opacity=0.9)
        .encode(x="start:T", x2="end:T", tooltip=["start:T", "end:T", alt.Tooltip("factor:Q", title="step time x")])
    )
    colour = alt.Color(
        "what:N",
        scale=alt.Scale(domain=[RULE_LEGEND], range=[HEADLINE_COLOUR]),
        legend=alt.Legend(title=None, orient="top", symbolType="stroke", symbolDash=[4, 3]) if legend else None,
    )
    rule = (
        alt.Chart(causes)
        .mark_rule(strokeDash=[4, 3], strokeWidth=1.5)
        .encode(x="start:T", color=colour, tooltip=["label:N", "start:T"])
    )
    return [shade.properties(width=width, height=height), rule.properties(width=width, height=height)]


def _lanes(tl: Timeline, width: Any) -> Any:
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
    layers = [*_overlays(tl, height, width), bars.properties(width=width, height=height), ticks]
    return (
        alt.layer(*layers)
        .resolve_scale(color="independent")
        .properties(title=f"job {tl.job.job}: attempts and checkpoints (UTC)")
    )


def _span_bars(df: pd.DataFrame, row: str, rows: list[str], colour: str, colours: dict[str, str], legend: str,
               tooltip: list[Any]) -> Any:  # fmt: skip
    """Spans as bars on the time axis, one row per `row` value in `rows` order, coloured by `colour` from
    `colours` (the picture's fixed colours, whatever the job holds), with their legend."""
    return (
        alt.Chart(df)
        .mark_bar(height=16)
        .encode(
            x=_x(),
            x2="end:T",
            y=alt.Y(f"{row}:N", title=None, sort=rows),
            color=alt.Color(
                f"{colour}:N",
                scale=alt.Scale(domain=list(colours), range=list(colours.values())),
                legend=alt.Legend(title=legend, orient="top"),
            ),
            tooltip=tooltip,
        )
    )


def _with_overlays(tl: Timeline, bars: Any, height: int, width: Any, title: str, legend: bool = False) -> Any:
    """Bars under the job's degraded windows and causes' first signals, their colours resolved apart."""
    layers = [*_overlays(tl, height, width, legend=legend), bars.properties(width=width, height=height)]
    return alt.layer(*layers).resolve_scale(color="independent").properties(title=title)


def _bands(tl: Timeline, width: Any) -> Any:
    """Where the time went: one row per tax bucket present, each span a coloured bar, with its legend."""
    rows = [{**b, "hours": (b["end"] - b["start"]).total_seconds() / 3600} for b in tl.bands]
    df = _frame(rows, ["bucket", "start", "end", "attempt", "hours"])
    order = [b for b in BAND_COLOURS if b in set(df["bucket"])]
    tooltip = ["bucket:N", "attempt:N", "start:T", "end:T", alt.Tooltip("hours:Q", format=".2f")]
    bars = _span_bars(df, "bucket", order, "bucket", BAND_COLOURS, "where the time went (tax buckets)", tooltip)
    return _with_overlays(tl, bars, max(40, 22 * len(order)), width, "where the time went", legend=True)


def _events(tl: Timeline, width: Any) -> Any:
    """The causes' events as marks on a row per layer, and each cause's first signal labelled."""
    ev = _frame(
        [{"start": e["time"], "layer": e["layer"], "event": f"{e['where']} {e['signal']}".strip()} for e in tl.events],
        ["start", "layer", "event"],
    )
    first = _frame(  # one text row per cause above the marks: two causes minutes apart do not overprint
        [
            {
                "start": c["first_signal"],
                "text": f"{c['label']}: {c['first_text']}",
                "action": c["action"],
                "dy": 10 + 15 * i,
            }
            for i, c in enumerate(tl.causes)
        ],
        ["start", "text", "action", "dy"],
    )
    layers = sorted(set(ev["layer"])) or ["gpu"]
    label_rows = 15 * len(tl.causes) + 10
    height = max(60, 28 * len(layers) + label_rows)
    # the marks below the causes' labels: the strip's top rows are left to the text
    y = alt.Y("layer:N", title=None, sort=layers, scale=alt.Scale(range=[label_rows + 12, height - 8]))
    marks = (
        alt.Chart(ev)
        .mark_point(filled=True, size=90, opacity=0.85)
        .encode(
            x=_x(),
            y=y,
            shape=alt.Shape("layer:N", legend=alt.Legend(title="event", orient="top")),
            color=alt.value(HEADLINE_COLOUR),
            tooltip=["event:N", "start:T"],
        )
    )
    text = (
        alt.Chart(first)
        .mark_text(align="left", dx=6, color=HEADLINE_COLOUR, fontWeight="bold", fontSize=11)
        .encode(x="start:T", y=alt.Y("dy:Q", scale=None, axis=None), text="text:N", tooltip=["text:N", "action:N"])
    )
    return alt.layer(*_overlays(tl, height, width), marks.properties(width=width, height=height), text).properties(
        title="events: what the logs and counters say happened, and each cause's first signal"
    )


def _restarts(tl: Timeline, width: Any) -> Any:
    """One row per restart, its phases as bars between the stages the logs date (explain/restart_text.py)."""
    df = _frame(tl.restarts, ["restart", "phase", "start", "end"])
    rows = list(dict.fromkeys(df["restart"]))
    tooltip = ["restart:N", "phase:N", "start:T", "end:T"]
    bars = _span_bars(df, "restart", rows, "phase", PHASE_COLOURS, "restart phase", tooltip)
    title = "restarts in stages: detection, stopping, requeue, start-up, load, warm-up"
    return _with_overlays(tl, bars, max(30, 24 * len(rows)), width, title)


def _strip(df: pd.DataFrame, field: str, title: str, tl: Timeline, colour: str, width: Any) -> Any:
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
    return alt.layer(*_overlays(tl, 90, width), line.properties(width=width, height=90)).properties(title=title)


def chart(tl: Timeline, width: Any = WIDTH) -> Any:
    """The whole picture; `width`: pixels, or "container" (an HTML page as wide as its window)."""
    steps = pd.DataFrame(
        [{"start": s["ts"], "step_time_s": s["step_time_s"], "attempt": s["attempt"]} for s in tl.steps],
        columns=["start", "step_time_s", "attempt"],
    )
    strips = [_bands(tl, width)] if tl.bands else []
    strips += [_events(tl, width)] if tl.events or tl.causes else []
    strips += [_lanes(tl, width)] + ([_restarts(tl, width)] if tl.restarts else [])
    strips += [_strip(steps, "step_time_s", "step time (s)", tl, "#1565c0", width)]
    for s in tl.series:
        df = pd.DataFrame([{"start": t, "y": v, "attempt": 0} for t, v in s.points], columns=["start", "y", "attempt"])
        strips.append(_strip(df, "y", f"{s.label}  [{s.cause}]", tl, "#2e7d32", width))
    h = tl.headline
    title = alt.TitleParams(
        text=h.get("title", f"Job {tl.job.job}"),
        subtitle=[x for x in (h.get("verdict"), h.get("action"), h.get("tax")) if x] + ["times in UTC"],
        anchor="start",
        fontSize=20,
        color=HEADLINE_COLOUR,
        subtitleFontSize=14,
        subtitleColor="#212121",
        offset=12,
    )
    out = alt.vconcat(*strips, spacing=16, title=title).resolve_scale(
        x="shared", color="independent", shape="independent"
    )
    if width == "container":
        out = out.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    return out.configure_view(stroke="#eeeeee").configure_axis(grid=True, gridColor="#f3f3f3")


# The HTML page: the chart's container as wide as the window (Vega sizes "container" views from it).
FULL_WIDTH_CSS = "<style>body{margin:12px} #vega-chart,.vega-embed{width:100%;display:block}</style>"


def render(tl: Timeline, fmt: str) -> bytes:
    """The picture as HTML (self-contained: the Vega libraries inlined), SVG or PNG bytes."""
    import vl_convert as vlc

    if fmt == "html":
        page = vlc.vegalite_to_html(chart(tl, "container").to_dict(), bundle=True)
        # right after the page's own <head> (the first): the inlined vega-embed bundle holds "</head>" in a
        # string of its own, where a style would be inert and the chart left unsized
        return page.replace("<head>", "<head>" + FULL_WIDTH_CSS, 1).encode()
    spec = chart(tl).to_dict()
    if fmt == "png":
        return bytes(vlc.vegalite_to_png(spec, scale=2))
    return vlc.vegalite_to_svg(spec).encode()
