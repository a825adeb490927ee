"""What to do about a cause: one rule per category, each with its source, filled in with the cause's
assets (explain/assets.py) and the signals of its chain.

An action is `{"kind", "text", "why", "source"}`: `kind` is stable for scripts (drain_rma, drain_reset, drain_inspect,
reseat_cable, facilities_ticket, storage_ticket, check_power, file_against_job, scheduler, investigate;
and save_cadence from accounting/interval.py), `text` is the instruction, `why` the evidence behind it,
`source` where the rule comes from. docs/explain.md lists the table.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from synestra_cli.explain.assets import Asset, rack_name
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.wording import BUCKETS, XID_CATALOG, XID_SOURCE
from synestra_cli.shown import plural

Action = dict[str, str]

# Public sources a reader can look up (not the project's notes): a ticket cites where its rule comes from.
UFM = "NVIDIA UFM PDR plugin: Field BER thresholds, symbol-error test (Mellanox ufm_sdk_3.0)"
META = (
    "Kokolis et al., Revisiting Reliability in Large-Scale ML Research Clusters (HPCA 2025, arXiv 2410.21680): "
    "a failure with no hardware signal is the job's"
)
# A GPU's own thermal signals, not a fabric tool's: DCGM's clock-event reasons name thermal slowdown; the
# 10 C over the GPU's own baseline is Synestra's rule (docs/explain.md, signals/thresholds.py).
THERMAL = (
    "DCGM clock-event reasons (DCGM_FI_DEV_CLOCKS_EVENT_REASONS: SW / HW thermal slowdown); "
    "Synestra's rule: 10 C over the GPU's own baseline (docs/explain.md)"
)


class Rule(NamedTuple):
    kind: str
    text: str  # str.format over the fields of `_fields`
    why: str
    source: str


RULES: dict[str, Rule] = {
    "gpu.fell_off_bus": Rule("drain_rma", "Drain {host} and open an RMA for {gpu}", "{xids}", XID_SOURCE),
    "gpu.memory": Rule("drain_rma", "Drain {host} and open an RMA for {gpu}", "{xids}", XID_SOURCE),
    "gpu.nvlink": Rule("drain_rma", "Drain {host} and open an RMA for {gpu} (NVLink)", "{xids}", XID_SOURCE),
    "gpu.other_xid": Rule(
        "drain_reset", "Drain {host} and reset {gpu}; open an RMA if it recurs", "{xids}", XID_SOURCE
    ),
    # Xids the catalog resolves by restarting the application (13, 31, 94): the job's own fault, unless
    # they repeat on one GPU.
    "gpu.app_xid": Rule(
        "file_against_job",
        "Not the infrastructure, most likely: restart the job and file "
        "against it; drain {host} only if the Xid repeats on {gpu}",
        "{xids}",
        XID_SOURCE,
    ),
    "network.link_degraded": Rule(
        "reseat_cable",
        "Reseat, clean or replace the optic or cable between {cable}",
        "{signals}; UFM counts a port bad above 0.004 symbol errors/s; the link {healthy}",
        UFM,
    ),
    "network.link_down": Rule(
        "reseat_cable",
        "Reseat or replace the optic or cable between {cable}; replace it if it flaps again",
        "{signals}",
        UFM,
    ),
    "cooling.thermal": Rule(
        "facilities_ticket",
        "Open a facilities ticket for {place} (cooling): hosts {hosts}",
        "{spread} ran hot at once (10 C over their own baseline, or throttling): {signals}",
        THERMAL,
    ),
    "power.capping": Rule(
        "check_power",
        "Check the power cap (nvidia-smi -q -d POWER) and the PSUs / PDU feeding {place}",
        "{signals}: clocks held down by the power limit",
        "DCGM_FI_DEV_POWER_VIOLATION (dcgm-exporter)",
    ),
    "host.pcie": Rule(
        "drain_inspect",
        "Drain {host} and inspect its PCIe path (reseat the GPU or riser) for {gpu}",
        "{signals}",
        "PCIe AER (log-formats.md A.3)",
    ),
    "host.node_problem": Rule(
        "drain_inspect",
        "Drain (cordon) {host} and find why it stopped: kubelet, kernel log, node-problem-detector conditions",
        "{signals}",
        "Kubernetes node conditions; node-problem-detector config/kernel-monitor.json",
    ),
    "storage.slow": Rule(
        "storage_ticket",
        "Open a storage ticket for filesystem {fs}: clients {clients} waited on it",
        "{signals}",
        "Linux NFS/Lustre client messages (log-formats.md)",
    ),
    "host.oom": Rule(
        "file_against_job",
        "Not the infrastructure: file against the job (it ran {host} out of memory)",
        "{signals}",
        META,
    ),
    "software.crash": Rule(
        "file_against_job", "Not the infrastructure: file against the job (its own error ended it)", "{signals}", META
    ),
    "workload.straggler": Rule(
        "file_against_job",
        "Not the infrastructure: file against the job (it slowed down with every host's telemetry healthy)",
        "{signals}",
        META,
    ),
    "scheduler.preemption": Rule(
        "scheduler",
        "No repair: the scheduler preempted the job; ask for a non-preemptible QOS if it costs too much",
        "{signals}",
        "Slurm sacct state PREEMPTED (log-formats.md D.8)",
    ),
    "unknown": Rule(
        "investigate",
        "Investigate by hand: nothing ingested explains it; ingest the hosts' kernel logs and telemetry around {when}",
        "{signals}",
        "no rule fits",
    ),
}


def _gpu_name(a: Asset | None) -> str:
    if not a:
        return "the GPU"
    ident = ", ".join(f"{label} {a[k]}" for k, label in (("serial", "serial"), ("pci_bus_id", "PCI")) if a.get(k))
    name = " ".join(p for p in (a.get("host"), a.get("gpu")) if p)
    who = a.get("uuid") or name or "the GPU"
    extra = ", ".join(p for p in (name if a.get("uuid") else None, ident, a.get("model")) if p)
    return f"{who} ({extra})" if extra else who


def _cable_name(a: Asset | None) -> str:
    if not a:
        return "the link's two ends"
    nic = " ".join(p for p in (a.get("host"), a.get("nic")) if p) + (
        f" port {a['nic_port']}" if a.get("nic_port") else ""
    )
    far = " ".join(p for p in (a.get("switch"), a.get("switch_port")) if p) or "its switch port (not in topology)"
    return f"host NIC {nic} and switch port {far}"


def _ref(lk: ChainLink) -> str:
    ev = lk.evidence
    return f" at {ev['source']}:{ev['line']}" if ev.get("type") == "log" and ev.get("source") else ""


def _xids(links: list[ChainLink]) -> str:
    """Each Xid of the chain with the catalog's meaning and resolution buckets; else the signals."""
    seen: dict[int, str] = {}
    for lk in links:
        code = lk.evidence.get("code") if lk.evidence.get("kind") == "xid" else None
        if isinstance(code, int) and code not in seen:
            x = XID_CATALOG.get(code)
            seen[code] = f"{lk.signal}{_ref(lk)}" + (
                f": NVIDIA's Xid catalog says {_bucket(x.immediate)} now, {_bucket(x.investigatory)} if it recurs"
                if x
                else ""
            )
    return "; ".join(seen.values()) or _signals(links)


def _refined(category: str, links: list[ChainLink]) -> str:
    """gpu.other_xid whose every Xid the catalog resolves with RESTART_APP is the application's."""
    if category != "gpu.other_xid":
        return category
    codes = {lk.evidence.get("code") for lk in links if lk.evidence.get("kind") == "xid"}
    known = [XID_CATALOG.get(c) for c in codes if isinstance(c, int)]
    return "gpu.app_xid" if known and all(x and x.immediate == "RESTART_APP" for x in known) else category


def _bucket(b: str) -> str:
    return f"{b} ({BUCKETS[b]})" if b in BUCKETS else b


def _spread(links: list[ChainLink]) -> str:
    gpus = {(lk.host, lk.entity) for lk in links if lk.layer == "gpu" and lk.host}
    hosts = {h for h, _ in gpus}
    return f"{plural(len(gpus), 'GPU')} on {plural(len(hosts), 'host')}" if gpus else "its GPUs"


def _signals(links: list[ChainLink], most: int = 3) -> str:
    """The infrastructure signals of the chain; the job's own (NCCL, traceback, SIGTERM) when there are none."""
    cause_side = [lk for lk in links if lk.layer in ("physical", "link", "traffic", "gpu")] or [
        lk for lk in links if lk.layer in ("job", "collective")
    ]
    if not cause_side:
        return "no infrastructure signal in the job's window"
    named = [
        f"{':'.join(p for p in (lk.host, lk.entity) if p)} {lk.signal}{_ref(lk)}".strip() for lk in cause_side[:most]
    ]
    more = len(cause_side) - most
    return "; ".join(named) + (f"; and {more} more {'signal' if more == 1 else 'signals'}" if more > 0 else "")


def _fields(
    category: str,
    host: str | None,
    component: str | None,
    assets: list[Asset],
    links: list[ChainLink],
    healthy: bool,
    when: Any,
) -> dict[str, str]:
    first = {a["kind"]: a for a in reversed(assets)}
    rack, fs = first.get("rack"), first.get("filesystem")
    place = rack_name(rack["rack"]) if rack else " ".join(p for p in (host, component) if p) or "the job's hosts"
    hosts = ", ".join(rack["hosts"]) if rack else (host or "?")
    return {
        "host": host or (first.get("gpu") or {}).get("host") or "the host",
        "gpu": _gpu_name(first.get("gpu")),
        "cable": _cable_name(first.get("cable")),
        "place": place,
        "hosts": hosts,
        "fs": fs["server"] if fs else (component or "?"),
        "clients": ", ".join(fs["clients"]) if fs else (host or "?"),
        "signals": _signals(links),
        "spread": _spread(links),
        "xids": _xids(links),
        "healthy": "never went down: nothing reported it unhealthy" if healthy else "also went down",
        "when": str(when or "the checkpoint"),
    }


def action_for(
    category: str,
    host: str | None,
    component: str | None,
    assets: list[Asset],
    links: list[ChainLink],
    healthy: bool = False,
    when: Any = None,
) -> Action:
    """The rule for `category`, filled in; `links` are the cause's own chain links (empty for an
    alternative: its action then rests on its assets alone)."""
    rule = RULES.get(_refined(category, links), RULES["unknown"])
    f = _fields(category, host, component, assets, links, healthy, when)
    return {"kind": rule.kind, "text": rule.text.format(**f), "why": rule.why.format(**f), "source": rule.source}
