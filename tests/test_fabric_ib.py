"""InfiniBand counter snapshots: perfquery -x, ibqueryerrors, /sys/class/infiniband dumps."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.fabric import ib_counters
from synestra_cli.ingest import ingest_file

FABRIC = REAL_SAMPLES / "fabric"


def value(conn, metric, entity=None, host=None):
    rows = conn.execute(
        "SELECT value FROM metrics WHERE metric = ? AND entity IS NOT DISTINCT FROM ? AND host IS NOT DISTINCT FROM ?",
        [metric, entity, host],
    ).fetchall()
    assert len(rows) == 1, (metric, entity, host, rows)
    return rows[0][0]


def mtime_of(path):
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def test_perfquery_data_words_are_stored_as_bytes(conn):
    path = FABRIC / "gh-netdata-2620_perfquery-x_nonzero-data.txt"
    report = ingest_file(conn, path, IngestOptions(host="node7"))
    assert (report.format, report.rejected) == ("ib_counters", 0)
    assert value(conn, "ib_port_xmit_data_bytes_total", "lid21", "node7") == 13672645927 * 4
    assert value(conn, "ib_port_rcv_data_bytes_total", "lid21", "node7") == 2341975277576 * 4
    assert value(conn, "ib_port_rcv_packets_total", "lid21", "node7") == 2467501178
    assert value(conn, "ib_pma_port_multicast_rcv_pkts", "lid21", "node7") == 6779


def test_perfquery_echoed_command_names_the_hca(conn, tmp_path):
    src = (FABRIC / "gh-netdata-2620_perfquery-x_nonzero-data.txt").read_text()
    path = tmp_path / "pq.txt"
    path.write_text("# perfquery -x -C mlx5_1 -P 1\n" + src)
    ingest_file(conn, path, IngestOptions(host="node7"))
    assert value(conn, "ib_port_xmit_data_bytes_total", "mlx5_1", "node7") == 13672645927 * 4


def test_perfquery_without_a_date_line_takes_the_file_mtime_and_keeps_selectors_out(conn):
    path = FABRIC / "gh-infiniband-diags-16_perfquery-x_rhel75.txt"
    report = ingest_file(conn, path, IngestOptions())
    assert report.rejected == 0
    assert report.first_ts == report.last_ts == mtime_of(path)
    names = {r[0] for r in conn.execute("SELECT DISTINCT metric FROM metrics").fetchall()}
    assert "ib_port_symbol_errors_total" in names and "ib_pma_qp1_dropped" in names
    assert not {"ib_pma_port_select", "ib_pma_counter_select"} & names
    # no --host and the output names none: stored as NULL, and the report says so
    assert conn.execute("SELECT count(*) FROM metrics WHERE host IS NOT NULL").fetchone()[0] == 0
    assert any("does not name its host" in n for n in report.notes)


def test_perfquery_capture_date_line_beats_mtime(conn, tmp_path):
    src = (FABRIC / "gh-netdata-2620_perfquery-x_nonzero-data.txt").read_text()
    path = tmp_path / "pq.txt"
    path.write_text("2026-11-29T14:02:11+01:00\n" + src)
    report = ingest_file(conn, path, IngestOptions())
    assert report.rejected == 0
    assert report.first_ts == datetime(2026, 11, 29, 13, 2, 11)


def test_date_command_output_in_utc_is_a_capture_time(conn, tmp_path):
    src = (FABRIC / "gh-ucx-9590_ibqueryerrors-port-ALL.txt").read_text()
    path = tmp_path / "iqe.txt"
    path.write_text("Sun Nov 29 23:17:28 UTC 2026\n" + src)
    report = ingest_file(conn, path, IngestOptions())
    assert (report.rejected, report.first_ts) == (0, datetime(2026, 11, 29, 23, 17, 28))


def test_zoneless_date_line_is_read_in_the_timezone_option(conn, tmp_path):
    src = (FABRIC / "gh-infiniband-diags-16_perfquery-x_rhel75.txt").read_text()
    path = tmp_path / "pq.txt"
    path.write_text("# date\n2026-07-01 12:00:00\n" + src)
    report = ingest_file(conn, path, IngestOptions(timezone="Europe/Paris"))
    assert (report.rejected, report.first_ts) == (0, datetime(2026, 7, 1, 10, 0, 0))


def test_ibqueryerrors_port_all_reads_exact_counts_not_scaled_suffixes(conn):
    path = FABRIC / "gh-ucx-9590_ibqueryerrors-port-ALL.txt"
    report = ingest_file(conn, path, IngestOptions())
    assert (report.format, report.rows, report.rejected) == ("ib_counters", 4, 0)
    entity = "0x1070fd0300370ea2:all"
    assert value(conn, "ib_port_xmit_discards_total", entity) == 2846  # printed "(2.779K)"
    assert value(conn, "ib_port_xmit_wait_total", entity) == 14681376621
    assert value(conn, "ib_port_link_downed_total", entity) == 25


def test_ibqueryerrors_node_description_names_host_and_nic(conn, tmp_path):
    # Layout from rdma-core ibqueryerrors.c (reference log-formats.md C.3).
    path = tmp_path / "iqe.txt"
    path.write_text(
        'Errors for 0x0002c90300a1b2c3 "gpu-001 mlx5_0"\n'
        "   GUID 0x0002c90300a1b2c4 port 1: [SymbolErrorCounter == 12] [PortXmitWait == 339 (339)]\n"
        '       Link info:     12    1[  ] ==( 4X 53.125 Gbps Active/  LinkUp)==>  0x248a0703 5 12[ ] "leaf" ( )\n'
        "   GUID 0x0002c90300a1b2c4 port 2: [LinkDownedCounter == 3] [bogus]\n"
        "garbage line\n"
        'Errors for 0x248a070300f7a8e0 "MF0;leaf-07:MQM8700/U1"\n'
        "   GUID 0x248a070300f7a8e0 port 12: [SymbolErrorCounter == 40]\n"
        "## Summary: 2 nodes checked, 2 bad nodes found\n"
    )
    report = ingest_file(conn, path, IngestOptions())
    assert value(conn, "ib_port_symbol_errors_total", "mlx5_0", "gpu-001") == 12
    assert value(conn, "ib_port_link_downed_total", "mlx5_0:2", "gpu-001") == 3
    # a switch: host = its name, entity = the port number (as switch metrics spell ports)
    assert value(conn, "ib_port_symbol_errors_total", "12", "leaf-07") == 40
    assert report.rejected == 1
    assert report.reject_samples[0][:2] == (5, "not an ibqueryerrors node, port or summary line")


def test_sysfs_dump_counters_states_and_rate(conn):
    path = FABRIC / "gpud_sys-class-infiniband_h100_snapshot.txt"
    report = ingest_file(conn, path, IngestOptions(host="h100-01"))
    assert (report.format, report.rejected, report.hosts) == ("ib_counters", 0, ["h100-01"])
    # link_downed is an 8-bit PortCounters field: 255 is where it stopped, not a count (nor a rate)
    assert conn.execute(
        "SELECT count(*) FROM metrics WHERE metric = 'ib_port_link_downed_total' AND entity = 'mlx5_1'"
    ).fetchone() == (0,)
    assert any(
        "3 legacy counters stuck at their maximum" in n
        and "mlx5_1 link_downed=255" in n
        and "mlx5_0 excessive_buffer_overrun_errors=15" in n
        for n in report.notes
    )  # 4-bit: 15
    assert value(conn, "ib_port_link_downed_total", "mlx5_0", "h100-01") == 0
    assert value(conn, "ib_port_rcv_data_bytes_total", "mlx5_0", "h100-01") == 230539874932483 * 4
    assert value(conn, "ib_port_xmit_wait_total", "mlx5_1", "h100-01") == 2489603687
    assert value(conn, "ib_port_state_id", "mlx5_0", "h100-01") == 4
    assert value(conn, "ib_port_physical_state_id", "mlx5_0", "h100-01") == 5
    assert value(conn, "ib_port_rate_bytes_per_second", "mlx5_0", "h100-01") == 400e9 / 8
    assert value(conn, "ib_hw_roce_adp_retrans", "mlx5_1", "h100-01") == 3
    assert value(conn, "ib_sysfs_unicast_rcv_packets", "mlx5_1", "h100-01") == 317548853677


def test_sysfs_grep_dump_takes_host_from_node_desc_and_rejects_non_numbers(conn, tmp_path):
    path = tmp_path / "ib.txt"
    path.write_text(
        "/sys/class/infiniband/mlx5_3/node_desc:gpu-042 mlx5_3\n"
        "/sys/class/infiniband/mlx5_3/ports/1/counters/symbol_error:7\n"
        "/sys/class/infiniband/mlx5_3/ports/2/counters/port_xmit_data:10\n"
        "/sys/class/infiniband/mlx5_3/ports/1/counters/link_downed:n/a\n"
    )
    report = ingest_file(conn, path, IngestOptions(host="ignored"))
    assert value(conn, "ib_port_symbol_errors_total", "mlx5_3", "gpu-042") == 7
    assert value(conn, "ib_port_xmit_data_bytes_total", "mlx5_3:2", "gpu-042") == 40
    assert report.rejected == 1 and report.reject_samples[0][0] == 4


def test_canonical_metrics_written_get_catalog_rows(conn):
    ingest_file(conn, FABRIC / "gh-ucx-9590_ibqueryerrors-port-ALL.txt", IngestOptions())
    got = dict(conn.execute("SELECT metric, kind FROM metric_catalog").fetchall())
    assert got == {
        "ib_port_link_downed_total": "counter",
        "ib_port_rcv_errors_total": "counter",
        "ib_port_xmit_discards_total": "counter",
        "ib_port_xmit_wait_total": "counter",
    }


@pytest.mark.parametrize(
    "head",
    [
        "timestamp,host,entity,metric,value\n2026-01-01T00:00:00Z,a,b,c,1\n",
        'node_infiniband_link_downed_total{device="mlx4_0",port="1"} 0\n',
        "Nov 29 14:02:11 gpu-001 kernel: mlx5_core 0000:3b:00.0: Port module event\n",
    ],
)
def test_ib_counters_do_not_claim_other_formats(head):
    assert ib_counters.sniff(head) == 0.0


def test_sysfs_no_pma_values_are_no_data_not_rejects(conn, tmp_path):
    # The kernel's own text for a PMA counter without a performance agent (drivers/infiniband/core/sysfs.c:
    # `return sprintf(buf, "N/A (no PMA)\n");`), in the flattened `<device>/<path>: <value>` layout of the real dump.
    lines = (FABRIC / "gpud_sys-class-infiniband_h100_snapshot.txt").read_text().splitlines()
    lines = [ln.split(": ")[0] + ": N/A (no PMA)" if "/ports/1/counters/symbol_error" in ln else ln for ln in lines]
    path = tmp_path / "sysfs.txt"
    path.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, path, IngestOptions(host="h100-01"))
    assert report.rejected == 0
    assert any("read `N/A (no PMA)`" in n for n in report.notes)
    assert conn.execute("SELECT count(*) FROM metrics WHERE metric = 'ib_port_symbol_errors_total'").fetchone() == (0,)
    assert value(conn, "ib_port_link_downed_total", "mlx5_0", "h100-01") == 0


def port_rows(conn):
    return {
        (entity, metric): v
        for entity, metric, v in conn.execute("SELECT entity, metric, value FROM metrics WHERE host = 'n'").fetchall()
    }


def test_ibstat_ports_are_port_state_rows_named_by_ca_and_port(conn):
    # A real ConnectX-3 paste under `set -x` with verbose umad: `+ ibstat` and `ibwarn:` lines around it, tabs.
    path = FABRIC / "gh-rdma-core-pr847_ibstat_mlx4-2port_verbose.txt"
    report = ingest_file(conn, path, IngestOptions(host="n"))
    assert (report.format, report.rejected) == ("ib_counters", 0)
    assert port_rows(conn) == {
        ("mlx4_0", "ib_port_state_id"): 1,  # Port 1: State: Down
        ("mlx4_0", "ib_port_physical_state_id"): 3,  # Physical state: Disabled
        ("mlx4_0", "ib_port_rate_bytes_per_second"): 10e9 / 8,  # Rate: 10 (Gb/s)
        ("mlx4_0:2", "ib_port_state_id"): 4,  # Port 2: State: Active
        ("mlx4_0:2", "ib_port_physical_state_id"): 5,  # Physical state: LinkUp
        ("mlx4_0:2", "ib_port_rate_bytes_per_second"): 56e9 / 8,  # Rate: 56
    }  # CA type, firmware, GUIDs, LIDs, capability mask and link layer are identity, not samples


def test_ibstat_space_indented_roce_ports_of_two_cas(conn):
    path = FABRIC / "gh-l2fwd-nv-6_ibstat_cx6dx-roce.txt"
    report = ingest_file(conn, path, IngestOptions(host="n"))
    assert (report.format, report.rejected, report.hosts) == ("ib_counters", 0, ["n"])
    assert port_rows(conn) == {
        (ca, metric): v
        for ca in ("mlx5_0", "mlx5_1")
        for metric, v in (
            ("ib_port_state_id", 4),
            ("ib_port_physical_state_id", 5),
            ("ib_port_rate_bytes_per_second", 100e9 / 8),
        )
    }


def test_ibstat_is_recognised_without_format_and_odd_values_are_rejected_with_their_line(conn, tmp_path):
    from synestra_cli import formats

    text = (FABRIC / "gh-rdma-core-pr847_ibstat_mlx4-2port_verbose.txt").read_text()
    assert formats.detect(text).name == "ib_counters"
    odd = text.replace("State: Active", "State: Confused").replace("Rate: 10\n", "Rate: fast\n")
    path = tmp_path / "ibstat.txt"
    path.write_text(odd)
    report = ingest_file(conn, path, IngestOptions(host="n"))
    assert report.rejected == 2
    assert [s[:2] for s in report.reject_samples] == [
        (16, "ibstat rate 'fast' is not a number of Gb/s"),
        (24, "unknown ibstat state 'Confused'"),
    ]
    assert port_rows(conn)[("mlx4_0:2", "ib_port_physical_state_id")] == 5
