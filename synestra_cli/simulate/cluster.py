"""The simulated cluster: hosts, GPUs, NICs, racks and a rail-optimised fabric.

Rail-optimised (NVIDIA DGX SuperPOD reference architecture): NIC n of every host connects to leaf n,
so a collective's traffic on rail n crosses only leaf n (and the spines between leaves). Names follow
the shared conventions: hosts ``gpu-001``, racks ``rack-01`` of ``rack_size`` hosts, leaves ``leaf-01``,
switch ports ``Ethernet<k>`` (SONiC style, 4 lanes per port), a filesystem server ``nfs-01``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

# PCI buses of the eight GPUs and NICs on an HGX H100 board (Dell XE9680 / DGX H100 layouts).
GPU_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
NIC_BUSES = ("1A", "2C", "3C", "5F", "9C", "AD", "BC", "DD")
GPU_MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.90.07"
FS_SERVER = "nfs-01"
UPLINKS_PER_LEAF = 4


@dataclass(frozen=True)
class Cluster:
    nodes: int
    gpus_per_node: int = 8
    rack_size: int = 4
    seed: int = 0

    @cached_property
    def hosts(self) -> tuple[str, ...]:
        return tuple(f"gpu-{i + 1:03d}" for i in range(self.nodes))

    @property
    def nics_per_host(self) -> int:
        return self.gpus_per_node  # one NIC per GPU: the rail count

    @property
    def leaves(self) -> tuple[str, ...]:
        return tuple(f"leaf-{n + 1:02d}" for n in range(self.nics_per_host))

    def host_index(self, host: str) -> int:
        return int(host.split("-")[1]) - 1

    def rack(self, host: str) -> str:
        return f"rack-{self.host_index(host) // self.rack_size + 1:02d}"

    def rack_hosts(self, rack: str) -> tuple[str, ...]:
        return tuple(h for h in self.hosts if self.rack(h) == rack)

    @property
    def racks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.rack(h) for h in self.hosts))

    def leaf(self, nic: int) -> str:
        return self.leaves[nic]

    def switch_port(self, host: str) -> str:
        """The leaf port a host's NIC plugs into (the same port number on every rail)."""
        return f"Ethernet{4 * self.host_index(host)}"

    def uplink_ports(self) -> tuple[str, ...]:
        """Leaf ports towards the spines, after the host-facing ports."""
        base = 4 * self.nodes
        return tuple(f"Ethernet{base + 4 * u}" for u in range(UPLINKS_PER_LEAF))

    def gpu_bus_id(self, gpu: int) -> str:
        """DCGM's form: 8-digit domain, upper case, with function."""
        return f"00000000:{GPU_BUSES[gpu % len(GPU_BUSES)]}:00.0"

    def kernel_gpu_addr(self, gpu: int) -> str:
        """The Xid line's form: ``0000:9a:00`` (4-digit domain, lower case, no function)."""
        return f"0000:{GPU_BUSES[gpu % len(GPU_BUSES)].lower()}:00"

    def nic_bdf(self, nic: int) -> str:
        return f"0000:{NIC_BUSES[nic % len(NIC_BUSES)].lower()}:00.0"

    @cached_property
    def _uuids(self) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 0xC1])
        return rng.integers(0, 2**63, size=(self.nodes, self.gpus_per_node, 2), dtype=np.int64)

    def gpu_uuid(self, host: str, gpu: int) -> str:
        a, b = (int(x) for x in self._uuids[self.host_index(host), gpu])
        h = f"{a:016x}{b:016x}"
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    def topology_rows(self) -> list[tuple[str, str, str, str, str]]:
        """(host, nic, switch, switch_port, rack) for every host NIC."""
        return [
            (h, f"mlx5_{n}", self.leaf(n), self.switch_port(h), self.rack(h))
            for h in self.hosts
            for n in range(self.nics_per_host)
        ]
