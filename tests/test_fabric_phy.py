"""Physical-layer snapshots: mlxlink, SONiC fec-stats, ethtool -S, gnmic events; the whole fabric folder."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from conftest import REAL_SAMPLES

from synestra_cli import formats
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

FABRIC = REAL_SAMPLES / "fabric"
MY_FORMATS = [
    "ib_counters",
    "ethtool_stats",
    "mlxlink",
    "sonic_fec_stats",
    "gnmic_event",
    "topology_csv",
    "ibnetdiscover",
    "sonic_counters",
    "ibswinfo",
]


def metrics(conn, metric):
    """entity -> value for one metric."""
    return dict(conn.execute("SELECT entity, value FROM metrics WHERE metric = ?", [metric]).fetchall())


def mtime_of(path):
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


# Every reject in the real samples, explained: (file, count, first line, reason prefix).
EXPLAINED_REJECTS = {
    # the issue paste cut the JSON after "Operational Info": the complete section is kept
    "gh-lshca-11_mlxlink-json_operational-info_edr.json.txt": (1, 12, "truncated JSON"),
    # the man page's prose after the example (lines 55-58) is not ibnetdiscover output
    "rdma-core_man_ibnetdiscover_topology-example.txt": (4, 55, "not an ibnetdiscover"),
}
REFUSED = {"gh-telegraf-12831_gnmi-proto_transceiver-output-power_decimal_val.txt"}


def test_every_fabric_sample_loads_with_only_explained_rejects(conn):
    samples = sorted(p for p in FABRIC.iterdir() if p.suffix != ".prom" and p.name != "PROVENANCE.md")
    assert len(samples) == 31
    for path in samples:
        report = ingest_file(conn, path, IngestOptions())
        if path.name in REFUSED:
            continue
        assert report.status == "loaded", (path.name, report.error)
        assert report.format in MY_FORMATS and report.rows > 0, path.name
        count, line, reason = EXPLAINED_REJECTS.get(path.name, (0, None, ""))
        assert report.rejected == count, (path.name, report.reject_samples)
        if count:
            assert report.reject_samples[0][0] == line and report.reject_samples[0][1].startswith(reason)


def test_a_gnmi_protobuf_debug_print_is_refused_as_unknown_format(conn):
    path = FABRIC / "gh-telegraf-12831_gnmi-proto_transceiver-output-power_decimal_val.txt"
    head = path.read_text()
    assert all(formats.by_name(name).sniff(head) == 0.0 for name in MY_FORMATS)
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "failed" and "unknown format" in report.error
    assert conn.execute("SELECT count(*) FROM sources").fetchone()[0] == 0


def test_sonic_fec_stats_per_interface_codewords_and_ber(conn):
    path = FABRIC / "gh-sonic-swss-3757_show-interfaces-counters-fec-stats.txt"
    report = ingest_file(conn, path, IngestOptions(host="leaf-02"))
    assert (report.format, report.rejected, report.hosts) == ("sonic_fec_stats", 0, ["leaf-02"])
    assert report.first_ts == mtime_of(path)  # the table prints no time
    assert metrics(conn, "port_fec_corrected_codewords_total")["Ethernet48"] == 48315381
    assert metrics(conn, "port_fec_corrected_codewords_total")["Ethernet32"] == 2998448
    assert metrics(conn, "port_fec_uncorrectable_codewords_total")["Ethernet48"] == 0
    assert metrics(conn, "port_symbol_errors_total")["Ethernet16"] == 949608
    assert metrics(conn, "port_pre_fec_ber")["Ethernet48"] == pytest.approx(7.24e-10)
    assert metrics(conn, "port_post_fec_ber")["Ethernet48"] == 0.0
    assert metrics(conn, "sonic_fec_pre_ber_max")["Ethernet48"] == pytest.approx(2.35e-9)
    assert set(metrics(conn, "if_oper_status").values()) == {1.0}
    assert len(metrics(conn, "port_pre_fec_ber")) == 7


def test_sonic_na_cells_are_null_and_short_rows_rejected(conn, tmp_path):
    path = tmp_path / "fec.txt"
    path.write_text(
        "      IFACE    STATE     FEC_CORR    FEC_UNCORR    FEC_SYMBOL_ERR    FEC_PRE_BER    FEC_POST_BER\n"
        "-----------  -------  -----------  ------------  ----------------  -------------  --------------\n"
        "  Ethernet0        D          N/A           N/A               N/A            N/A             N/A\n"
        "  Ethernet8        U        1,024\n"
    )
    report = ingest_file(conn, path, IngestOptions(host="leaf-09"))
    assert metrics(conn, "port_fec_corrected_codewords_total") == {"Ethernet0": None}
    assert metrics(conn, "if_oper_status") == {"Ethernet0": 2.0}
    assert report.rejected == 1 and report.reject_samples[0][0] == 4


def test_mlxlink_module_info_per_lane_power_min_and_thresholds(conn, tmp_path):
    src = (FABRIC / "sichek_mlxlink-m_module-info_osfp.txt").read_text()
    path = tmp_path / "optics.txt"
    path.write_text("$ mlxlink -d mlx5_2 -p 1 -m\n" + src)
    report = ingest_file(conn, path, IngestOptions(host="gpu-003"))
    assert (report.format, report.rejected) == ("mlxlink", 0)
    rx = metrics(conn, "optics_rx_power_dbm")
    assert rx == {
        "mlx5_2/lane0": 1.886,
        "mlx5_2/lane1": 1.989,
        "mlx5_2/lane2": 2.281,
        "mlx5_2/lane3": 1.976,
        "mlx5_2": 1.886,
    }
    assert metrics(conn, "optics_tx_power_dbm")["mlx5_2"] == 1.427
    assert metrics(conn, "optics_rx_power_low_alarm_dbm") == {"mlx5_2": -10.41}
    assert metrics(conn, "optics_rx_power_high_alarm_dbm") == {"mlx5_2": 6.0}
    assert metrics(conn, "optics_tx_power_low_alarm_dbm") == {"mlx5_2": -8.508}
    assert metrics(conn, "optics_temp_celsius") == {"mlx5_2": 54.0}
    assert metrics(conn, "mlxlink_bias_current_ma")["mlx5_2/lane3"] == 8.38
    (fields,) = conn.execute("SELECT fields FROM events WHERE component = 'mlx5_2'").fetchone()
    assert json.loads(fields)["module_info"]["Vendor Serial Number"] == "CWJH05025502589"


def test_mlxlink_operational_info_keeps_the_fec_mode_in_an_event(conn):
    path = FABRIC / "gh-sonic-265_mlxlink_operational-info_25GbE.txt"
    report = ingest_file(conn, path, IngestOptions(host="spectrum-1"))
    assert (report.rows, report.rejected, report.first_ts) == (1, 0, mtime_of(path))
    kind, message, fields = conn.execute("SELECT kind, message, fields FROM events").fetchone()
    assert kind == "log" and "FEC Firecode FEC" in message
    assert json.loads(fields)["operational_info"]["Speed"] == "25GbE"


def test_truncated_mlxlink_json_keeps_its_complete_section(conn):
    report = ingest_file(conn, FABRIC / "gh-lshca-11_mlxlink-json_operational-info_edr.json.txt", IngestOptions())
    assert report.rejected == 1
    (fields,) = conn.execute("SELECT fields FROM events").fetchone()
    assert json.loads(fields)["operational_info"] == {
        "Auto Negotiation": "ON",
        "FEC": "No FEC",
        "Loopback Mode": "No Loopback",
        "Physical state": "LinkUp",
        "Speed": "IB-EDR",
        "State": "Active",
        "Width": "4x",
    }


def test_mlxlink_json_ber_counters(conn, tmp_path):
    # Key names and value shapes as mlxlink --json prints them (MFT 4.34: "values" arrays, 15E-255).
    doc = {
        "result": {
            "output": {
                "Physical Counters and BER Info": {
                    "Time Since Last Clear [Min]": "1290.6",
                    "Effective Physical Errors": "0",
                    "Effective Physical BER": "15E-255",
                    "Raw Physical BER": "5E-10",
                    "Raw Physical Errors Per Lane": {"values": ["3017647", "15132549", "7368641", "9233545"]},
                    "Raw Physical BER Per Lane": {"values": ["1E-10", "1E-9", "4E-10", "5E-10"]},
                    "Link Down Counter": "2",
                }
            }
        },
        "status": {"code": 0, "message": "success"},
    }
    path = tmp_path / "mlxlink_mlx5_4_counters.json"
    path.write_text(json.dumps(doc, indent=3))
    report = ingest_file(conn, path, IngestOptions(host="gpu-004"))
    assert (report.format, report.rejected) == ("mlxlink", 0)
    assert metrics(conn, "port_post_fec_ber") == {"mlx5_4": 1.5e-254}
    assert metrics(conn, "port_pre_fec_ber")["mlx5_4"] == 5e-10
    assert metrics(conn, "port_pre_fec_ber")["mlx5_4/lane1"] == 1e-9
    assert metrics(conn, "mlxlink_raw_physical_errors_per_lane")["mlx5_4/lane1"] == 15132549
    assert metrics(conn, "port_link_down_events_total") == {"mlx5_4": 2.0}


def test_ethtool_counters_and_interface_from_the_echoed_command(conn, tmp_path):
    report = ingest_file(conn, FABRIC / "gh-ethq-8_ethtool-S_mlx5_connectx4_head.txt", IngestOptions(host="n1"))
    assert (report.format, report.rows, report.rejected) == ("ethtool_stats", 23, 0)
    assert metrics(conn, "eth_rx_bytes") == {None: 2195783498134}
    path = tmp_path / "eth.txt"
    path.write_text(
        "$ ethtool -S ens1f0np0\nNIC statistics:\n     rx_corrected_bits_phy: 1234\n"
        "     link_down_events_phy: 3\n     rx_crc_errors_phy: 5\n"
    )
    ingest_file(conn, path, IngestOptions(host="n1"))
    assert metrics(conn, "port_fec_corrected_bits_total") == {"ens1f0np0": 1234}
    assert metrics(conn, "port_link_down_events_total") == {"ens1f0np0": 3}
    assert metrics(conn, "eth_rx_crc_errors_phy") == {"ens1f0np0": 5}


def test_gnmic_event_time_comes_from_the_event_not_the_file(conn):
    path = FABRIC / "gh-gnmic-613_event-format_psu.json"
    report = ingest_file(conn, path, IngestOptions())
    assert (report.format, report.rejected) == ("gnmic_event", 0)
    assert report.first_ts == datetime(2025, 2, 27, 15, 28, 16, 956676)
    row = conn.execute("SELECT host, entity, metric, value FROM metrics").fetchone()
    assert row == ("<SW_FQDN>", "PSU 1", "/components/component/power-supply/state/input-current", 0.3)


def test_gnmic_openconfig_interface_counters_and_channel_power(conn, tmp_path):
    events = [
        {
            "name": "sub",
            "timestamp": 1764424931000000000,
            "tags": {"interface_name": "Ethernet8", "source": "leaf-02.dc1:6030"},
            "values": {
                "/interfaces/interface/state/counters/in-octets": "123456",
                "/interfaces/interface/state/oper-status": "DOWN",
                "/interfaces/interface/state/description": "to gpu-001",
            },
        },
        {
            "name": "sub",
            "timestamp": 1764424931000000000,
            "tags": {"component_name": "Ethernet8", "channel_index": "2", "source": "leaf-02.dc1:6030"},
            "values": {
                "/openconfig-platform:components/component/openconfig-platform-transceiver:transceiver/"
                "physical-channels/channel/state/input-power/instant": -7.3
            },
        },
    ]
    path = tmp_path / "gnmic.json"
    # JSON lines with a broken line between two good ones: the line after it is still read
    path.write_text(json.dumps([events[0]]) + "\n{broken\n" + json.dumps([events[1]]) + "\n")
    report = ingest_file(conn, path, IngestOptions())
    assert report.hosts == ["leaf-02"] and report.rejected == 1 and report.reject_samples[0][0] == 2
    assert report.first_ts == datetime(2025, 11, 29, 14, 2, 11)
    assert metrics(conn, "if_in_octets_total") == {"Ethernet8": 123456}
    assert metrics(conn, "if_oper_status") == {"Ethernet8": 2.0}
    assert metrics(conn, "optics_rx_power_dbm") == {"Ethernet8/lane2": -7.3}


def test_mlxlink_json_after_date_and_command_lines(conn, tmp_path):
    doc = {
        "result": {"output": {"Module Info": {"Rx Power Current [dBm]": "-1.5,-9.25 [-10..4]"}}},
        "status": {"code": 0, "message": "success"},
    }
    path = tmp_path / "optics.json"
    path.write_text("2026-11-29T10:00:00Z\n$ mlxlink -d mlx5_6 -p 1 -m --json\n" + json.dumps(doc))
    report = ingest_file(conn, path, IngestOptions(host="gpu-006"))
    assert (report.rejected, report.first_ts) == (0, datetime(2026, 11, 29, 10, 0))
    assert metrics(conn, "optics_rx_power_dbm") == {"mlx5_6/lane0": -1.5, "mlx5_6/lane1": -9.25, "mlx5_6": -9.25}


def test_mlxlink_json_with_a_failed_status_is_a_reject_not_data(conn, tmp_path):
    doc = {
        "result": {"output": {"Module Info": {"Temperature [C]": "0"}}},
        "status": {"code": 1, "message": "Failed to open device"},
    }
    path = tmp_path / "mlxlink_mlx5_0.json"
    path.write_text(json.dumps(doc))
    report = ingest_file(conn, path, IngestOptions(host="gpu-006"))
    # its one record rejected, nothing read: a failed file (exit 3) naming the reason (issue 18)
    assert report.status == "failed" and "mlxlink status 1: Failed to open device" in report.error
    assert conn.execute("SELECT count(*) FROM metrics").fetchone()[0] == 0


def test_ethtool_per_queue_counters_keep_their_queue(conn):
    # isc-projects/ethq#6: a bnx2x (BCM57840) `ethtool -S eth0`, two queues of 17 counters each
    path = FABRIC / "gh-ethq-6_ethtool-S_bnx2x-per-queue.txt"
    report = ingest_file(conn, path, IngestOptions(host="bnx2x-host"))  # sniffed: no --format
    assert (report.format, report.rejected, report.rows) == ("ethtool_stats", 0, 34)
    got = dict(conn.execute("SELECT metric, value FROM metrics WHERE entity = 'eth0/q1'").fetchall())
    assert (got["eth_rx_bytes"], got["eth_tx_bytes"], got["eth_rx_ucast_packets"]) == (
        207561754146,
        48398427765,
        170492982,
    )
