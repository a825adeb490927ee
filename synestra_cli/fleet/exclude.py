"""`synestra fleet --exclude`: the nodes to keep out of the next job, as commands for Slurm or Kubernetes.

A node is listed when a lemon of the window (lemons.py) or a part degrading at its end (risks.py) sits in it:
the host itself, its GPU or NIC, every host of a rack at fault. Causes that are never a part's fault
(lemons.NOT_A_COMPONENT: a preemption, a routine save, the job's own crash or OOM, a straggler) put no node on
the list, and neither does a filesystem or a switch port (no node of the job's is at fault). Each node carries
its causes, each with the evidence that named it (a log line `file:line`, a metric, or the job that was hurt).

The commands are printed, never run (the operator decides): Slurm `scontrol update NodeName=... State=DRAIN
Reason=...` and an `--exclude=` hostlist (compressed, read back by hostlist.expand); Kubernetes `kubectl cordon`,
`kubectl taint nodes ... synestra.io/suspect=<cause>:NoSchedule` and `kubectl annotate` with the reason (a
taint's value is a label value: 63 characters of [A-Za-z0-9._-], no room for evidence). Every argument is quoted
for the shell (shlex). A GPU-level cause names the GPU (UUID, PCI id) in the reason, for sites that can take one
GPU out of service.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb

from synestra_cli.explain.chain import from_signal
from synestra_cli.explain.document import LinkDoc, link_doc
from synestra_cli.fleet.assets import Asset, Inventory
from synestra_cli.fleet.lemons import NOT_A_COMPONENT, FleetReport, FleetRow
from synestra_cli.fleet.risks import RiskReport
from synestra_cli.hostlist import compress

SCHEMA = "synestra.exclude/1"
TAINT_KEY = "synestra.io/suspect"
REASON_KEY = "synestra.io/suspect-reason"
TAINT_EFFECT = "NoSchedule"
LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$")
KIND_ORDER = ("gpu", "nic", "host", "rack")
FULL_NAMES_SQL = "SELECT host, min(name) FROM host_names GROUP BY host HAVING count(DISTINCT name) = 1"


@dataclass(frozen=True)
class Cause:
    category: str
    asset: str  # the part at fault (gpu-002:gpu0, gpu-004:mlx5_1, rack-01, gpu-003)
    kind: str  # gpu | nic | host | rack
    source: str  # lemon | at_risk
    evidence: str  # the first evidence that named it: file:line, a metric, a job
    gpu: dict[str, Any] | None = None  # the GPU, for a GPU-level cause: entity, uuid, pci_bus_id

    @property
    def text(self) -> str:
        what = self.asset
        if self.gpu:
            ident = ", ".join(str(self.gpu[k]) for k in ("uuid", "pci_bus_id") if self.gpu.get(k))
            what = f"{self.asset} ({ident})" if ident else self.asset
        status = "lemon" if self.source == "lemon" else "degrading"
        return f"{self.category} {what}, {status}; evidence {self.evidence}"


@dataclass
class Node:
    host: str  # as the store keys it (short, CLUSTER:host with --cluster)
    name: str  # as the scheduler knows it: the full name when the store saw only one
    cluster: str | None
    causes: list[Cause] = field(default_factory=list)

    @property
    def reason(self) -> str:
        return "synestra: " + "; ".join(c.text for c in self.causes)

    @property
    def taint_value(self) -> str:
        """The first cause's category as a taint value (a label value: kept only when it is one)."""
        value = self.causes[0].category.replace("/", ".")[:63]
        return value if LABEL_VALUE.match(value) else "fault"


@dataclass
class ExclusionList:
    since: datetime | None
    until: datetime | None
    at: datetime | None
    nodes: list[Node]

    def slurm(self) -> list[str]:
        out = []
        for n in self.nodes:
            where = ["-M", n.cluster] if n.cluster else []
            out.append(
                shlex.join(["scontrol", *where, "update", f"NodeName={n.name}", "State=DRAIN", f"Reason={n.reason}"])
            )
        return out

    def hostlist(self) -> str:
        return compress([n.name for n in self.nodes]) if self.nodes else ""

    def kubernetes(self) -> list[str]:
        out = []
        for n in self.nodes:
            ctx = ["--context", n.cluster] if n.cluster else []
            out.append(shlex.join(["kubectl", *ctx, "cordon", n.name]))
            taint = f"{TAINT_KEY}={n.taint_value}:{TAINT_EFFECT}"
            out.append(shlex.join(["kubectl", *ctx, "taint", "nodes", n.name, taint, "--overwrite"]))
            out.append(
                shlex.join(["kubectl", *ctx, "annotate", "node", n.name, f"{REASON_KEY}={n.reason}", "--overwrite"])
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "since": self.since,
            "until": self.until,
            "at": self.at,
            "hosts": [
                {
                    "host": n.host,
                    "name": n.name,
                    "cluster": n.cluster,
                    "reason": n.reason,
                    "taint": f"{TAINT_KEY}={n.taint_value}:{TAINT_EFFECT}",
                    "causes": [
                        {
                            "category": c.category,
                            "asset": c.asset,
                            "kind": c.kind,
                            "source": c.source,
                            "evidence": c.evidence,
                            "gpu": c.gpu,
                        }
                        for c in n.causes
                    ],
                }
                for n in self.nodes
            ],
            "slurm": {"drain": self.slurm(), "exclude": f"--exclude={self.hostlist()}" if self.nodes else None},
            "kubernetes": self.kubernetes(),
        }


def _evidence(links: list[LinkDoc], fallback: str) -> str:
    """A short id of the first evidence: the log line (file:line), else the metric and where it was read."""
    for lk in links:
        ev = lk["evidence"] or {}
        if ev.get("type") == "log" and ev.get("source"):
            name = str(ev["source"]).rsplit("/", 1)[-1]
            return f"{name}:{ev['line']}" if ev.get("line") else name
        if ev.get("type") == "metric":
            t = lk["time"]
            when = t.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(t, datetime) else str(t or "")
            return f"{ev.get('metric') or lk['signal']} {lk['host']}:{lk['entity'] or ''} {when}".strip()
    return fallback


def _gpu(asset: Asset) -> dict[str, Any] | None:
    if asset.kind != "gpu":
        return None
    return {"entity": asset.component, **{k: asset.identity.get(k) for k in ("uuid", "pci_bus_id", "model")}}


def _add(nodes: dict[str, Node], inv: Inventory, asset: Asset, cause: Cause, full: dict[str, str]) -> None:
    if asset.kind not in ("gpu", "nic", "host", "rack"):
        return  # a filesystem or a switch port: no node is at fault
    for host in inv.hosts_of(asset):
        cluster, bare = host.split(":", 1) if ":" in host else (None, host)
        node = nodes.setdefault(host, Node(host, full.get(host, bare).split(":", 1)[-1], cluster))
        if all((c.category, c.asset) != (cause.category, cause.asset) for c in node.causes):
            node.causes.append(cause)


def _lemon_evidence(row: FleetRow) -> str:
    """The first evidence of a lemon: of the first job it hurt (its chain), else of its first error episode."""
    links = [link_doc(lk) for h in row.hits for lk in h.chain]
    links += [link_doc(from_signal(s)) for e in row.episodes for s in e.signals[:1]]
    first = row.hits[0] if row.hits else None
    fallback = f"job {first.job} attempt {first.attempt}" if first else f"errors in {len(row.episodes)} episodes"
    return _evidence(links, fallback)


def exclusions(
    conn: duckdb.DuckDBPyConnection, fleet: FleetReport, risks: RiskReport | None, inv: Inventory
) -> ExclusionList:
    """The nodes of the lemons of `fleet` and of the parts `risks` finds degrading, with their causes."""
    full = dict(conn.execute(FULL_NAMES_SQL).fetchall())
    nodes: dict[str, Node] = {}
    for row in fleet.lemons:
        cats = [c for c in row.categories if c not in NOT_A_COMPONENT]
        if cats:
            cause = Cause(cats[0], row.asset.id, row.asset.kind, "lemon", _lemon_evidence(row), _gpu(row.asset))
            _add(nodes, inv, row.asset, cause, full)
    for r in risks.degrading if risks else []:
        cats = [c for c in r.categories if c not in NOT_A_COMPONENT]
        if cats:
            ev = _evidence([link_doc(lk) for lk in r.chain], "telemetry")
            _add(nodes, inv, r.asset, Cause(cats[0], r.asset.id, r.asset.kind, "at_risk", ev, _gpu(r.asset)), full)
    for n in nodes.values():  # the node's own part first (it names the taint), then what it shares (a rack)
        n.causes.sort(key=lambda c: KIND_ORDER.index(c.kind))
    ordered = sorted(nodes.values(), key=lambda n: n.host)
    return ExclusionList(fleet.since, fleet.until, risks.at if risks else None, ordered)


def exclusion_list(
    conn: duckdb.DuckDBPyConnection, since: datetime | None = None, until: datetime | None = None
) -> tuple[ExclusionList, FleetReport]:
    """The exclusion list of the window: its lemons, and the parts degrading at its end (the store's latest data
    when no --until); with the fleet report it was read from (its explanations are kept by the caller)."""
    from synestra_cli.fleet.lemons import data_span, fleet_report
    from synestra_cli.fleet.risks import risks_at

    fleet = fleet_report(conn, since, until)
    _lo, hi = data_span(conn)
    at = min(until, hi) if until and hi else (until or hi)
    risks = risks_at(conn, at, history=None) if at else None
    return exclusions(conn, fleet, risks, Inventory(conn)), fleet
