"""Grafana annotations for a job's checkpoints and causes (`synestra annotations`).

Each annotation is what Grafana's annotations HTTP API takes in `POST /api/annotations` (legacy API,
Grafana 4.6 on; docs: grafana.com/docs/grafana/latest/developer-resources/api-reference/http-api/
api-legacy/annotations/): `time` and `timeEnd` in epoch milliseconds, `tags`, `text`. Without a
`dashboardUID` it is an organisation annotation, shown on any dashboard whose annotation query filters
on its tags (`synestra`, `job:ID`, ...). One event is one annotation: a cause seen by several
checkpoints of a job is annotated once, from its first signal to the first checkpoint it caused.

Re-posting: each annotation carries a tag `synestra-id:<12 hex>`, a digest of what it is (the job, the
checkpoint or the cause), the same on every run over the same store; a cron job deletes the
annotations holding a job's tags, then posts again (docs/explain.md), and nothing is duplicated.
`dashboard_uid` / `panel_id` scope them to one dashboard and panel instead of the organisation.
`datasource_document` is the same events as a Grafana JSON data source's `/annotations` answer
(simPod's GrafanaJsonDatasource: time, timeEnd, title, text, tags, isRegion), for a file served as it is.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

from synestra_cli.explain.explanation import CheckpointExplanation, JobExplanation

SCHEMA = "synestra.annotations/1"


def epoch_ms(t: datetime) -> int:
    """Naive datetimes are UTC (the store's convention). Truncated to the millisecond, as the JSON
    outputs write times (`12:30:28.099Z`), so an annotation and the explanation it came from agree to
    the millisecond (rounding made 28.0995 read .100 here and .099 there)."""
    epoch = datetime(1970, 1, 1) if t.tzinfo is None else datetime(1970, 1, 1, tzinfo=UTC)
    return (t - epoch) // timedelta(milliseconds=1)


def _checkpoint(job: str, cp: CheckpointExplanation) -> dict[str, Any] | None:
    start = cp.start or cp.end
    if start is None:
        return None
    end = cp.end or start
    kind = "routine" if cp.routine else "non-routine"
    dur = f" {cp.duration_s:.1f} s" if cp.duration_s is not None else ""
    text = f"job {job}: {cp.trigger} {cp.kind} at iteration {cp.iteration}{dur}"
    if cp.cause:
        text += f"; cause {cp.cause.category} {' '.join(p for p in (cp.cause.host, cp.cause.component) if p)}"
    return {
        "time": epoch_ms(start),
        "timeEnd": epoch_ms(end),
        "tags": ["synestra", f"job:{job}", "checkpoint", cp.kind, cp.trigger, kind],
        "text": text,
    }


def _cause(job: str, cp: CheckpointExplanation) -> dict[str, Any] | None:
    c = cp.cause
    if c is None or c.first_signal is None:
        return None
    end = cp.start or cp.end or c.first_signal
    where = " ".join(dict.fromkeys(p for p in (c.host, c.component) if p))
    text = f"job {job}: {c.category} {where} (confidence {c.confidence:.2f})"
    if c.action:
        text += f". Action: {c.action['text']}"
    tags = ["synestra", f"job:{job}", "cause", c.category, *(p for p in (c.host, c.component) if p)]
    if c.action:
        tags.append(f"action:{c.action['kind']}")
    return {"time": epoch_ms(c.first_signal), "timeEnd": epoch_ms(max(end, c.first_signal)), "tags": tags, "text": text}


def event_id(*what: Any) -> str:
    """A stable id for one event: the same store gives the same id on every run."""
    return hashlib.sha256("\x1f".join(str(w) for w in what).encode()).hexdigest()[:12]


def job_annotations(
    job: JobExplanation, dashboard_uid: str | None = None, panel_id: int | None = None
) -> list[dict[str, Any]]:
    """The job's checkpoints, then each distinct cause once, in time order; each tagged with its stable
    `synestra-id:`, scoped to a dashboard (and panel) when given."""
    out = []
    for cp in job.checkpoints:
        if a := _checkpoint(job.job, cp):
            a["tags"].append(
                "synestra-id:" + event_id(job.job, "checkpoint", cp.kind, cp.attempt, cp.iteration, cp.start)
            )
            out.append(a)
    seen: set[tuple[Any, ...]] = set()
    for cp in job.checkpoints:
        c = cp.cause
        key = (c.category, c.host, c.component, c.first_signal) if c else None
        if key and key not in seen and (a := _cause(job.job, cp)):
            seen.add(key)
            a["tags"].append("synestra-id:" + event_id(job.job, "cause", *key))
            out.append(a)
    for a in out:
        if dashboard_uid:
            a["dashboardUID"] = dashboard_uid
        if panel_id is not None:
            a["panelId"] = panel_id
    return sorted(out, key=lambda a: (a["time"], a["tags"][2]))


def document(
    jobs: list[JobExplanation], dashboard_uid: str | None = None, panel_id: int | None = None
) -> dict[str, Any]:
    return {"schema": SCHEMA, "annotations": [a for j in jobs for a in job_annotations(j, dashboard_uid, panel_id)]}


def datasource_document(jobs: list[JobExplanation]) -> list[dict[str, Any]]:
    """The annotations as a Grafana JSON data source answers `POST /annotations`: a list of
    {time, timeEnd, isRegion, title, text, tags}."""
    out = []
    for j in jobs:
        for a in job_annotations(j):
            title = a["text"].split(";")[0].split(". Action:")[0]
            region = a["timeEnd"] != a["time"]
            out.append(
                {
                    "time": a["time"],
                    "timeEnd": a["timeEnd"],
                    "isRegion": region,
                    "title": title,
                    "text": a["text"],
                    "tags": a["tags"],
                }
            )
    return out
