"""InfiniBand PMA port counters: `perfquery [-x]`, `ibqueryerrors`, a /sys/class/infiniband dump; `ibstat`.

One format, four dialects told apart by content. `ibstat` carries no counters, only each port's state,
physical state and rate: the same port-state rows the sysfs dump gives (`state`, `phys_state`, `rate`).
The other three print the same PMA counters under two spellings (perfquery `SymbolErrorCounter`,
sysfs `symbol_error`); both map to `ib_port_*_total`.
PortXmitData/PortRcvData count 4-byte words and are stored in bytes. Counters with no canonical twin
are kept as `ib_pma_<snake name>` (perfquery, ibqueryerrors), `ib_sysfs_<name>` and `ib_hw_<name>`
(sysfs `counters/` and RDMA `hw_counters/`).

Entities: perfquery names only a LID (`lid10`, `lid10:2` for port 2, `lid10:all` for port 255);
an echoed `perfquery -C mlx5_0 ...` line names the HCA instead. ibqueryerrors names the node
(`Errors for 0x... "gpu-001 mlx5_0"` -> host gpu-001, entity mlx5_0; a switch "MF0;leaf-01:..." ->
host leaf-01, entity the port number) or only the port GUID (entity `0x<guid>`, `0x<guid>:all`);
sysfs names the device (`mlx5_0`, `mlx5_0:2`); so does ibstat (`CA 'mlx4_0'` ... `Port 2:` -> `mlx4_0:2`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.fabric.ib_pma import (
    LEGACY_BITS,
    NO_PMA,
    PERFQUERY_MAP,
    PERFQUERY_SELECTORS,
    SYSFS_MAP,
    WORD_COUNTERS,
)
from synestra_cli.formats.fabric.ibnetdiscover import guid, node_names
from synestra_cli.formats.snapshot import MetricRows, fallback_host, snake, snapshot_time, to_float

# `# Port counters:`, `# Port extended counters:` (-x), `# PortRcvErrorDetails counters:` (-E),
# `# PortXmitDiscardDetails counters:` (-D): perfquery.c prints each attribute's name before `counters`.
PQ_HEADER = re.compile(r"^# Port\w*(?: extended)? counters: Lid (\d+) (?:port (\d+)|all ports)")
PQ_COMMAND = re.compile(r"perfquery\b.*?(?:-C|--Ca)[ =]?(\S+)")
PQ_FIELD = re.compile(r"^(\w+):\.*(\S+)\s*$")
IQE_NODE = re.compile(r'^Errors for (?:(0x[0-9a-fA-F]+) )?"([^"]*)"')
IQE_PORT = re.compile(r"^\s*GUID (0x[0-9a-fA-F]+) port (\d+|ALL):(.*)$")
IQE_COUNTER = re.compile(r"\[(\w+) == (\d+)(?: \([^)]*\))?\]")
IQE_DECORATIVE = re.compile(r"^\s*(?:Link info:.*|##.*|Data Counters for .*|ibwarn:.*|)$")
SYSFS_LINE = re.compile(r"^(?:\S*?/infiniband/)?([\w-]+)/(?:ports/(\d+)/)?([\w/]+?):\s?(.*)$")
PQ_SNIFF = re.compile(r"^# Port\w*(?: extended)? counters: Lid \d+", re.MULTILINE)
IQE_SNIFF = re.compile(r"^\s*GUID 0x[0-9a-fA-F]+ port (?:\d+|ALL): \[\w+ == \d+", re.MULTILINE)
SYSFS_SNIFF = re.compile(r"^(?:\S*?/infiniband/)?[\w-]+/ports/\d+/(?:hw_)?counters/\w+:", re.MULTILINE)
# ibstat (infiniband-diags ibstat.c) prints the logical and physical port states by name; the numbers are the
# PortInfo codes sysfs prints before them (`4: ACTIVE`, `5: LinkUp`).
IBSTAT_STATES = {"down": 1, "initializing": 2, "init": 2, "armed": 3, "active": 4, "active_defer": 5}
IBSTAT_PHYS_STATES = {
    "sleep": 1,
    "polling": 2,
    "disabled": 3,
    "portconfigurationtraining": 4,
    "linkup": 5,
    "linkerrorrecovery": 6,
    "phytest": 7,
}
IBSTAT_CA = re.compile(r"^\s*CA '([^']+)'\s*$")
IBSTAT_PORT = re.compile(r"^\s+Port (\d+):\s*$")
IBSTAT_FIELD = re.compile(r"^\s+([A-Za-z][\w ]*?):\s*(.*?)\s*$")
# What is printed around ibstat's output when it is pasted: umad diagnostics, `set -x` traces, shell prompts.
IBSTAT_NOISE = re.compile(r"^\s*(?:ib(?:warn|panic|debug|error): .*|\+ .*|\S*[$#] .*|)$")
IBSTAT_SNIFF = re.compile(r"^\s*CA '[^']+'\s*\n(?:\s+[A-Za-z][\w ]*:.*\n)*?\s+Port \d+:\s*\n\s+State: ", re.MULTILINE)


Dialect = Callable[[LoadContext, list[str], "Sink"], None]  # one export's reader


def _dialect(head: str) -> Dialect | None:
    # each pattern only where its literal part occurs: every file's head is sniffed with these
    if "CA '" in head and IBSTAT_SNIFF.search(head):
        return _ibstat
    if "# Port" in head and PQ_SNIFF.search(head):
        return _perfquery
    if "GUID 0x" in head and IQE_SNIFF.search(head):
        return _ibqueryerrors
    return _sysfs if "/ports/" in head and SYSFS_SNIFF.search(head) else None


def sniff(head: str) -> float:
    return 0.95 if _dialect(head) else 0.0


def port_entity(base: str, port: str | None) -> str:
    """mlx5_0 for port 1, mlx5_0:2 for other ports, mlx5_0:all for the all-ports aggregate."""
    if port in (None, "ALL", "255"):
        return f"{base}:all"
    return base if port == "1" else f"{base}:{port}"


@dataclass
class Sink:
    """One file's destination: its rows, capture time, header line (not data) and rejects."""

    rows: MetricRows
    ts: datetime
    skip: int
    result: LoadResult
    no_pma: int = 0
    saturated: list[str] = field(default_factory=list)

    def counter(
        self,
        host: str | None,
        entity: str | None,
        name: str,
        text: str,
        naming: tuple[dict[str, str], str],
        at: tuple[int, str],
    ) -> None:
        """Add counter `name` (canonical if `naming`'s map knows it, else prefix + snake name)."""
        if text.strip() == NO_PMA:
            self.no_pma += 1  # no data, not a malformed line
            return
        if not text.strip().isdigit():
            self.result.reject(at[0], f"counter {name} is not a non-negative integer", at[1])
            return
        mapping, prefix = naming
        metric = mapping.get(name, prefix + snake(name))
        if metric in LEGACY_BITS and int(text) == 2 ** LEGACY_BITS[metric] - 1:
            self.saturated.append(f"{entity} {name}={text}")
            return
        self.rows.add(self.ts, host, entity, metric, int(text) * (4.0 if metric in WORD_COUNTERS else 1.0))

    def notes(self) -> list[str]:
        out = []
        if self.no_pma:
            out.append(f"{self.no_pma} counters read `{NO_PMA}` (the device has no performance agent): no data")
        if self.saturated:
            out.append(
                f"{len(self.saturated)} legacy counters stuck at their maximum (saturated, no count nor "
                f"rate): {', '.join(self.saturated[:5])}{' ...' if len(self.saturated) > 5 else ''}"
            )
        return out


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ctx.text_with_command().splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    sink = Sink(MetricRows(), ts, header_line, result)
    (_dialect("\n".join(lines[:200])) or _sysfs)(ctx, lines, sink)
    result.notes += sink.notes()
    result.rows = sink.rows.write(ctx)
    return result


def _perfquery(ctx: LoadContext, lines: list[str], sink: Sink) -> None:
    host, ca, entity = fallback_host(ctx, sink.result), None, None
    for lineno, line in enumerate(lines, start=1):
        header, field, command = PQ_HEADER.match(line), PQ_FIELD.match(line), PQ_COMMAND.search(line)
        if header:
            entity = port_entity(ca or f"lid{header.group(1)}", header.group(2))
        elif command:
            ca = command.group(1)  # an echoed `perfquery -C mlx5_0 ...` names the HCA
        elif lineno == sink.skip or not line.strip() or line.startswith("#"):
            continue
        elif not field or entity is None:
            sink.result.reject(lineno, "not a perfquery `Name:....value` line after its `# Port` header", line)
        elif field.group(1) not in PERFQUERY_SELECTORS:
            sink.counter(host, entity, field.group(1), field.group(2), (PERFQUERY_MAP, "ib_pma_"), (lineno, line))


def _ibqueryerrors(ctx: LoadContext, lines: list[str], sink: Sink) -> None:
    default_host = fallback_host(ctx, sink.result)
    named, nic = None, None  # what the last `Errors for ... "<description>"` line names
    for lineno, line in enumerate(lines, start=1):
        node, port = IQE_NODE.match(line), IQE_PORT.match(line)
        if node:
            named, nic = node_names(node.group(2))
        elif port:
            counters = IQE_COUNTER.findall(port.group(3))
            if not counters:
                sink.result.reject(lineno, "ibqueryerrors port line without [Counter == N] fields", line)
            entity = _iqe_entity(named, nic, port.group(1), port.group(2))
            for name, value in counters:
                sink.counter(named or default_host, entity, name, value, (PERFQUERY_MAP, "ib_pma_"), (lineno, line))
        elif lineno != sink.skip and not IQE_DECORATIVE.match(line):
            sink.result.reject(lineno, "not an ibqueryerrors node, port or summary line", line)


def _iqe_entity(named_host: str | None, nic: str | None, port_guid: str, port: str) -> str:
    """`mlx5_0[:P]` for a CA named "host mlx5_0"; the port number for a named switch; else the port GUID."""
    if nic:
        return port_entity(nic, port)
    if named_host:
        return port.lower()  # switch ports are named by number, as switch metrics spell them
    return port_entity(guid(port_guid), port)


def _sysfs(ctx: LoadContext, lines: list[str], sink: Sink) -> None:
    parsed = [(n, SYSFS_LINE.match(line), line) for n, line in enumerate(lines, start=1) if line.strip()]
    descs = {m.group(1): m.group(4) for _, m, _ in parsed if m and m.group(3) == "node_desc"}
    fallback = None if descs else fallback_host(ctx, sink.result)
    for lineno, m, line in parsed:
        if lineno == sink.skip:
            continue
        if not m:
            sink.result.reject(lineno, "not a `<device>/<path>: <value>` sysfs line", line)
            continue
        device, port, path, value = m.groups()
        if port is None:
            continue  # device attributes (fw_ver, board_id, node_desc): identity, not samples
        host, entity = node_names(descs.get(device))[0] or fallback, port_entity(device, port)
        kind, _, name = path.rpartition("/")
        if kind in ("counters", "hw_counters"):
            naming = (SYSFS_MAP, "ib_sysfs_") if kind == "counters" else ({}, "ib_hw_")
            sink.counter(host, entity, name, value, naming, (lineno, line))
        else:
            _port_attribute(sink, host, entity, path, value)


def _port_attribute(sink: Sink, host: str | None, entity: str | None, name: str, value: str) -> None:
    """state `4: ACTIVE`, phys_state `5: LinkUp`, rate `400 Gb/sec (4X NDR)`; others are identity."""
    metric = {"state": "ib_port_state_id", "phys_state": "ib_port_physical_state_id"}.get(name)
    number = to_float(value.split(":")[0]) if metric else None
    rate = re.match(r"([\d.]+) Gb/sec", value) if name == "rate" else None
    if metric and number is not None:
        sink.rows.add(sink.ts, host, entity, metric, number)
    elif rate:
        sink.rows.add(sink.ts, host, entity, "ib_port_rate_bytes_per_second", float(rate.group(1)) * 1e9 / 8)


def _ibstat(ctx: LoadContext, lines: list[str], sink: Sink) -> None:
    """`CA '<name>'` blocks, each with `Port N:` sub-blocks of `State:`, `Physical state:` and `Rate:` (Gb/s).

    CA and port attributes (type, firmware, GUIDs, LIDs, capability mask, link layer) are identity, not samples.
    """
    host, ca, entity = fallback_host(ctx, sink.result), None, None
    for lineno, line in enumerate(lines, start=1):
        head, port, field = IBSTAT_CA.match(line), IBSTAT_PORT.match(line), IBSTAT_FIELD.match(line)
        if head:
            ca, entity = head.group(1), None
        elif port and ca:
            entity = port_entity(ca, port.group(1))
        elif lineno == sink.skip or IBSTAT_NOISE.match(line):
            continue
        elif not field or ca is None:
            sink.result.reject(lineno, "not an ibstat `CA '<name>'`, `Port N:` or `Name: value` line", line)
        elif entity is not None:
            _ibstat_port_field(sink, host, entity, field.group(1).lower(), field.group(2), (lineno, line))


def _ibstat_port_field(sink: Sink, host: str | None, entity: str, name: str, value: str, at: tuple[int, str]) -> None:
    codes = {
        "state": ("ib_port_state_id", IBSTAT_STATES),
        "physical state": ("ib_port_physical_state_id", IBSTAT_PHYS_STATES),
    }.get(name)
    if codes:
        code = codes[1].get(value.lower())
        if code is None:
            sink.result.reject(at[0], f"unknown ibstat {name} {value!r}", at[1])
        else:
            sink.rows.add(sink.ts, host, entity, codes[0], float(code))
    elif name == "rate":
        gbps = to_float(value)
        if gbps is None:
            sink.result.reject(at[0], f"ibstat rate {value!r} is not a number of Gb/s", at[1])
        else:
            sink.rows.add(sink.ts, host, entity, "ib_port_rate_bytes_per_second", gbps * 1e9 / 8)


FORMAT = Format(
    "ib_counters",
    "InfiniBand port counters: perfquery [-x], ibqueryerrors, /sys/class/infiniband dump; ibstat port states",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.95,
    priority=100,
)
