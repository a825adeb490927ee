"""InfiniBand PMA port counters: `perfquery [-x]`, `ibqueryerrors`, and a /sys/class/infiniband dump.

One format, three dialects told apart by content. All three print the same PMA counters under two
spellings (perfquery `SymbolErrorCounter`, sysfs `symbol_error`); both map to `ib_port_*_total`.
PortXmitData/PortRcvData count 4-byte words and are stored in bytes. Counters with no canonical twin
are kept as `ib_pma_<snake name>` (perfquery, ibqueryerrors), `ib_sysfs_<name>` and `ib_hw_<name>`
(sysfs `counters/` and RDMA `hw_counters/`).

Entities: perfquery names only a LID (`lid10`, `lid10:2` for port 2, `lid10:all` for port 255);
ibqueryerrors names the node (`Errors for 0x... "gpu-001 mlx5_0"` -> host gpu-001, entity mlx5_0) or
only the port GUID (entity `0x<guid>`, `0x<guid>:all`); sysfs names the device (`mlx5_0`, `mlx5_0:2`).
"""

from __future__ import annotations

import re

from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.formats.ibnetdiscover import guid, node_names
from synestra_cli.formats.snapshot import MetricRows, fallback_host, snake, snapshot_time, to_float

NAME = "ib_counters"
DESCRIPTION = "InfiniBand port counters: perfquery [-x], ibqueryerrors, /sys/class/infiniband dump"

# (perfquery / ibqueryerrors name, sysfs counters/ name) -> (canonical, scale)
PMA: dict[tuple[str, str], tuple[str, float]] = {
    ("PortXmitData", "port_xmit_data"): ("ib_port_xmit_data_bytes_total", 4.0),
    ("PortRcvData", "port_rcv_data"): ("ib_port_rcv_data_bytes_total", 4.0),
    ("PortXmitPkts", "port_xmit_packets"): ("ib_port_xmit_packets_total", 1.0),
    ("PortRcvPkts", "port_rcv_packets"): ("ib_port_rcv_packets_total", 1.0),
    ("SymbolErrorCounter", "symbol_error"): ("ib_port_symbol_errors_total", 1.0),
    ("LinkErrorRecoveryCounter", "link_error_recovery"): ("ib_port_link_error_recovery_total", 1.0),
    ("LinkDownedCounter", "link_downed"): ("ib_port_link_downed_total", 1.0),
    ("PortRcvErrors", "port_rcv_errors"): ("ib_port_rcv_errors_total", 1.0),
    ("PortRcvRemotePhysicalErrors", "port_rcv_remote_physical_errors"): (
        "ib_port_rcv_remote_physical_errors_total",
        1.0,
    ),
    ("PortRcvSwitchRelayErrors", "port_rcv_switch_relay_errors"): (
        "ib_port_rcv_switch_relay_errors_total",
        1.0,
    ),
    ("PortXmitDiscards", "port_xmit_discards"): ("ib_port_xmit_discards_total", 1.0),
    ("PortXmitConstraintErrors", "port_xmit_constraint_errors"): (
        "ib_port_xmit_constraint_errors_total",
        1.0,
    ),
    ("PortRcvConstraintErrors", "port_rcv_constraint_errors"): ("ib_port_rcv_constraint_errors_total", 1.0),
    ("LocalLinkIntegrityErrors", "local_link_integrity_errors"): (
        "ib_port_local_link_integrity_errors_total",
        1.0,
    ),
    ("ExcessiveBufferOverrunErrors", "excessive_buffer_overrun_errors"): (
        "ib_port_excessive_buffer_overrun_errors_total",
        1.0,
    ),
    ("VL15Dropped", "VL15_dropped"): ("ib_port_vl15_dropped_total", 1.0),
    ("PortXmitWait", "port_xmit_wait"): ("ib_port_xmit_wait_total", 1.0),
}
PERFQUERY_MAP = {pq: target for (pq, _), target in PMA.items()}
SYSFS_MAP = {fs: target for (_, fs), target in PMA.items()}
# perfquery fields that select counters rather than count anything.
PERFQUERY_SELECTORS = {"PortSelect", "CounterSelect", "CounterSelect2"}

PQ_HEADER = re.compile(r"^# Port (?:extended )?counters: Lid (\d+) (?:port (\d+)|all ports)")
PQ_FIELD = re.compile(r"^(\w+):\.*(\S+)\s*$")
IQE_NODE = re.compile(r'^Errors for (?:(0x[0-9a-fA-F]+) )?"([^"]*)"')
IQE_PORT = re.compile(r"^\s*GUID (0x[0-9a-fA-F]+) port (\d+|ALL):(.*)$")
IQE_COUNTER = re.compile(r"\[(\w+) == (\d+)(?: \([^)]*\))?\]")
IQE_DECORATIVE = re.compile(r"^\s*(?:Link info:.*|##.*|Data Counters for .*|ibwarn:.*|)$")
SYSFS_LINE = re.compile(r"^(?:\S*?/infiniband/)?([\w-]+)/(?:ports/(\d+)/)?([\w/]+?):\s?(.*)$")
PQ_SNIFF = re.compile(r"^# Port (?:extended )?counters: Lid \d+", re.MULTILINE)
IQE_SNIFF = re.compile(r"^\s*GUID 0x[0-9a-fA-F]+ port (?:\d+|ALL): \[\w+ == \d+", re.MULTILINE)
SYSFS_SNIFF = re.compile(r"^(?:\S*?/infiniband/)?[\w-]+/ports/\d+/(?:hw_)?counters/\w+:", re.MULTILINE)


def _dialect(head: str):
    if PQ_SNIFF.search(head):
        return _perfquery
    if IQE_SNIFF.search(head):
        return _ibqueryerrors
    return _sysfs if SYSFS_SNIFF.search(head) else None


def sniff(head: str) -> float:
    return 0.95 if _dialect(head) else 0.0


def port_entity(base: str, port: str | None) -> str:
    """mlx5_0 for port 1, mlx5_0:2 for other ports, mlx5_0:all for the all-ports aggregate."""
    if port in (None, "ALL", "255"):
        return f"{base}:all"
    return base if port == "1" else f"{base}:{port}"


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ctx.read_text().splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    parser = _dialect("\n".join(lines[:200])) or _sysfs
    rows = MetricRows()
    parser(ctx, lines, header_line, ts, rows, result)
    result.rows = rows.write(ctx)
    return result


def _perfquery(ctx, lines, skip, ts, rows: MetricRows, result: LoadResult) -> None:
    host, entity = fallback_host(ctx, result), None
    for lineno, line in enumerate(lines, start=1):
        header = PQ_HEADER.match(line)
        field = PQ_FIELD.match(line)
        if header:
            entity = port_entity(f"lid{header.group(1)}", header.group(2))
        elif lineno == skip or not line.strip() or line.startswith("#"):
            continue
        elif not field or entity is None:
            result.reject(
                lineno, "not a perfquery `Name:....value` line after a `# Port counters` header", line
            )
        elif field.group(1) not in PERFQUERY_SELECTORS:
            _add_counter(
                rows,
                ts,
                host,
                entity,
                field.group(1),
                field.group(2),
                PERFQUERY_MAP,
                "ib_pma_",
                lineno,
                line,
                result,
            )


def _ibqueryerrors(ctx, lines, skip, ts, rows: MetricRows, result: LoadResult) -> None:
    default_host = fallback_host(ctx, result)
    host, nic = default_host, None
    for lineno, line in enumerate(lines, start=1):
        node, port = IQE_NODE.match(line), IQE_PORT.match(line)
        if node:
            named_host, nic = node_names(node.group(2))
            host = named_host or default_host
        elif port:
            entity = port_entity(nic or guid(port.group(1)), port.group(2))
            counters = IQE_COUNTER.findall(port.group(3))
            if not counters:
                result.reject(lineno, "ibqueryerrors port line without [Counter == N] fields", line)
            for name, value in counters:
                _add_counter(
                    rows, ts, host, entity, name, value, PERFQUERY_MAP, "ib_pma_", lineno, line, result
                )
        elif lineno != skip and not IQE_DECORATIVE.match(line):
            result.reject(lineno, "not an ibqueryerrors node, port or summary line", line)


def _sysfs(ctx, lines, skip, ts, rows: MetricRows, result: LoadResult) -> None:
    parsed = [
        (n, SYSFS_LINE.match(line), line)
        for n, line in enumerate(lines, start=1)
        if line.strip() and n != skip
    ]
    descs = {m.group(1): m.group(4) for _, m, _ in parsed if m and m.group(3) == "node_desc"}
    fallback = None if descs else fallback_host(ctx, result)
    for lineno, m, line in parsed:
        if not m:
            result.reject(lineno, "not a `<device>/<path>: <value>` sysfs line", line)
            continue
        device, port, path, value = m.groups()
        host = node_names(descs.get(device))[0] or fallback
        if port is None:
            continue  # device attributes (fw_ver, board_id, node_desc): identity, not metrics
        entity = port_entity(device, port)
        kind, _, name = path.rpartition("/")
        if kind == "counters":
            _add_counter(rows, ts, host, entity, name, value, SYSFS_MAP, "ib_sysfs_", lineno, line, result)
        elif kind == "hw_counters":
            _add_counter(rows, ts, host, entity, name, value, {}, "ib_hw_", lineno, line, result)
        else:
            _add_port_attribute(rows, ts, host, entity, path, value)


def _add_port_attribute(rows: MetricRows, ts, host, entity, name: str, value: str) -> None:
    """state `4: ACTIVE`, phys_state `5: LinkUp`, rate `400 Gb/sec (4X NDR)`; link_layer etc. are identity."""
    number = to_float(value.split(":")[0]) if name in ("state", "phys_state") else None
    if name == "state" and number is not None:
        rows.add(ts, host, entity, "ib_port_state_id", number)
    elif name == "phys_state" and number is not None:
        rows.add(ts, host, entity, "ib_port_physical_state_id", number)
    elif name == "rate":
        rate = re.match(r"([\d.]+) Gb/sec", value)
        if rate:
            rows.add(ts, host, entity, "ib_port_rate_bytes_per_second", float(rate.group(1)) * 1e9 / 8)


def _add_counter(
    rows: MetricRows,
    ts,
    host,
    entity,
    name: str,
    text: str,
    mapping: dict,
    prefix: str,
    lineno: int,
    line: str,
    result: LoadResult,
) -> None:
    value = to_float(text)
    if value is None or not text.strip().isdigit():
        result.reject(lineno, f"counter {name} is not a non-negative integer", line)
        return
    metric, scale = mapping.get(name, (prefix + snake(name), 1.0))
    rows.add(ts, host, entity, metric, value * scale)
