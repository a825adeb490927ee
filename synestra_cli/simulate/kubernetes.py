"""The same jobs and faults seen through Kubernetes: pods, events, node conditions and container logs.

`--scheduler kubernetes` replaces sacct and the job logs of the Slurm rendering. A job is a PyTorchJob (pods
`<job>-master-0`, `<job>-worker-N`, restarted in place: restartCount and lastState count the attempts) or a
JobSet (each restart recreates every pod, labelled with its restart-attempt), chosen per job from the seed.
Wording and fields from the real samples (tests/data/real_samples/kubernetes/): kubectl get -w -o json (a watch
stream: one pod object a document), get events -A -o json (core/v1, aggregated counts), get nodes -o json
(kubelet's conditions), and the kubelet's CRI container logs `/var/log/pods/<ns>_<pod>_<uid>/<container>/N.log`
(`<RFC3339Nano> stdout|stderr F <line>`; Go's RFC3339Nano drops trailing zeros). Everything is in UTC.

What the scheduler does: an attempt's pods are bound when it starts (the queue wait before is FailedScheduling,
repeated); a crash ends every container with exit 1 (in place: BackOff, then the next start), a preemption with
kube-scheduler's `Preempted by pod <uid> on node <node>` and DisruptionTarget PreemptionByScheduler (pods
recreated), a node failure with DeletionByTaintManager; a rebooting node goes NotReady (node-controller).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from synestra_cli.simulate import launchers, trainers
from synestra_cli.simulate.joblog import launch_lines
from synestra_cli.simulate.jobs import US, Attempt, JobTimeline
from synestra_cli.simulate.logfmt import EPOCH, Line
from synestra_cli.simulate.model import Rendering

NAMESPACE = "training"
CONTAINER = "pytorch"
QUEUE = "training-queue"
DOMAIN = "k8s.internal"  # node names are FQDNs (the store keys the short name, host_names keeps this)
NODE_GRACE_S = 40.0  # node-monitor-grace-period: NotReady this long after the node stops reporting
DEADLINE = "Pod was active on the node longer than the specified deadline"
STDERR = ("[rank", "Traceback", "E1", "W1", "I1")  # tracebacks and torch's glog lines go to stderr
DISRUPTION = {"PREEMPTED": "PreemptionByScheduler", "NODE_FAIL": "DeletionByTaintManager"}
EXIT = {
    "COMPLETED": (0, "Completed"),
    "FAILED": (1, "Error"),
    "REQUEUED": (1, "Error"),
    "NODE_FAIL": (137, "Error"),
    "PREEMPTED": (143, "Error"),
    "TIMEOUT": (143, "Error"),
}


def on_kubernetes(plan) -> None:
    """Jobs named as Kubernetes names them (namespace/name), told without Slurm."""
    plan.jobs[:] = [replace(j, job_id=f"{NAMESPACE}/{j.name}-{j.job_id}") for j in plan.jobs]
    plan.render = replace(plan.render, scheduler="kubernetes", slurm_notice=False)


def ts(us: int | float) -> str:
    """Go's RFC3339Nano: nanoseconds with trailing zeros dropped."""
    t = EPOCH + timedelta(microseconds=int(us))
    frac = f"{t.microsecond:06d}000".rstrip("0")
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def seconds(us: int | float) -> str:
    """metav1.Time: whole seconds."""
    return (EPOCH + timedelta(microseconds=int(us))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _uid(*parts: object) -> str:
    return str(uuid.UUID(hashlib.md5("/".join(map(str, parts)).encode()).hexdigest()))


def _suffix(*parts: object) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"  # the apiserver's generateName alphabet
    h = int(hashlib.md5("/".join(map(str, parts)).encode()).hexdigest(), 16)
    return "".join(alphabet[(h >> (5 * i)) % len(alphabet)] for i in range(5))


def node_name(host: str) -> str:
    return f"{host}.{DOMAIN}"


def is_jobset(tl: JobTimeline, seed: int) -> bool:
    return (seed + int(hashlib.md5(tl.spec.job_id.encode()).hexdigest(), 16)) % 2 == 1


class Pods:
    """The pods of one job: a pod per host, attempt after attempt (kept or recreated)."""

    def __init__(self, tl: JobTimeline, seed: int) -> None:
        self.tl, self.seed = tl, seed
        self.name = tl.spec.job_id.split("/", 1)[1]
        self.jobset = is_jobset(tl, seed)
        # a pod is recreated (a new uid, restartCount 0) after a JobSet restart, a preemption or a node failure
        self.incarnation: list[int] = []
        inc, prev = 0, None
        for a in tl.attempts:
            if prev is not None and (self.jobset or prev.state in DISRUPTION):
                inc += 1
            self.incarnation.append(inc)
            prev = a

    def pod(self, r: int, a: Attempt) -> tuple[str, str]:
        """(name, uid) of replica r's pod in attempt a."""
        inc = self.incarnation[a.number - 1]
        if self.jobset:
            name = f"{self.name}-trainer-{r}-0-{_suffix(self.name, r, inc)}"
        else:
            name = f"{self.name}-master-0" if r == 0 else f"{self.name}-worker-{r - 1}"
        return name, _uid(self.tl.spec.job_id, r, inc)

    def run(self, a: Attempt) -> int:
        """restartCount of the pod's container in attempt a: the runs of its incarnation before it."""
        inc = self.incarnation[a.number - 1]
        return sum(1 for b in self.tl.attempts[: a.number - 1] if self.incarnation[b.number - 1] == inc)

    def labels(self, r: int, a: Attempt) -> tuple[dict, dict, list]:
        spec = self.tl.spec
        if self.jobset:
            gen = str(self.incarnation[a.number - 1])
            job = f"{self.name}-trainer-{r}"
            labels = {
                "batch.kubernetes.io/job-completion-index": "0",
                "batch.kubernetes.io/job-name": job,
                "job-name": job,
                "jobset.sigs.k8s.io/jobset-name": self.name,
                "jobset.sigs.k8s.io/replicatedjob-name": "trainer",
                "jobset.sigs.k8s.io/job-index": str(r),
                "jobset.sigs.k8s.io/restart-attempt": gen,
                "kueue.x-k8s.io/queue-name": QUEUE,
            }
            owner: dict[str, object] = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": _uid(job, gen)}
            return labels, {"jobset.sigs.k8s.io/restart-attempt": gen}, [{**owner, "controller": True}]
        rtype, index = ("master", 0) if r == 0 else ("worker", r - 1)
        labels = {
            "training.kubeflow.org/job-name": self.name,
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/replica-type": rtype,
            "training.kubeflow.org/replica-index": str(index),
            **({"training.kubeflow.org/job-role": "master"} if r == 0 else {}),
            "kueue.x-k8s.io/queue-name": QUEUE,
        }
        owner = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": self.name,
            "uid": _uid(spec.job_id),
            "controller": True,
            "blockOwnerDeletion": True,
        }
        return labels, {}, [owner]


def _terminated(a: Attempt, start_us: int) -> dict:
    code, reason = EXIT[a.state]
    return {
        "terminated": {
            "containerID": f"containerd://{_uid(a.number, start_us).replace('-', '')}",
            "exitCode": code,
            "reason": reason,
            "startedAt": seconds(start_us),
            "finishedAt": seconds(a.end),
        }
    }


def pod_document(pods: Pods, r: int, a: Attempt) -> dict:
    """Replica r's pod as `kubectl get pods -w -o json` printed it when attempt a ended."""
    tl, spec = pods.tl, pods.tl.spec
    name, uid = pods.pod(r, a)
    labels, annotations, owners = pods.labels(r, a)
    run = pods.run(a)
    first = tl.attempts[a.number - 1 - run]  # the incarnation's first attempt: when the pod was bound
    prev = tl.attempts[a.number - 2] if run else None
    conditions = [
        {"lastProbeTime": None, "lastTransitionTime": seconds(first.start), "status": "True", "type": "PodScheduled"},
    ]
    if a.state in DISRUPTION:
        at = a.sigterm if a.sigterm is not None else a.end - 5 * US
        conditions.append(
            {
                "lastProbeTime": None,
                "lastTransitionTime": seconds(at),
                "message": _disruption(a),
                "reason": DISRUPTION[a.state],
                "status": "True",
                "type": "DisruptionTarget",
            }
        )
    status: dict = {
        "conditions": conditions,
        "containerStatuses": [
            {
                "containerID": _terminated(a, a.start)["terminated"]["containerID"],
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "name": CONTAINER,
                "ready": False,
                "restartCount": run,
                "started": False,
                "state": _terminated(a, a.start),
                "lastState": _terminated(prev, prev.start) if prev is not None else {},
            }
        ],
        "hostIP": f"10.0.{r // 250}.{r % 250 + 1}",
        "phase": "Succeeded" if a.state == "COMPLETED" else "Failed",
        "qosClass": "Guaranteed",
        "startTime": seconds(first.start),
    }
    if a.state == "TIMEOUT":
        status.update(
            reason="DeadlineExceeded", message="Pod was active on the node longer than the specified deadline"
        )
    gpus = str(spec.gpus_per_node)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": annotations,
            "creationTimestamp": seconds(first.start - 2 * US),
            "labels": labels,
            "name": name,
            "namespace": NAMESPACE,
            "ownerReferences": owners,
            "uid": uid,
        },
        "spec": {
            "containers": [
                {
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "name": CONTAINER,
                    "resources": {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}},
                }
            ],
            "nodeName": node_name(spec.hosts[r]),
            "restartPolicy": "Never" if pods.jobset else "OnFailure",
            "schedulerName": "default-scheduler",
        },
        "status": status,
    }


def _disruption(a: Attempt) -> str:
    if a.state == "PREEMPTED":
        return "default-scheduler: preempting to accommodate a higher priority pod"
    return "Taint manager: deleting due to NoExecute taint"


def write_pods(path: Path, timelines: list[JobTimeline], seed: int) -> list[Pods]:
    """The watch stream: every pod of every job as it stood at each attempt's end, in time order."""
    every = [Pods(tl, seed) for tl in timelines]
    docs = sorted(
        ((a.end, r, pod_document(p, r, a)) for p in every for a in p.tl.attempts for r in range(len(p.tl.spec.hosts))),
        key=lambda d: (d[0], d[2]["metadata"]["name"]),
    )
    path.write_text("".join(json.dumps(d, indent=4) + "\n" for _, _, d in docs), encoding="utf-8")
    return every


def attempt_events(tl: JobTimeline, a: Attempt, render: Rendering) -> list[Line]:
    """Rank 0's lines of one attempt with their times: its trainer's, and its launcher's around each launch."""
    if trainers.legacy(render):
        events = [e for x in tl.launches_of(a.number) for e in launch_lines(tl, x, render)]
    else:
        write, launches = trainers.WRITERS[render.trainer], list(tl.launches)
        outs = launchers.attempt_start(tl, a, render)
        for x in tl.launches_of(a.number):
            nxt = next((y for y in launches if y.number == x.number + 1), None)
            outs += write(tl, x, render) + launchers.launch_end(tl, x, nxt, render)
        events = [(o[0], o[1], o[2]) for o in outs]  # (time, order, text): the node a line came from is rank 0's
    return sorted(events, key=lambda e: (e[0], e[1]))


def container_lines(tl: JobTimeline, a: Attempt, render: Rendering) -> list[str]:
    """Rank 0's output of one attempt as the kubelet's CRI log holds it: each line with its time and stream."""
    out = []
    for us, _, text in attempt_events(tl, a, render):
        stream = (
            "stderr" if text.startswith(("[rank", "E", "W", "Traceback")) and not text.startswith("Epoch") else "stdout"
        )
        out.append(f"{ts(us)} {stream} F {text}")
    return out


def write_container_logs(root: Path, every: list[Pods], render: Rendering) -> None:
    """`/var/log/pods/<ns>_<pod>_<uid>/<container>/<restartCount>.log` of each job's rank-0 pod."""
    for p in every:
        for a in p.tl.attempts:
            name, uid = p.pod(0, a)
            folder = root / f"{NAMESPACE}_{name}_{uid}" / CONTAINER
            folder.mkdir(parents=True, exist_ok=True)
            lines = container_lines(p.tl, a, render)
            (folder / f"{p.run(a)}.log").write_text("".join(ln + "\n" for ln in lines), encoding="utf-8")
