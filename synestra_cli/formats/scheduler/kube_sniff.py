"""What kubectl's Kubernetes outputs look like in a file's head (kubernetes.py, kube_events_table.py)."""

from __future__ import annotations

import re

# An API object in JSON or YAML: its apiVersion and a kind this project reads, at any indentation (a List's
# items), quoted or not; `kubectl cluster-info dump` and API Lists (`PodList`, `EventList`) too.
KINDS = r"(?:Pod|Event|Node|PyTorchJob|TFJob|MPIJob|XGBoostJob|PaddleJob|JAXJob|TrainJob|JobSet|Job|Workload)"
OBJECT_KIND = re.compile(rf"""^\s*"?kind"?\s*:\s*"?(?:{KINDS}(?:List)?|List)"?,?\s*$""", re.M)
API_VERSION = re.compile(r"""^\s*-?\s*"?apiVersion"?\s*:\s*"?[\w.\-/]*v\d\w*"?,?\s*$""", re.M)
# An events.k8s.io/v1 or core/v1 Event item without its kind (as an API EventList holds them).
EVENT_FIELDS = re.compile(r""""(?:involvedObject|regarding)"\s*:\s*\{""")
# The same in compact JSON (`jq -c`, a watch stream written one object a line).
JSON_KIND = re.compile(r'"kind"\s*:\s*"(?:' + KINDS + r'(?:List)?|List)"')
STARTS = re.compile(r"\A\s*(?:[\[{]|---|apiVersion:|kind:|items:)")


def sniff(head: str) -> float:
    if not STARTS.match(head):
        return 0.0
    if OBJECT_KIND.search(head) and (API_VERSION.search(head) or head.lstrip().startswith("{")):
        return 0.95
    if head.lstrip().startswith(("{", "[")) and '"apiVersion"' in head and JSON_KIND.search(head):
        return 0.95
    return 0.9 if head.lstrip().startswith(("{", "[")) and EVENT_FIELDS.search(head) else 0.0
