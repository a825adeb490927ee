"""A simulated Kubernetes site's exports: the pods' watch stream and logs (simulate/kubernetes.py) and the
events, nodes and jobs lists (simulate/kube_events.py), written together."""

from __future__ import annotations

from pathlib import Path

from synestra_cli.simulate import faults as F
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.jobs import JobTimeline
from synestra_cli.simulate.kube_events import write_events, write_jobs_list, write_nodes
from synestra_cli.simulate.kubernetes import write_container_logs, write_pods
from synestra_cli.simulate.model import Rendering


def write_kubernetes(
    root: Path,
    cl: Cluster,
    timelines: list[JobTimeline],
    effects: dict[str, list[F.Effect]],
    render: Rendering,
    seed: int,
) -> None:
    """exports/kubernetes/{pods.watch.json, events.json, nodes.json, jobs.json} and exports/pods/ (logs)."""
    out = root / "kubernetes"
    out.mkdir(parents=True, exist_ok=True)
    every = write_pods(out / "pods.watch.json", timelines, seed)
    write_events(out / "events.json", every, cl, effects)
    write_nodes(out / "nodes.json", cl, effects, min(tl.attempts[0].start for tl in timelines))
    write_jobs_list(out / "jobs.json", every)
    write_container_logs(root / "pods", every, render)
