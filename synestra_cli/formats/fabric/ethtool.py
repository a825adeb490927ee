"""`ethtool -S <netdev>`: NIC statistics, one `     name: value` line each, cumulative since driver load.

The output names neither host nor interface. The interface is taken from an echoed command line
(`$ ethtool -S ens1f0np0` or `# ethtool -S ...`, also one the envelope took off a paste) when the capture has
one, so several captures may be concatenated; otherwise the entity is NULL. mlx5 physical-port counters with
a canonical twin are renamed (FEC-corrected bits, PCS symbol errors, link-down events); every other counter is
kept as `eth_<name>` (e.g. `eth_rx_crc_errors_phy`, `eth_rx_discards_phy`). A queue's counters are that
queue's, whatever the driver calls them: entity `<netdev>/q<N>`, name without the queue (QUEUE_NAMES).
The output of another command pasted before it (`ethtool -i`: driver, bus-info) is skipped, not rejected.
"""

from __future__ import annotations

import re
from datetime import datetime

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import MetricRows, fallback_host, snapshot_time, to_float

# kernel Documentation/networking/device_drivers/ethernet/mellanox/mlx5/counters.rst
CANONICAL: dict[str, str] = {
    "rx_corrected_bits_phy": "port_fec_corrected_bits_total",
    "rx_pcs_symbol_err_phy": "port_symbol_errors_total",  # symbol errors FEC did not correct
    "link_down_events_phy": "port_link_down_events_total",
}
HEADER = re.compile(r"^NIC statistics:\s*$")
# The echoed command, after any shell prompt (`$ `, `# `, `[root@node-1 ~]# `, `user@host:~$ `).
COMMAND = re.compile(r"^\s*(?:.*?[$#]\s*)?(?:sudo\s+)?ethtool\s+(?:-S|--statistics)\s+(\S+)")
OTHER_COMMAND = re.compile(r"^\s*(?:\S*[$#]\s*|\S+@\S+\s*[$#]\s*)(?:sudo\s+)?[a-z][\w.-]*(?:\s|$)")
# `     name: value`, or a per-queue `     [0]: rx_bytes: 79656136793` (bnx2x, qede) or `     rxq0: rx_bytes: N`
# (be2net): that queue's counter.
STAT = re.compile(r"^\s+(?:\[(\d+)\]:\s*|(?:rx|tx)q(\d+):\s*)?([\w.\-\[\]]+):\s*(-?\d+)\s*$")
# A queue in the counter's own name: mlx5 `rx0_packets`/`tx3_xmit_more`/`ch0_events`, ena `queue_0_tx_cnt`,
# virtio/ixgbe `rx_queue_0_packets`, sfc/i40e `rx-0.rx_packets`. Sizes (`rx_1024_to_1518`) are not queues.
QUEUE_NAMES = (
    re.compile(r"^(?P<dir>rx|tx|ch|xdp)(?P<q>\d{1,4})_(?P<rest>(?!to_)[a-z]\w*)$"),
    re.compile(r"^(?:(?P<dir>rx|tx)_)?queue_(?P<q>\d{1,4})_(?P<rest>\w+)$"),
    re.compile(r"^(?P<dir>rx|tx)-(?P<q>\d{1,4})\.(?P<rest>\w+)$"),
)


def sniff(head: str) -> float:
    lines = head.splitlines()
    stats = sum(1 for line in lines[:200] if STAT.match(line))
    header = next((i for i, line in enumerate(lines[:200]) if HEADER.match(line)), None)
    if header is not None and any(STAT.match(line) for line in lines[header + 1 : header + 6]):
        return 0.9
    # `ethtool -S eth0 | grep xdp`: counters without their header, all of them
    filled = [line for line in lines[:200] if line.strip()]
    if len(filled) >= 5 and stats == len(filled) and sum("rx" in x or "tx" in x for x in filled) * 2 > len(filled):
        return 0.6
    return 0.0


def _queue(name: str) -> tuple[str, str] | None:
    """(queue, counter name without it) when the driver put the queue in the name."""
    for rx in QUEUE_NAMES:
        m = rx.match(name)
        if m:
            rest, direction = m.group("rest"), m.group("dir")
            named = direction and not rest.startswith(("rx_", "tx_"))  # `rx-0.rx_packets` says it twice
            return m.group("q"), f"{direction}_{rest}" if named else rest
    return None


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ctx.text_with_command().splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    host = fallback_host(ctx, result)
    entity: str | None = None
    other = False  # inside the output of another echoed command (`ethtool -i eth0`)
    rows = MetricRows()
    for lineno, line in enumerate(lines, start=1):
        command, stat = COMMAND.match(line), STAT.match(line)
        if command:
            entity, other = command.group(1), False
        elif HEADER.match(line):
            other = False
        elif OTHER_COMMAND.match(line) and not stat:
            other = True
        elif stat and not other:
            _add(rows, ts, host, entity, *stat.groups())
        elif lineno != header_line and line.strip() and not other:
            result.reject(lineno, "not an ethtool -S `name: value` line", line)
    if entity is None and len(rows):
        result.notes.append(f"{ctx.display}: ethtool -S does not name the interface; entity stored as NULL")
    result.rows = rows.write(ctx)
    return result


def _add(
    rows: MetricRows,
    ts: datetime,
    host: str | None,
    entity: str | None,
    bracket_q: str | None,
    prefix_q: str | None,
    name: str,
    value: str,
) -> None:
    queue = bracket_q or prefix_q
    if queue is None and (found := _queue(name)):
        queue, name = found
    if queue is None:
        rows.add(ts, host, entity, CANONICAL.get(name, f"eth_{name}"), to_float(value))
    else:  # a queue's counter: the queue is part of the entity (`ens4f1/q0`), the name stays the driver's
        rows.add(ts, host, f"{entity or ''}/q{queue}", f"eth_{name}", to_float(value))


FORMAT = Format(
    "ethtool_stats",
    "ethtool -S NIC statistics (mlx5 and others)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.9,
    priority=90,
)
