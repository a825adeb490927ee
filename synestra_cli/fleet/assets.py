"""Asset identity: what a cause or a signal names, as one fleet component with its identities.

Explain names a component the way the evidence did (`gpu3` on a host, `mlx5_1`, `leaf-02:Ethernet8`
when only the switch end spoke, `rack-01`, `nfs-01`). Across jobs the same part must be one row, so
each name is resolved through the inventory the store holds: the `gpus` table (DCGM's UUID and PCI bus
id of each gpuN) and `topology` (each NIC's switch port and rack). A link is keyed by its host end, so
both ends' evidence meet; a thermal or power event on a rack is the rack's, counted once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import duckdb

from synestra_cli.explain.rules import RACK_CATEGORIES

GPUS_SQL = "SELECT DISTINCT host, entity, upper(pci_bus_id), uuid, model FROM gpus ORDER BY ALL"
TOPOLOGY_SQL = "SELECT DISTINCT host, nic, switch, switch_port, rack FROM topology ORDER BY ALL"

KINDS = ("gpu", "nic", "switch_port", "host", "rack", "filesystem")


@dataclass(frozen=True)
class Asset:
    kind: str  # one of KINDS
    id: str  # gpu-007:gpu2, gpu-008:mlx5_4, leaf-02:Ethernet8, gpu-003, rack-03, nfs-01
    host: str | None  # the host it sits in (None for a rack or a filesystem)
    component: str | None  # gpu2, mlx5_4, ... as the host names it
    identity: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


def _nic(entity: str | None) -> str | None:
    """`mlx5_1:1` (port 1) and `mlx5_1` are one NIC port as topology names it."""
    return entity.split(":", 1)[0] if entity else None


class Inventory:
    """The store's gpus and topology tables, read once (they hold one row per GPU / NIC)."""

    def __init__(self, conn: duckdb.DuckDBPyConnection) -> None:
        self.gpus: dict[tuple[str, str], dict[str, Any]] = {}
        self.bus: dict[tuple[str, str], str] = {}
        for host, entity, bus, uuid, model in conn.execute(GPUS_SQL).fetchall():
            self.gpus.setdefault((host, entity), {"uuid": uuid, "pci_bus_id": bus, "model": model})
            if bus:
                self.bus.setdefault((host, bus), entity)
        self.far: dict[tuple[str, str], tuple[str | None, str | None]] = {}
        self.near: dict[tuple[str, str], tuple[str, str]] = {}
        self.rack: dict[str, str] = {}
        for host, nic, switch, port, rack in conn.execute(TOPOLOGY_SQL).fetchall():
            if nic:
                self.far.setdefault((host, nic), (switch, port))
            if switch and port and nic:
                self.near.setdefault((switch, port), (host, nic))
            if rack:
                self.rack.setdefault(host, rack)
        self.racks = set(self.rack.values())
        self.switches = {s for s, _ in self.near}

    def rack_hosts(self, rack: str) -> list[str]:
        return sorted(h for h, r in self.rack.items() if r == rack)

    def hosts_of(self, asset: Asset) -> list[str]:
        """The hosts whose jobs the asset touches."""
        if asset.kind == "rack":
            return self.rack_hosts(asset.id)
        if asset.kind == "filesystem":
            return list(asset.identity.get("clients", []))
        return [asset.host] if asset.host else []

    def gpu(self, host: str, entity: str) -> Asset:
        ident = dict(self.gpus.get((host, entity), {}))
        ident["rack"] = self.rack.get(host)
        return Asset("gpu", f"{host}:{entity}", host, entity, ident)

    def nic(self, host: str, nic: str) -> Asset:
        switch, port = self.far.get((host, nic), (None, None))
        ident = {
            "far_end": f"{switch}:{port}" if switch and port else None,
            "switch": switch,
            "switch_port": port,
            "rack": self.rack.get(host),
        }
        return Asset("nic", f"{host}:{nic}", host, nic, ident)

    def host(self, host: str, component: str | None = None) -> Asset:
        return Asset("host", host, host, component, {"rack": self.rack.get(host)})

    def _link(self, host: str, entity: str | None) -> Asset:
        """A network component from either end: the host's NIC when topology knows the cable."""
        if ":" in (entity or "") and host not in self.switches:
            sw, port = (entity or "").split(":", 1)
            if (sw, port) in self.near:
                return self.nic(*self.near[(sw, port)])
            if sw in self.switches:
                host, entity = sw, port
        if host in self.switches or (host, entity or "") in self.near:
            if (host, entity or "") in self.near:
                return self.nic(*self.near[(host, entity or "")])
            return Asset("switch_port", f"{host}:{entity}", None, None, {"switch": host, "switch_port": entity})
        nic = _nic(entity)
        return self.nic(host, nic) if nic else self.host(host)

    def of(self, category: str, host: str | None, component: str | None) -> Asset | None:
        """The asset a cause (or a signal) of this category names; None when it names nothing."""
        if category == "storage.slow":
            name = component or host
            return Asset("filesystem", name, None, None, {"clients": [host] if host else []}) if name else None
        if category in RACK_CATEGORIES and component in self.racks:
            return Asset("rack", component, None, None, {"hosts": self.rack_hosts(component)})
        if host is None:
            return None
        if category.startswith("network."):
            return self._link(host, component)
        if component and (host, component) in self.gpus:
            return self.gpu(host, component)
        if component and (host, component.upper()) in self.bus:  # a PCI device that is a GPU
            return self.gpu(host, self.bus[(host, component.upper())])
        if component and component.startswith("gpu") and component[3:].isdigit():
            return self.gpu(host, component)
        return self.host(host, component)
