"""truth.json: what really happened, in the shape explain and tax-report answer (docs/simulator.md).

Jobs come from the job model (simulate/truth.py); this module adds the run, the faults and the decoys.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synestra_cli.simulate import faults as F
from synestra_cli.simulate.jobs import US, JobTimeline
from synestra_cli.simulate.truth import job_truth

SCHEMA = "synestra.simulate.truth/1"


def iso(t: datetime | float | int | None, us: bool = False) -> str | None:
    """ISO-8601 UTC with Z; ints with us=True are epoch microseconds, floats epoch seconds."""
    if t is None:
        return None
    d = t.replace(tzinfo=UTC) if isinstance(t, datetime) else datetime.fromtimestamp(t / US if us else t, UTC)
    return d.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def felt(f: F.Fault, tl: JobTimeline) -> bool:
    """Did the job feel the fault: a checkpoint or attempt end names its cause, or it trained on one of
    the fault's hosts while the slowdown lasted (a slowdown too short for a reactive save still costs)."""
    d = f.disturbance
    if d is None or not set(f.hosts) & set(tl.spec.hosts):
        return False
    if any(c.cause == f.cause for c in tl.checkpoints) or any(a.cause == f.cause for a in tl.launches):
        return True
    if d.kind != "slowdown":  # a stall only costs when a save falls in it (then the save names it)
        return False
    lo = d.start.replace(tzinfo=UTC).timestamp() * US
    hi = d.end.replace(tzinfo=UTC).timestamp() * US if d.end else float("inf")
    return any(a.first_step < hi and lo < a.last_progress for a in tl.launches)


def fault_json(f: F.Fault, jobs: list[JobTimeline]) -> dict[str, Any]:
    felt_by = [tl.spec.job_id for tl in jobs if felt(f, tl)]
    return {
        "kind": f.kind,
        "category": f.cause.category,
        "hosts": list(f.hosts),
        "component": f.cause.component,
        "start": iso(f.start),
        "end": iso(f.end),
        "first_signal": iso(f.cause.first_signal),
        "reported_healthy": f.cause.reported_healthy,
        "jobs_affected": felt_by,
        "decoy": f.decoy_reason,
    }


def write(path: Path, meta: dict[str, Any], jobs: list[JobTimeline], faults: list[F.Fault]) -> None:
    """The whole truth: run metadata, each job (the job model's truth), the faults, the decoys.

    A fault that touched a job is a fault (even when placed as a decoy for the main job: a degraded link
    outside it still slows whatever runs there); one that touched no job is a decoy, never to be blamed.
    """
    entries = [fault_json(f, jobs) for f in faults]
    doc = {
        "schema": SCHEMA,
        **meta,
        "jobs": [job_truth(tl) for tl in jobs],
        "faults": [d for d in entries if d["jobs_affected"]],
        "decoys": [d for d in entries if not d["jobs_affected"]],
    }
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
