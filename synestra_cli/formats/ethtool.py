"""`ethtool -S <netdev>`: NIC statistics, one `     name: value` line each, cumulative since driver load.

The output names neither host nor interface. The interface is taken from an echoed command line
(`$ ethtool -S ens1f0np0` or `# ethtool -S ...`) when the capture has one, so several captures may be
concatenated; otherwise the entity is NULL. mlx5 physical-port counters with a canonical twin are
renamed (FEC-corrected bits, PCS symbol errors, link-down events); every other counter is kept as
`eth_<name>` (e.g. `eth_rx_crc_errors_phy`, `eth_rx_discards_phy`). Per-queue lines (`[0]: rx_bytes: N`,
bnx2x) are that queue's counters: entity `<netdev>/q<N>`.
"""

from __future__ import annotations

import re

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import MetricRows, fallback_host, snapshot_time, to_float

# kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst
CANONICAL: dict[str, str] = {
    "rx_corrected_bits_phy": "port_fec_corrected_bits_total",
    "rx_pcs_symbol_err_phy": "port_symbol_errors_total",  # symbol errors FEC did not correct
    "link_down_events_phy": "port_link_down_events_total",
}
HEADER = re.compile(r"^NIC statistics:\s*$")
# The echoed command, after any shell prompt (`$ `, `# `, `[root@node-1 ~]# `).
COMMAND = re.compile(r"^\s*(?:.*?[$#]\s*)?(?:sudo\s+)?ethtool\s+(?:-S|--statistics)\s+(\S+)")
# `     name: value`, or a per-queue `     [0]: rx_bytes: 79656136793` (bnx2x, qede): that queue's counter.
STAT = re.compile(r"^\s+(?:\[(\d+)\]:\s*)?([\w.\-\[\]]+):\s*(-?\d+)\s*$")


def sniff(head: str) -> float:
    lines = head.lstrip().splitlines()[:4]
    if any(HEADER.match(line) for line in lines) and any(STAT.match(line) for line in head.splitlines()[1:6]):
        return 0.9
    return 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ctx.read_text().splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    host = fallback_host(ctx, result)
    entity: str | None = None
    rows = MetricRows()
    for lineno, line in enumerate(lines, start=1):
        command, stat = COMMAND.match(line), STAT.match(line)
        if command:
            entity = command.group(1)
        elif stat:
            queue, name, value = stat.groups()
            if queue is None:
                rows.add(ts, host, entity, CANONICAL.get(name, f"eth_{name}"), to_float(value))
            else:  # a queue's counter: the queue is part of the entity (`ens4f1/q0`), the name stays the driver's
                rows.add(ts, host, f"{entity or ''}/q{queue}", f"eth_{name}", to_float(value))
        elif lineno != header_line and line.strip() and not HEADER.match(line):
            result.reject(lineno, "not an ethtool -S `name: value` line", line)
    if entity is None and len(rows):
        result.notes.append(f"{ctx.display}: ethtool -S does not name the interface; entity stored as NULL")
    result.rows = rows.write(ctx)
    return result


FORMAT = Format(
    "ethtool_stats",
    "ethtool -S NIC statistics (mlx5 and others)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.9,
)
