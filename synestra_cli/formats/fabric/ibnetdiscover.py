"""`ibnetdiscover` topology: which HCA port is cabled to which switch port.

Blocks separated by blank lines; a node line (`Switch 24 "S-<guid>" # "<desc>" ...`, `Ca 2 "H-<guid>"
# "<desc>"`) then one line per connected port (`[local](port guid) "<peer>"[peer port] # ...`). Every
link appears from both ends; a row is written per CA port that reaches a switch port. Host and NIC come
from the CA's node description (`"gpu-001 mlx5_0"`, `"node1 HCA-1"`); vendor default descriptions
(`"MT23108 InfiniHost Mellanox Technologies"`) name no host, so the node GUID stands in for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import write_topology

NODE_LINE = re.compile(r'^(Switch|Ca|Rt)\s+\d+\s+"([SHR])-([0-9a-fA-F]+)"\s*(?:#\s*"([^"]*)")?')
PORT_LINE = re.compile(
    r'^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?(?:\[ext \d+\])?\s+"([SHR])-([0-9a-fA-F]+)"\[(\d+)\]'
    r'(?:\(([0-9a-fA-F]+)\))?[^#]*(?:#[^"]*"([^"]*)")?'
)
# Lines that structure the output without carrying a link: GUID attributes, chassis grouping, comments.
DECORATIVE = re.compile(r"^\s*(?:#.*|\w+guid=.*|vendid=.*|devid=.*|(?:Non-)?Chassis\b.*|)$")
SNIFF = re.compile(r'^(?:Switch|Ca)\s+\d+\s+"[SH]-[0-9a-fA-F]+"', re.MULTILINE)

UFM_NAME = re.compile(r"^MF0;([^:;]+):")  # switch description set by MLNX-OS/UFM
NIC_TOKEN = re.compile(r"^(?:HCA-\d+|mlx\d+_\d+|[a-z]+\d*_\d+)$")
HOST_TOKEN = re.compile(r"^[A-Za-z0-9][\w.-]*$")


@dataclass(frozen=True)
class Link:
    kind: str  # S, H or R: this end
    guid: str
    port: int
    port_guid: str | None
    peer_kind: str
    peer_guid: str
    peer_port: int
    peer_port_guid: str | None


def sniff(head: str) -> float:
    return 0.9 if SNIFF.search(head) else 0.0


def guid(text: str) -> str:
    return f"0x{int(text, 16):016x}"


def node_names(desc: str | None) -> tuple[str | None, str | None]:
    """(host, nic) a node description names, or (None, None) for a vendor default description."""
    if not desc:
        return None, None
    ufm = UFM_NAME.match(desc)
    if ufm:
        return ufm.group(1), None
    tokens = desc.split()
    if len(tokens) == 1 and HOST_TOKEN.match(tokens[0]):
        return _short(tokens[0]), None
    if len(tokens) == 2 and HOST_TOKEN.match(tokens[0]) and NIC_TOKEN.match(tokens[1]):
        return _short(tokens[0]), tokens[1]
    return None, None


def _short(host: str) -> str:
    # Short hostnames as logged; an IP address stays whole.
    return host if re.fullmatch(r"[\d.]+", host) else host.split(".")[0]


def parse(ctx: LoadContext, result: LoadResult) -> tuple[list[Link], dict[str, str]]:
    """Every port line as a Link, and node GUID -> description from node lines and peer comments."""
    links: list[Link] = []
    descs: dict[str, str] = {}
    current: tuple[str, str] | None = None
    for lineno, line in enumerate(ctx.read_text().splitlines(), start=1):
        node, port = NODE_LINE.match(line), PORT_LINE.match(line)
        if node:
            current = (node.group(2), guid(node.group(3)))
            if node.group(4) is not None:
                descs[current[1]] = node.group(4)
        elif port and current:
            lp, lguid, pkind, pguid, pport, ppguid, pdesc = port.groups()
            links.append(
                Link(
                    current[0],
                    current[1],
                    int(lp),
                    lguid and guid(lguid),
                    pkind,
                    guid(pguid),
                    int(pport),
                    ppguid and guid(ppguid),
                )
            )
            if pdesc is not None:
                descs.setdefault(guid(pguid), pdesc)
        elif not DECORATIVE.match(line):
            result.reject(lineno, "not an ibnetdiscover node, port or attribute line", line)
    return links, descs


def ca_switch_rows(links: list[Link], descs: dict[str, str]) -> dict[str, list[str | None]]:
    """Topology columns, one row per (CA, port) cabled to a switch, seen from either end."""
    seen: dict[tuple[str, int], tuple[str | None, str, int]] = {}
    for ln in links:
        if ln.kind == "H" and ln.peer_kind == "S":
            seen[(ln.guid, ln.port)] = (ln.port_guid, ln.peer_guid, ln.peer_port)
        elif ln.kind == "S" and ln.peer_kind == "H":
            seen.setdefault((ln.peer_guid, ln.peer_port), (ln.peer_port_guid, ln.guid, ln.port))
    cols: dict[str, list[str | None]] = {"host": [], "nic": [], "switch": [], "switch_port": [], "rack": []}
    for (ca, ca_port), (port_guid, sw, sw_port) in sorted(seen.items()):
        host, nic = node_names(descs.get(ca))
        if nic:
            nic = nic if ca_port == 1 else f"{nic}:{ca_port}"
        cols["host"].append(host or ca)
        cols["nic"].append(nic or port_guid or f"{ca}:{ca_port}")
        cols["switch"].append(node_names(descs.get(sw))[0] or sw)
        cols["switch_port"].append(str(sw_port))
        cols["rack"].append(None)
    return cols


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    links, descs = parse(ctx, result)
    result.rows = write_topology(ctx, ca_switch_rows(links, descs))
    if not result.rows:
        result.notes.append(f"{ctx.display}: no CA port connected to a switch port")
    return result


FORMAT = Format(
    "ibnetdiscover",
    "InfiniBand ibnetdiscover topology (CA port -> switch port)",
    sniff,
    load,
    writes=frozenset({"topology"}),
    top=0.9,
    priority=40,
)
