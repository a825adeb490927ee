"""What a cause is, as the people who fix it name it: the GPU's UUID, serial, PCI bus id and model; both
ends of a cable (host NIC and switch port); a rack and every host in it; a filesystem and the clients
that waited on it.

Sources, read once per job (`load_book`):
- `gpus`: DCGM's labels (UUID, pci_bus_id, modelName) per host and gpuN.
- the kernel log: before a GPU's first Xid the driver names it, `NVRM: GPU at PCI:0000:9b:00: GPU-<uuid>`
  followed by `NVRM: GPU Board Serial Number: <serial>` (log-formats.md A.1; newer drivers also print
  `NVRM: GPU 0000:9b:00.0: GPU serial number is <serial>.`). That is the only place a serial appears.
- `topology`: host NIC -> switch, switch port, rack; a rack's hosts are all the hosts cabled in it, not
  only the job's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from synestra_cli.signals.scope import JobScope
from synestra_cli.store.sql import placeholders

Asset = dict[str, Any]

# DCGM identity joined to the driver's own banner lines (UUID, board serial), per GPU of the job's hosts.
# The kernel names a GPU as 0000:9b:00 (4-digit domain, no function); DCGM as 00000000:9B:00.0.
GPUS_SQL = """
WITH kern AS (
    SELECT host, source_id, line, message FROM events
    WHERE host IN ({hosts}) AND kind = 'log' AND message LIKE 'NVRM: GPU%'
), banner AS (
    SELECT host, source_id, line,
           regexp_extract(message, 'GPU at PCI:([0-9A-Fa-f]{{4}}:[0-9A-Fa-f]{{2}}:[0-9A-Fa-f]{{2}})', 1) AS pci,
           regexp_extract(message, '(GPU-[0-9A-Fa-f-]{{36}})', 1) AS uuid
    FROM kern WHERE message LIKE 'NVRM: GPU at PCI:%'
), serial_after AS (  -- the board serial line right after a banner
    SELECT b.host, '0000' || upper(b.pci) || '.0' AS pci, b.uuid,
           nullif(trim(regexp_extract(k.message, 'Serial Number:\\s*(\\S*)', 1)), '') AS serial
    FROM banner b LEFT JOIN kern k
      ON k.host = b.host AND k.source_id = b.source_id AND k.line = b.line + 1
     AND k.message LIKE 'NVRM: GPU Board Serial Number:%'
    WHERE b.pci <> ''
), serial_inline AS (  -- `NVRM: GPU 0000:9b:00.0: GPU serial number is 1653923026510.`
    SELECT host, upper(lpad(regexp_extract(message, 'GPU ([0-9A-Fa-f:.]+): GPU serial', 1), 16, '0')) AS pci,
           regexp_extract(message, 'serial number is (\\w+)', 1) AS serial
    FROM kern WHERE message LIKE '%GPU serial number is%'
), logged AS (
    SELECT host, pci, max(uuid) AS uuid, max(serial) AS serial FROM (
        SELECT host, pci, uuid, serial FROM serial_after
        UNION ALL SELECT host, pci, NULL, serial FROM serial_inline WHERE serial <> ''
    ) GROUP BY host, pci
), dcgm AS (
    SELECT host, entity, upper(max(pci_bus_id)) AS pci, max(uuid) AS uuid, max(model) AS model
    FROM gpus WHERE host IN ({hosts}) GROUP BY host, entity
)
SELECT coalesce(d.host, l.host), d.entity, coalesce(d.pci, l.pci), coalesce(d.uuid, l.uuid), l.serial, d.model
FROM dcgm d FULL OUTER JOIN logged l ON l.host = d.host AND l.pci = d.pci
ORDER BY 1, 2
"""

# Every host cabled in the racks of the job's hosts.
RACK_HOSTS_SQL = """
SELECT DISTINCT rack, host FROM topology
WHERE rack IN (SELECT rack FROM topology WHERE host IN ({hosts}) AND rack IS NOT NULL)
ORDER BY rack, host
"""

# Every rack's hosts (load_books: the racks of many jobs at once).
ALL_RACK_HOSTS_SQL = "SELECT DISTINCT rack, host FROM topology WHERE rack IS NOT NULL ORDER BY rack, host"


@dataclass
class AssetBook:
    """The identities of everything a job's causes can name."""

    scope: JobScope
    gpus: list[Asset] = field(default_factory=list)
    racks: dict[str, list[str]] = field(default_factory=dict)

    def gpu(self, host: str | None, entity: str | None) -> Asset:
        """A GPU by host and gpuN (or by its PCI bus id, as a log event names it)."""
        for g in self.gpus:
            if g["host"] == host and entity and entity in (g["gpu"], g["pci_bus_id"]):
                return dict(g)
        return {
            "kind": "gpu",
            "host": host,
            "gpu": entity,
            "uuid": None,
            "serial": None,
            "pci_bus_id": None,
            "model": None,
        }

    def cable(self, host: str | None, component: str | None) -> Asset:
        """Both ends of a cable, from either end: `mlx5_1` on a host, or `leaf-02:Ethernet0`."""
        nic, _, port = (component or "").partition(":")
        for lk in self.scope.links:
            host_end = lk.host == host and lk.nic == nic
            if host_end or (lk.switch, lk.switch_port) in ((host, component), (nic, port)):
                return {
                    "kind": "cable",
                    "host": lk.host,
                    "nic": lk.nic,
                    "nic_port": (port or None) if host_end else None,
                    "switch": lk.switch,
                    "switch_port": lk.switch_port,
                    "rack": lk.rack,
                }
        return {
            "kind": "cable",
            "host": host,
            "nic": nic or None,
            "nic_port": port or None,
            "switch": None,
            "switch_port": None,
            "rack": self.scope.rack_of(host) if host else None,
        }

    def rack(self, rack: str) -> Asset:
        return {"kind": "rack", "rack": rack, "hosts": list(self.racks.get(rack, []))}

    def host(self, host: str) -> Asset:
        return {"kind": "host", "host": host, "rack": self.scope.rack_of(host)}


def load_book(conn: duckdb.DuckDBPyConnection, scope: JobScope) -> AssetBook:
    """Two small queries over the job's hosts: GPU identities and rack membership."""
    book = AssetBook(scope)
    if not scope.hosts:
        return book
    marks = placeholders(len(scope.hosts))
    rows = conn.execute(GPUS_SQL.format(hosts=marks), [*scope.hosts, *scope.hosts]).fetchall()
    book.gpus = [
        {"kind": "gpu", "host": h, "gpu": e, "uuid": u, "serial": s, "pci_bus_id": p, "model": m}
        for h, e, p, u, s, m in rows
    ]
    for rack, host in conn.execute(RACK_HOSTS_SQL.format(hosts=marks), scope.hosts).fetchall():
        book.racks.setdefault(rack, []).append(host)
    return book


def load_books(conn: duckdb.DuckDBPyConnection, scopes: Sequence[JobScope]) -> dict[str, AssetBook]:
    """load_book for many jobs in two queries: a GPU's identity and a rack's hosts come from that GPU's
    host and that rack's rows alone, so each job's book is its share of the fleet's, in the same order."""
    every = sorted({h for s in scopes for h in s.hosts})
    rows = conn.execute(GPUS_SQL.format(hosts=placeholders(len(every))), [*every, *every]).fetchall() if every else []
    racks = conn.execute(ALL_RACK_HOSTS_SQL).fetchall()
    out = {}
    for scope in scopes:
        hosts = set(scope.hosts)
        book = AssetBook(scope)
        if hosts:
            book.gpus = [
                {"kind": "gpu", "host": h, "gpu": e, "uuid": u, "serial": s, "pci_bus_id": p, "model": m}
                for h, e, p, u, s, m in rows
                if h in hosts
            ]
            mine = {rack for rack, host in racks if host in hosts}
            for rack, host in racks:
                if rack in mine:
                    book.racks.setdefault(rack, []).append(host)
        out[scope.job_id] = book
    return out


GPU_CATEGORIES = ("gpu.fell_off_bus", "gpu.memory", "gpu.nvlink", "gpu.other_xid")


def assets_of(
    category: str,
    host: str | None,
    component: str | None,
    book: AssetBook,
    entities: Sequence[tuple[str, str | None]] = (),
) -> list[Asset]:
    """The assets a cause names. `entities`: the (host, entity) its signals came from, when known
    (a hot rack lists its hot GPUs; a slow filesystem its waiting clients)."""
    if component and component in book.racks:
        hot = [book.gpu(h, e) for h, e in sorted(set(entities)) if e and e.startswith("gpu")]
        return [book.rack(component), *hot]
    if category in GPU_CATEGORIES or (
        category in ("cooling.thermal", "power.capping", "host.pcie") and component and component.startswith("gpu")
    ):
        return [book.gpu(host, component)]
    if category.startswith("network."):
        return [book.cable(host, component)]
    if category in ("cooling.thermal", "power.capping") and host and component is None:
        # one host's trouble (its power supply, fans, a cap set on it): the host, then the GPUs that showed it
        mine = [book.gpu(h, e) for h, e in sorted(set(entities)) if h == host and e and e.startswith("gpu")]
        return [book.host(host), *mine]
    if category == "storage.slow" and component:
        clients = sorted({h for h, _ in entities} | ({host} if host else set()))
        return [{"kind": "filesystem", "server": component, "clients": clients}]
    if host:
        return [book.host(host)]
    return [{"kind": "job", "job": book.scope.job_id, "hosts": list(book.scope.hosts)}]


def rack_name(rack: str) -> str:
    """`rack-01` as it is; `A12` as `rack A12`."""
    return rack if rack.lower().startswith("rack") else f"rack {rack}"


def describe(a: Asset) -> str:
    """One asset on one line, as a ticket names it."""
    kind = a.get("kind")
    if kind == "gpu":
        ident = [f"{k} {a[k]}" for k in ("uuid", "serial") if a.get(k)]
        ident += [f"PCI {a['pci_bus_id']}"] if a.get("pci_bus_id") else []
        return " ".join(
            ["GPU", *(p for p in (a.get("host"), a.get("gpu")) if p), *ident, *([a["model"]] if a.get("model") else [])]
        )
    if kind == "cable":
        nic = " ".join(p for p in (a.get("host"), a.get("nic"), a.get("nic_port") and f"port {a['nic_port']}") if p)
        far = " ".join(p for p in (a.get("switch"), a.get("switch_port")) if p) or "switch port not in topology"
        return f"cable: host NIC {nic} <-> switch {far}" + (f" ({a['rack']})" if a.get("rack") else "")
    if kind == "rack":
        return f"{rack_name(a['rack'])}: hosts {', '.join(a['hosts']) or 'not in topology'}"
    if kind == "filesystem":
        return f"filesystem {a['server']} (clients {', '.join(a['clients'])})"
    if kind == "host":
        return f"host {a['host']}" + (f" ({a['rack']})" if a.get("rack") else "")
    return f"job {a.get('job')} on {', '.join(a.get('hosts') or [])}"
