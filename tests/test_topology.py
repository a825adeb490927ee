"""Topology: ibnetdiscover output and the host,nic,switch,switch_port[,rack] CSV."""

from __future__ import annotations

import pytest
from conftest import REAL_SAMPLES
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.fabric import ibnetdiscover, topology_csv
from synestra_cli.ingest import ingest_file
from synestra_cli.store.connect import memory_store


def topology(conn):
    return conn.execute("SELECT host, nic, switch, switch_port, rack FROM topology ORDER BY ALL").fetchall()


def test_ibnetdiscover_man_page_example_gives_one_row_per_ca_port(conn):
    path = REAL_SAMPLES / "fabric" / "rdma-core_man_ibnetdiscover_topology-example.txt"
    report = ingest_file(conn, path, IngestOptions())
    assert report.format == "ibnetdiscover"
    # Vendor default descriptions ("MT23108 InfiniHost ...", "ISR9024 Voltaire") name no host or
    # switch: node GUIDs stand in, and the CA port GUID stands in for the NIC.
    assert topology(conn) == [
        ("0x0008f10403960558", "0x0008f10403960559", "0x005442ba00003080", "12", None),
        ("0x0008f10403960558", "0x0008f1040396055a", "0x005442ba00003080", "8", None),
        ("0x0008f10403960984", "0x0008f10403960985", "0x0008f10400410015", "6", None),
        ("0x0008f10403961354", "0x0008f10403961355", "0x005442ba00003080", "22", None),
        ("0x005442b100004900", "0x005442b100004901", "0x0008f10400410015", "4", None),
    ]
    # the man page's closing prose is not output: rejected with its line numbers
    assert report.rejected == 4
    assert [s[0] for s in report.reject_samples] == [55, 56, 57, 58]


MODERN = (
    'Switch\t65 "S-2c5eab036832a42e"\t\t# "MF0;LAB-IBLEAF-01:MQM9701/U1" enhanced port 0 lid 2 lmc 0\n'
    '[1]\t"H-e09d7303b4f1abf5"[1](e09d7303b4f1abf5) \t\t# "sched-worker1 mlx5_0" lid 100 4xNDR\n'
    '[2]\t"H-e09d7303e640df18"[1](e09d7303e640df18) \t\t# "sched-worker1 mlx5_1" lid 101 4xNDR\n'
    '[3]\t"S-2c5eab0306555424"[1]\t\t# "MF0;LAB-IBSPINE-01:MQM9701/U1" lid 1 4xNDR\n'
    "\n"
    'Ca\t2 "H-7cfe900300e1a820"\t\t# "node01.cluster HCA-1"\n'
    '[2](7cfe900300e1a822) \t"S-2c5eab036832a42e"[7]\t\t# lid 2 lmc 0 "MF0;LAB-IBLEAF-01:MQM9701/U1" lid 2 4xNDR\n'
)


def test_ibnetdiscover_node_descriptions_name_hosts_nics_and_switches(conn, tmp_path):
    path = tmp_path / "fabric.topo"
    path.write_text(MODERN)
    report = ingest_file(conn, path, IngestOptions())
    assert (report.format, report.rejected) == ("ibnetdiscover", 0)
    assert topology(conn) == [
        ("node01", "HCA-1:2", "LAB-IBLEAF-01", "7", None),
        ("sched-worker1", "mlx5_0", "LAB-IBLEAF-01", "1", None),
        ("sched-worker1", "mlx5_1", "LAB-IBLEAF-01", "2", None),
    ]
    assert report.hosts == ["node01", "sched-worker1"]


def test_topology_csv_with_and_without_rack(conn, tmp_path):
    with_rack = tmp_path / "topo.csv"
    with_rack.write_text(
        "host,nic,switch,switch_port,rack\n"
        "gpu-001,mlx5_0,leaf-02,Ethernet21,rack-03\n"
        "# spare port\n"
        "\n"
        "gpu-002,mlx5_0,leaf-02,Ethernet22\n"
        ",mlx5_1,leaf-02,Ethernet23,rack-03\n"
        '"gpu-003",mlx5_1,leaf-03,Ethernet1,rack-04\n'
    )
    report = ingest_file(conn, with_rack, IngestOptions())
    assert (report.format, report.rows, report.rejected) == ("topology_csv", 2, 2)
    assert [s[0] for s in report.reject_samples] == [5, 6]
    no_rack = tmp_path / "topo2.csv"
    no_rack.write_text("Host, NIC, Switch, Switch_Port\ngpu-009,mlx5_3,leaf-07,12\n")
    assert ingest_file(conn, no_rack, IngestOptions()).rejected == 0
    assert topology(conn) == [
        ("gpu-001", "mlx5_0", "leaf-02", "Ethernet21", "rack-03"),
        ("gpu-003", "mlx5_1", "leaf-03", "Ethernet1", "rack-04"),
        ("gpu-009", "mlx5_3", "leaf-07", "12", None),
    ]


@pytest.mark.parametrize(
    "head",
    [
        "timestamp,host,entity,metric,value\n2026-01-01T00:00:00Z,gpu-001,mlx5_0,optics_rx_power_dbm,-3.1\n",
        "host,nic,switch\ngpu-001,mlx5_0,leaf-02\n",
        "JobID|JobName|State\n1|x|RUNNING\n",
    ],
)
def test_topology_sniffers_require_their_own_header(head):
    assert topology_csv.sniff(head) == 0.0
    assert ibnetdiscover.sniff(head) == 0.0


def test_node_description_rules():
    assert ibnetdiscover.node_names("MF0;leaf-01:MQM8700/U1") == ("leaf-01", None)
    assert ibnetdiscover.node_names("gpu-001 mlx5_3") == ("gpu-001", "mlx5_3")
    assert ibnetdiscover.node_names("MT23108 InfiniHost Mellanox Technologies") == (None, None)
    assert ibnetdiscover.node_names("ISR9024 Voltaire") == (None, None)


HOST = st.from_regex(r"[a-z][a-z0-9-]{0,8}[0-9]", fullmatch=True)


@pytest.mark.heavy
@settings(max_examples=25, deadline=None)
@given(
    cables=st.dictionaries(
        keys=st.tuples(HOST, st.integers(0, 7)),  # (host, mlx5 index)
        values=st.tuples(st.integers(1, 3), st.integers(1, 64)),  # (leaf number, leaf port)
        min_size=1,
        max_size=8,
    )
)
def test_ibnetdiscover_round_trip(cables, tmp_path_factory):
    """Rendered as ibnetdiscover prints a fabric (switch blocks, then CA blocks), every cable comes back."""
    assume(len(set(cables.values())) == len(cables))  # one cable per switch port
    sw_guid = {leaf: f"{0x248A070300000000 + leaf:016x}" for leaf in (1, 2, 3)}
    ca_guid = {key: f"{0x0C42A10300000000 + i * 16:016x}" for i, key in enumerate(sorted(cables))}
    blocks = []
    for leaf, guid in sw_guid.items():
        lines = [f'Switch\t41 "S-{guid}"\t\t# "MF0;leaf-{leaf:02d}:MQM8700/U1" enhanced port 0 lid {leaf} lmc 0']
        for (host, idx), (on_leaf, port) in sorted(cables.items()):
            if on_leaf == leaf:
                g = ca_guid[(host, idx)]
                lines.append(f'[{port}]\t"H-{g}"[1]({g}) \t\t# "{host} mlx5_{idx}" lid 9 4xNDR')
        blocks.append("\n".join(lines))
    for (host, idx), (leaf, port) in sorted(cables.items()):
        g = ca_guid[(host, idx)]
        blocks.append(
            f'Ca\t1 "H-{g}"\t\t# "{host} mlx5_{idx}"\n'
            f'[1]({g}) \t"S-{sw_guid[leaf]}"[{port}]\t\t# lid 9 lmc 0 "MF0;leaf-{leaf:02d}:MQM8700/U1" lid {leaf} 4xNDR'
        )
    path = tmp_path_factory.mktemp("ibnd") / "fabric.topo"
    path.write_text("#\n# Topology file: generated on Sun Nov 29 23:00:00 2026\n#\n\n" + "\n\n".join(blocks) + "\n")
    conn = memory_store()
    try:
        report = ingest_file(conn, path, IngestOptions())
        assert report.rejected == 0
        want = sorted((h, f"mlx5_{i}", f"leaf-{leaf:02d}", str(p), None) for (h, i), (leaf, p) in cables.items())
        assert topology(conn) == want
    finally:
        conn.close()
