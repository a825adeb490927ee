"""Kubernetes events, node conditions and job objects of the simulated jobs (kubernetes.py writes the pods).

`kubectl get events -A -o json` (an EventList of core/v1 Events: firstTimestamp, lastTimestamp, count, source,
reportingComponent, as the minikube cluster-info dump in tests/data shows them), `kubectl get nodes -o json`
(kubelet's conditions and reasons), `kubectl get pytorchjobs,jobsets -A -o json` (their conditions as the
Training Operator and JobSet set them).
"""

from __future__ import annotations

import json
from pathlib import Path

from synestra_cli.simulate import faults as F
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.jobs import US
from synestra_cli.simulate.kubernetes import (
    CONTAINER,
    NAMESPACE,
    NODE_GRACE_S,
    Pods,
    _uid,
    node_name,
    seconds,
)

FAILED_SCHEDULING = (
    "0/{n} nodes are available: {n} Insufficient nvidia.com/gpu. preemption: 0/{n} nodes are available: "
    "{n} No preemption victims found for incoming pod."
)

STARTING = (
    ("Pulled", 'Container image "nvcr.io/nvidia/pytorch:24.05-py3" already present on machine'),
    ("Created", f"Created container {CONTAINER}"),
    ("Started", f"Started container {CONTAINER}"),
)


def _event(
    obj: dict,
    reason: str,
    message: str,
    first: float,
    last: float | None = None,
    count: int = 1,
    kind: str = "Normal",
    component: str = "kubelet",
    host: str | None = None,
) -> dict:
    name = f"{obj['name']}.{_uid(obj['name'], reason, first)[:16].replace('-', '')}"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "count": count,
        "eventTime": None,
        "firstTimestamp": seconds(first),
        "lastTimestamp": seconds(last if last is not None else first),
        "involvedObject": obj,
        "message": message,
        "reason": reason,
        "metadata": {"name": name, "namespace": obj.get("namespace", "default"), "uid": _uid(name)},
        "reportingComponent": component,
        "reportingInstance": host or "",
        "source": {"component": component, **({"host": host} if host else {})},
        "type": kind,
    }


def _pod_ref(name: str, uid: str, field: bool = False) -> dict:
    ref = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": NAMESPACE, "uid": uid}
    return {**ref, "fieldPath": f"spec.containers{{{CONTAINER}}}"} if field else ref


def pod_events(p: Pods, n_nodes: int) -> list[dict]:
    """Scheduling, starts, back-offs, preemptions and kills of one job's pods."""
    out: list[dict] = []
    for a in p.tl.attempts:
        prev = p.tl.attempts[a.number - 2] if a.number > 1 else None
        for r, host in enumerate(p.tl.spec.hosts):
            name, uid = p.pod(r, a)
            node = node_name(host)
            recreated = p.run(a) == 0
            if recreated:
                if prev is not None:  # waiting in the queue for the GPUs back: FailedScheduling, repeated
                    lo, hi = prev.end + 5 * US, a.start - 5 * US
                    n = max(1, int((hi - lo) / US // 60))
                    out.append(
                        _event(
                            _pod_ref(name, uid),
                            "FailedScheduling",
                            FAILED_SCHEDULING.format(n=n_nodes),
                            lo,
                            hi,
                            n,
                            "Warning",
                            "default-scheduler",
                        )
                    )
                out.append(
                    _event(
                        _pod_ref(name, uid),
                        "Scheduled",
                        f"Successfully assigned {NAMESPACE}/{name} to {node}",
                        a.start,
                        component="default-scheduler",
                    )
                )
            elif prev is not None:
                out.append(
                    _event(
                        _pod_ref(name, uid, True),
                        "BackOff",
                        f"Back-off restarting failed container {CONTAINER} in pod {name}_{NAMESPACE}({uid})",
                        prev.end + 10 * US,
                        a.start - US,
                        max(1, int((a.start - prev.end) / US // 300)),
                        "Warning",
                        host=node,
                    )
                )
            for reason, msg in (
                ("Pulled", 'Container image "nvcr.io/nvidia/pytorch:24.05-py3" already present on machine'),
                ("Created", f"Created container {CONTAINER}"),
                ("Started", f"Started container {CONTAINER}"),
            ):
                out.append(_event(_pod_ref(name, uid, True), reason, msg, a.start + US, host=node))
            if a.state == "PREEMPTED":
                at = a.sigterm if a.sigterm is not None else a.end - 5 * US
                out.append(
                    _event(
                        _pod_ref(name, uid),
                        "Preempted",
                        f"Preempted by pod {_uid('preemptor', a.number, host)} on node {node}",
                        at,
                        component="default-scheduler",
                    )
                )
                out.append(
                    _event(_pod_ref(name, uid, True), "Killing", f"Stopping container {CONTAINER}", at, host=node)
                )
    return out


def node_events(cl: Cluster, effects: dict[str, list[F.Effect]]) -> list[dict]:
    """A rebooting node stops reporting: node-controller marks it NotReady; kubelet says Ready when it is back."""
    out = []
    for host in cl.hosts:
        for e in effects.get(host, []):
            if e.kind != "reboot" or e.end is None:
                continue
            ref = {"kind": "Node", "name": node_name(host), "uid": node_name(host)}
            down = e.start * US + NODE_GRACE_S * US
            out.append(
                _event(
                    ref,
                    "NodeNotReady",
                    f"Node {node_name(host)} status is now: NodeNotReady",
                    down,
                    component="node-controller",
                )
            )
            out.append(
                _event(
                    ref,
                    "NodeReady",
                    f"Node {node_name(host)} status is now: NodeReady",
                    e.end * US,
                    host=node_name(host),
                )
            )
    return out


def job_events(p: Pods) -> list[dict]:
    kind = "JobSet" if p.jobset else "PyTorchJob"
    ref = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2" if p.jobset else "kubeflow.org/v1",
        "kind": kind,
        "name": p.name,
        "namespace": NAMESPACE,
        "uid": _uid(p.tl.spec.job_id),
    }
    out = []
    for a in p.tl.attempts[:-1]:
        if a.state != "COMPLETED":
            msg = (
                f"jobset {p.name} restarting: a child job failed"
                if p.jobset
                else f"PyTorchJob {p.name} is restarting because 1 Master replica(s) failed."
            )
            out.append(
                _event(
                    ref,
                    "Restarting" if p.jobset else "JobRestarting",
                    msg,
                    a.end + US,
                    kind="Warning",
                    component="jobset-controller" if p.jobset else "pytorchjob-controller",
                )
            )
    return out


def write_events(path: Path, every: list[Pods], cl: Cluster, effects: dict[str, list[F.Effect]]) -> None:
    items = [e for p in every for e in pod_events(p, cl.nodes) + job_events(p)] + node_events(cl, effects)
    items.sort(key=lambda e: (e["firstTimestamp"], e["metadata"]["name"]))
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")


def _condition(kind: str, status: str, reason: str, message: str, since: float, beat: float) -> dict:
    return {
        "lastHeartbeatTime": seconds(beat),
        "lastTransitionTime": seconds(since),
        "message": message,
        "reason": reason,
        "status": status,
        "type": kind,
    }


def write_nodes(path: Path, cl: Cluster, effects: dict[str, list[F.Effect]], since_us: float) -> None:
    """`kubectl get nodes -o json` at the end: kubelet's conditions, Ready since the node's last boot (its last
    reboot, else days before the jobs)."""
    items = []
    ends = [e.end for es in effects.values() for e in es if e.end is not None]
    beat = (max(ends, default=since_us / US) + 60.0) * US
    for host in cl.hosts:
        reboots = [e.end for e in effects.get(host, []) if e.kind == "reboot" and e.end is not None]
        up = (max(reboots) + 30.0) * US if reboots else since_us - (3 * 86400 + 17 * cl.host_index(host)) * US
        conds = [
            ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
            ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
            ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
        ]
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "labels": {
                        "kubernetes.io/hostname": node_name(host),
                        "nvidia.com/gpu.count": str(cl.gpus_per_node),
                        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                    },
                    "name": node_name(host),
                },
                "status": {"conditions": [_condition(*c, up, beat) for c in conds]},
            }
        )
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")


def write_jobs_list(path: Path, every: list[Pods]) -> None:
    """`kubectl get pytorchjobs,jobsets -A -o json`: each job's conditions at the end."""
    items = []
    for p in every:
        tl = p.tl
        first, last = tl.attempts[0], tl.attempts[-1]
        done = "Succeeded" if not p.jobset else "Completed"
        final = done if last.state == "COMPLETED" else "Failed"
        conds = [
            {"type": "Created", "status": "True", "lastTransitionTime": seconds(first.start - 2 * US)},
            {"type": final, "status": "True", "lastTransitionTime": seconds(last.end)},
        ]
        items.append(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2" if p.jobset else "kubeflow.org/v1",
                "kind": "JobSet" if p.jobset else "PyTorchJob",
                "metadata": {"name": p.name, "namespace": NAMESPACE, "uid": _uid(tl.spec.job_id)},
                "status": {
                    "conditions": conds,
                    **({"restarts": len(tl.attempts) - 1} if p.jobset else {}),
                    "startTime": seconds(first.start),
                },
            }
        )
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    path.write_text(json.dumps(doc, indent=4) + "\n", encoding="utf-8")
