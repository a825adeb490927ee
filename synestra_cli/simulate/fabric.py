"""Fabric telemetry: node_exporter InfiniBand HCA counters, snmp_exporter IF-MIB leaf counters,
transceiver optics as long CSV, and the topology CSV.

A host NIC and its leaf port see the same physics: a degraded optic raises receive errors and
transmit discards on both ends while the link stays up; a flap zeroes traffic and bumps link_downed.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synestra_cli.simulate import promtext
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.faults import Effect
from synestra_cli.simulate.load import COMPUTE, IO, HostLoad, cumulative, effect_mask, onsets, reboots
from synestra_cli.simulate.promtext import sink
from synestra_cli.simulate.telemetry import COMPUTE_TRAFFIC_BPS, SOURCES, _rng

MTU_BYTES = 4096
SNMP_SOURCE = SOURCES["snmp"]


def nic_frame(
    cl: Cluster, host: str, ts: np.ndarray, load: HostLoad, effects: list[Effect], rng: np.random.Generator
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Per-NIC rates and cumulative counters of one host, shape (nics, T), and the present mask."""
    k, n = cl.nics_per_host, ts.size
    state, factor = load.at(ts)
    dts = np.diff(ts, prepend=ts[0] - (ts[1] - ts[0] if n > 1 else 30.0))
    down, reset = reboots(ts, effects)
    flap, _ = effect_mask(ts, effects, "link_down", k)
    lossy, err_rate = effect_mask(ts, effects, "link_errors", k, lambda e: e.value > 0)  # a degraded optic
    noisy, _ = effect_mask(ts, effects, "link_errors", k, lambda e: e.value < 0)  # noisy but healthy
    bps = np.where(state == COMPUTE, COMPUTE_TRAFFIC_BPS / factor, np.where(state == IO, 2e9, 4e4))
    bps = bps[None, :] * rng.uniform(0.97, 1.03, (k, n)) * ~flap
    f = {"rx_bytes": bps * dts, "tx_bytes": bps * dts * rng.uniform(0.99, 1.01, (k, n))}
    f["symbol_errors"] = rng.poisson(np.where(lossy, err_rate, np.where(noisy, 0.002, 0.0)) * dts)
    f["rcv_errors"] = rng.poisson(np.where(lossy, 0.6 * err_rate, 0.0) * dts)
    f["xmit_discards"] = rng.poisson(np.where(lossy, 0.3 * err_rate, 0.0) * dts + 2.0 * flap)
    f["link_downed"] = onsets(ts, effects, "link_down", k)
    f["link_recovery"] = rng.poisson(np.where(lossy, 0.002, 0.0) * dts)
    f["xmit_wait"] = rng.poisson(np.where(lossy, 4e5, 2e3) * dts * (bps > 1e6))
    counters = {
        name: cumulative(inc, reset, rng.uniform(0, 1e12 if "bytes" in name else 3, k).round())
        for name, inc in f.items()
    }
    counters["rx_packets"] = np.floor(counters["rx_bytes"] / MTU_BYTES)
    counters["tx_packets"] = np.floor(counters["tx_bytes"] / MTU_BYTES)
    counters["state"] = np.where(flap, 1, 4)
    counters["phys_state"] = np.where(flap, 2, 5)
    return counters, np.broadcast_to(~down, (k, n))


IB_FAMILIES = [  # (node_exporter name, frame key, type, help as node_exporter prints it)
    (
        "node_infiniband_link_downed_total",
        "link_downed",
        "counter",
        "Number of times the link failed to recover from an error state and went down",
    ),
    (
        "node_infiniband_link_error_recovery_total",
        "link_recovery",
        "counter",
        "Number of times the link successfully recovered from an error state",
    ),
    (
        "node_infiniband_physical_state_id",
        "phys_state",
        "gauge",
        "Physical state of the InfiniBand port (0: no change, 1: sleep, 2: polling, 3: disable, 4: shift, "
        "5: link up, 6: link error recover, 7: phytest)",
    ),
    (
        "node_infiniband_port_data_received_bytes_total",
        "rx_bytes",
        "counter",
        "Number of data octets received on all links",
    ),
    (
        "node_infiniband_port_data_transmitted_bytes_total",
        "tx_bytes",
        "counter",
        "Number of data octets transmitted on all links",
    ),
    (
        "node_infiniband_port_discards_transmitted_total",
        "xmit_discards",
        "counter",
        "Number of outbound packets discarded by the port because the port is down or congested",
    ),
    (
        "node_infiniband_port_errors_received_total",
        "rcv_errors",
        "counter",
        "Number of packets containing an error that were received on this port",
    ),
    (
        "node_infiniband_port_packets_received_total",
        "rx_packets",
        "counter",
        "Number of packets received on all VLs by this port (including errors)",
    ),
    (
        "node_infiniband_port_packets_transmitted_total",
        "tx_packets",
        "counter",
        "Number of packets transmitted on all VLs from this port (including errors)",
    ),
    (
        "node_infiniband_port_transmit_wait_total",
        "xmit_wait",
        "counter",
        "Number of ticks during which the port had data to transmit but no data was sent during the entire tick",
    ),
    (
        "node_infiniband_state_id",
        "state",
        "gauge",
        "State of the InfiniBand port (0: no change, 1: down, 2: init, 3: armed, 4: active, 5: act defer)",
    ),
    (
        "node_infiniband_symbol_error_total",
        "symbol_errors",
        "counter",
        "Number of minor link errors detected on one or more physical lanes.",
    ),
]


def write_node_exporter(
    out: BinaryIO, cl: Cluster, host: str, ts: np.ndarray, load: HostLoad, effects: list[Effect], seed: int
) -> int:
    frame, present = nic_frame(cl, host, ts, load, effects, _rng(seed, "ib", cl.host_index(host)))
    labels = [f'{{device="mlx5_{i}",instance="{host}:9100",job="node",port="1"}}' for i in range(cl.nics_per_host)]
    tsb = np.broadcast_to(ts, present.shape)
    return sum(
        promtext.family(out, name, kind, help_, labels, frame[key], tsb, present, True)
        for name, key, kind, help_ in IB_FAMILIES
    )


IF_FAMILIES = [  # (IF-MIB object, frame key seen from the switch, help as snmp_exporter prints it)
    (
        "ifHCInOctets",
        "tx_bytes",
        "The total number of octets received on the interface, including framing characters - 1.3.6.1.2.1.31.1.1.1.6",
    ),
    (
        "ifHCOutOctets",
        "rx_bytes",
        "The total number of octets transmitted out of the interface, including "
        "framing characters - 1.3.6.1.2.1.31.1.1.1.10",
    ),
    (
        "ifInErrors",
        "rcv_errors",
        "For packet-oriented interfaces, the number of inbound packets that contained "
        "errors preventing them from being deliverable to a higher-layer protocol - 1.3.6.1.2.1.2.2.1.14",
    ),
    (
        "ifOutDiscards",
        "xmit_discards",
        "The number of outbound packets which were chosen to be discarded even "
        "though no errors had been detected to prevent their being transmitted - 1.3.6.1.2.1.2.2.1.19",
    ),
    ("ifOperStatus", "oper", "The current operational state of the interface - 1.3.6.1.2.1.2.2.1.8"),
]


def write_snmp(
    root: Path,
    cl: Cluster,
    t0: float,
    t1: float,
    interval: float,
    loads: dict[str, HostLoad],
    effects: dict[str, list[Effect]],
    seed: int,
    gz: bool = False,
    block: int = 64,
) -> int:
    """Every leaf's host-facing ports into ``root/<leaf>.prom``, a block of hosts at a time; the spine
    uplinks of all leaves as a Prometheus ``query_range`` answer (``spine-uplinks.query_range.json``).

    One Prometheus scrapes all leaves: each leaf's samples are the shared grid shifted by its own
    scrape offset. Each block repeats HELP/TYPE in each leaf file (a file of concatenated scrapes).
    """
    grid = t0 + np.arange(int((t1 - t0) // interval)) * interval
    offsets = [np.random.default_rng([seed, SNMP_SOURCE, leaf]).uniform(0.0, 3.0) for leaf in range(cl.nics_per_host)]
    uplink = {key: np.zeros((cl.nics_per_host, grid.size)) for key in ("tx_bytes", "rx_bytes")}
    n = 0
    with ExitStack() as stack:
        files = [stack.enter_context(sink(root / f"{cl.leaf(leaf)}.prom", gz)) for leaf in range(cl.nics_per_host)]
        for lo in range(0, cl.nodes, block):
            hosts = cl.hosts[lo : lo + block]
            frames = [_switch_side(cl, h, grid, loads[h], effects.get(h, []), seed) for h in hosts]
            for key, total in uplink.items():
                total += sum(fr[key] for fr in frames)
            for leaf, out in enumerate(files):
                ports = [(h, cl.switch_port(h), cl.host_index(h) + 1, f"{h}:mlx5_{leaf}") for h in hosts]
                rows = {key: np.stack([fr[key][leaf] for fr in frames]) for _, key, _ in IF_FAMILIES}
                n += _if_block(out, cl.leaf(leaf), ports, rows, grid + offsets[leaf])
    series = [
        ser for leaf in range(cl.nics_per_host) for ser in _uplinks(cl, leaf, {k: v[leaf] for k, v in uplink.items()})
    ]
    with sink(root / "spine-uplinks.query_range.json", gz) as fh:
        n += promtext.query_range(fh, series, grid)
    return n


def _if_block(
    out: BinaryIO, leaf: str, ports: list[tuple[str, str, int, str]], rows: dict[str, np.ndarray], ts: np.ndarray
) -> int:
    """IF-MIB families for some ports of one leaf: ports are (host, ifName, ifIndex, ifAlias)."""
    labels = [
        f'{{ifAlias="{alias}",ifDescr="{name}",ifIndex="{index}",ifName="{name}",instance="{leaf}",job="snmp"}}'
        for _, name, index, alias in ports
    ]
    tsb = np.broadcast_to(ts, (len(ports), ts.size))
    return sum(
        promtext.family(out, obj, "gauge" if key == "oper" else "counter", help_, labels, rows[key], tsb, None, True)
        for obj, key, help_ in IF_FAMILIES
    )


def _uplinks(cl: Cluster, leaf: int, hosts_total: dict[str, np.ndarray]) -> list[tuple[dict[str, str], np.ndarray]]:
    """A leaf's spine uplinks as (labels, values): the share of its hosts' traffic that leaves the rail
    (pipeline and cross-rail collectives), spread over the uplinks; clean and up (the simulated faults
    are host links)."""
    share = 0.08 / len(cl.uplink_ports())
    values = {
        "tx_bytes": hosts_total["rx_bytes"] * share,  # ifHCInOctets: from the spine, for the hosts
        "rx_bytes": hosts_total["tx_bytes"] * share,
        "rcv_errors": np.zeros_like(hosts_total["tx_bytes"]),
        "xmit_discards": np.zeros_like(hosts_total["tx_bytes"]),
        "oper": np.ones_like(hosts_total["tx_bytes"]),
    }
    out = []
    for u, name in enumerate(cl.uplink_ports()):
        labels = {
            "ifAlias": f"spine-{u + 1:02d}:Ethernet{4 * leaf}",
            "ifDescr": name,
            "ifIndex": str(cl.nodes + u + 1),
            "ifName": name,
            "instance": cl.leaf(leaf),
            "job": "snmp",
        }
        out += [({"__name__": obj, **labels}, np.rint(values[key])) for obj, key, _ in IF_FAMILIES]
    return out


def _switch_side(
    cl: Cluster, host: str, ts: np.ndarray, load: HostLoad, effects: list[Effect], seed: int
) -> dict[str, np.ndarray]:
    """The leaf ports of a host's NICs: their own counters, which the host's reboot does not reset."""
    mine = [e for e in effects if e.kind != "reboot"]
    frame, _ = nic_frame(cl, host, ts, load, mine, _rng(seed, "snmp", cl.host_index(host)))
    out = {k: frame[k] for k in ("tx_bytes", "rx_bytes", "rcv_errors", "xmit_discards")}
    out["oper"] = np.where(frame["state"] == 1, 2, 1)
    return out


def write_optics(out: BinaryIO, cl: Cluster, host: str, ts: np.ndarray, effects: list[Effect], seed: int) -> int:
    """Long CSV rows ``timestamp,host,entity,metric,value`` for the host's transceivers."""
    k, n = cl.nics_per_host, ts.size
    rng = _rng(seed, "optics", cl.host_index(host))
    sagging, sag = effect_mask(ts, effects, "optic_sag", k)
    ramp = np.clip((ts[None, :] - _starts(effects, "optic_sag", k)[:, None]) / 300.0, 0, 1)
    base = rng.uniform(-1.8, -0.6, k)[:, None]
    metrics = {
        # a bent or dirty fibre: a step of ~1 dB at onset, then a slow slide over five minutes
        "optics_rx_power_dbm": base - np.where(sagging, sag * (0.3 + 0.7 * ramp), 0.0) + rng.normal(0, 0.05, (k, n)),
        "optics_tx_power_dbm": rng.uniform(-0.6, 0.4, k)[:, None] + rng.normal(0, 0.03, (k, n)),
        "optics_temp_celsius": rng.uniform(44, 52, k)[:, None] + rng.normal(0, 0.3, (k, n)),
    }
    down, reset = reboots(ts, effects)
    dts = np.diff(ts, prepend=ts[0] - (ts[1] - ts[0] if n > 1 else 60.0))
    # corrected codewords/s climb by decades with the loss (capped below the link's ~8e7 codewords/s)
    fec = np.where(sagging, np.minimum(10.0 ** (3.0 + sag * (0.3 + 0.7 * ramp)), 2e7), 800.0)
    metrics["port_fec_corrected_codewords_total"] = cumulative(rng.poisson(fec * dts), reset)
    metrics["port_fec_uncorrectable_codewords_total"] = cumulative(
        rng.poisson(np.where(sagging & (ramp > 0.5), 2.0, 0.0) * dts), reset
    )
    return _optics_rows(out, host, ts, metrics, ~down)


def _starts(effects: list[Effect], kind: str, k: int) -> np.ndarray:
    start = np.full(k, np.inf)
    for e in effects:
        if e.kind == kind and e.target is not None:
            start[e.target] = min(start[e.target], e.start)
    return start


def _optics_rows(out: BinaryIO, host: str, ts: np.ndarray, metrics: dict[str, np.ndarray], up: np.ndarray) -> int:
    iso = promtext.iso_utc(ts)
    n = 0
    for name, vals in metrics.items():
        k = vals.shape[0]
        idx_t = np.broadcast_to(np.arange(ts.size), vals.shape)[:, up].ravel()
        idx_k = np.broadcast_to(np.arange(k)[:, None], vals.shape)[:, up].ravel()
        integer = name.endswith("_total")
        cols = [
            pa.array(np.full(idx_t.size, host)),
            pc.take(pa.array([f"mlx5_{i}" for i in range(k)]), idx_k),
            pa.array(np.full(idx_t.size, name)),
            promtext.fmt_values(vals[:, up].ravel(), integer),
        ]
        n += promtext.long_csv(out, pc.take(iso, idx_t), cols)
    return n


def write_topology(out: BinaryIO, cl: Cluster) -> None:
    lines = ["host,nic,switch,switch_port,rack"] + [",".join(r) for r in cl.topology_rows()]
    out.write(("\n".join(lines) + "\n").encode())
