"""truth.json: what really happened, in the shape explain and tax-report answer (docs/simulator.md)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synestra_cli.simulate import faults as F
from synestra_cli.simulate.jobs import US, JobTimeline
from synestra_cli.simulate.model import Cause

SCHEMA = "synestra.simulate.truth/1"


def iso(t: datetime | float | int | None, us: bool = False) -> str | None:
    """ISO-8601 UTC with Z; ints with us=True are epoch microseconds, floats epoch seconds."""
    if t is None:
        return None
    d = t.replace(tzinfo=UTC) if isinstance(t, datetime) else datetime.fromtimestamp(t / US if us else t, UTC)
    return d.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def cause_json(c: Cause | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"category": c.category, "host": c.hosts[0] if c.hosts else None, "hosts": list(c.hosts),
            "component": c.component, "first_signal": iso(c.first_signal), "reported_healthy": c.reported_healthy}


def job_json(tl: JobTimeline, buckets: dict[str, float] | None) -> dict[str, Any]:
    spec = tl.spec
    return {
        "job_id": spec.job_id, "name": spec.name, "user": spec.user, "hosts": list(spec.hosts),
        "gpus": len(spec.hosts) * spec.gpus_per_node,
        "start": iso(tl.attempts[0].start, us=True), "end": iso(tl.attempts[-1].end, us=True),
        "wall_s": (tl.attempts[-1].end - tl.attempts[0].start) / US,
        "save_every": spec.save_every, "step_s": spec.step_s,
        "attempts": [{"attempt": a.number, "start": iso(a.start, us=True), "end": iso(a.end, us=True),
                      "state": a.state, "exit_code": a.exit_code, "cause": cause_json(a.cause)}
                     for a in tl.attempts],
        "checkpoints": [{"kind": c.kind, "attempt": c.attempt, "iteration": c.iteration,
                         "start": iso(c.start, us=True), "end": iso(c.end, us=True),
                         "duration_s": (c.end - c.start) / US, "trigger": c.trigger, "cause": cause_json(c.cause)}
                        for c in tl.checkpoints],
        "tax_buckets_s": buckets,
    }


def fault_json(f: F.Fault, jobs: list[JobTimeline]) -> dict[str, Any]:
    felt = [tl.spec.job_id for tl in jobs if f.disturbance is not None and set(f.hosts) & set(tl.spec.hosts)]
    return {"kind": f.kind, "category": f.cause.category, "hosts": list(f.hosts), "component": f.cause.component,
            "start": iso(f.start), "end": iso(f.end), "first_signal": iso(f.cause.first_signal),
            "reported_healthy": f.cause.reported_healthy, "jobs_affected": felt, "decoy": f.decoy_reason}


def write(path: Path, meta: dict[str, Any], jobs: list[JobTimeline], buckets: list[dict[str, float] | None],
          faults: list[F.Fault]) -> None:
    doc = {"schema": SCHEMA, **meta,
           "jobs": [job_json(tl, b) for tl, b in zip(jobs, buckets, strict=True)],
           "faults": [fault_json(f, jobs) for f in faults if f.decoy_reason is None],
           "decoys": [fault_json(f, jobs) for f in faults if f.decoy_reason is not None]}
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
