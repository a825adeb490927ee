"""Which Kubernetes job a saved container log belongs to, from where the kubelet keeps it.

The kubelet writes `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log` (one file per start
of the container: the attempts of an in-place restart) and links `/var/log/containers/<pod>_<namespace>_
<container>-<id>.log` to it. The job is the pod's owner, named in the pod's name by the controllers that make
them: the Training Operator `<job>-master-0`, `<job>-worker-3` (`launcher`, `chief`, `ps`, `evaluator` too,
the MPI launcher with a generated suffix), JobSet `<jobset>-<replicatedjob>-<job index>-<pod index>-<5>`, an
indexed Job `<job>-<index>-<5>`, a Job `<job>-<5>` (`<5>`: five generated characters). The job id is
`namespace/job`, as kubernetes.py (this folder) names it from the pods' labels; a replicated job's name with a dash in
it cannot be told from the JobSet's (give `--job` then).
"""

from __future__ import annotations

import re
from pathlib import Path

POD_DIR = re.compile(r"^(?P<ns>[a-z0-9][-a-z0-9]*)_(?P<pod>[a-z0-9][-a-z0-9.]*)_(?P<uid>[0-9a-f-]{36})$")
CONTAINER_LINK = re.compile(
    r"^(?P<pod>[a-z0-9][-a-z0-9.]*)_(?P<ns>[a-z0-9][-a-z0-9]*)_[a-z0-9][-a-z0-9]*-[0-9a-f]{64}\.log$"
)
GEN = r"[bcdfghjklmnpqrstvwxz2456789]{5}"  # the apiserver's generateName suffix alphabet
OWNERS = (
    re.compile(r"^(?P<job>.+)-(?:master|worker|chief|ps|evaluator|launcher|driver)-\d+$"),
    re.compile(rf"^(?P<job>.+)-launcher-{GEN}$"),
    re.compile(rf"^(?P<job>.+)-[a-z0-9]+-\d+-\d+-{GEN}$"),
    re.compile(rf"^(?P<job>.+)-\d+-{GEN}$"),
    re.compile(rf"^(?P<job>.+)-{GEN}$"),
)


def job_of_pod(pod: str) -> str:
    """The job a pod's name names (the pod itself when no controller's pattern fits: a bare pod)."""
    for rx in OWNERS:
        m = rx.match(pod)
        if m:
            return m.group("job")
    return pod


def job_of_container_log(path: Path) -> str | None:
    """`namespace/job` of a kubelet container log, from its path; None for any other file."""
    m = CONTAINER_LINK.match(path.name)
    if m is None and re.fullmatch(r"\d+\.log(?:\.gz|\.\d+)?(?:\.gz)?", path.name) and len(path.parts) >= 3:
        m = POD_DIR.match(path.parent.parent.name)
    return f"{m.group('ns')}/{job_of_pod(m.group('pod'))}" if m else None
