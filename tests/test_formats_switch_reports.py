"""Switch-side reports: SONiC portstat tables, ibswinfo, perfquery -E: real samples, facts, bad input."""

from __future__ import annotations

import json

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

FAB = REAL_SAMPLES / "fabric"
COUNTERS = FAB / "sonic-utilities_command-reference_show-interfaces-counters.txt"
ERRORS = FAB / "sonic-utilities_command-reference_show-interface-counters-errors.txt"
RATES_NA = FAB / "sonic-utilities_command-reference_show-int-counters-rates_na.txt"
PORTSTAT_TEST = FAB / "sonic-utilities_portstat-test_intf-counters-before-clear_na-state.txt"
IBSW_FAN = FAB / "treydock-infiniband_exporter_ibswinfo-test1.txt"
IBSW_PSU = FAB / "treydock-infiniband_exporter_ibswinfo-test3.txt"
IBSW_VITALS = FAB / "stanford-rc-ibswinfo_readme_vitals-output.txt"
PQ_E = FAB / "treydock-infiniband_exporter_perfquery-E_lid2052-port1.txt"
PQ_E_SWITCH = FAB / "treydock-infiniband_exporter_perfquery-E_lid1719-port2_switch.txt"


@pytest.fixture(autouse=True)
def only_these(monkeypatch):
    only_formats(monkeypatch, ["sonic_counters", "sonic_fec_stats", "ibswinfo", "ib_counters"])


def _values(conn, entity):
    return dict(conn.execute("SELECT metric, value FROM metrics WHERE entity = ?", [entity]).fetchall())


def test_portstat_counters_with_thousands_separators_and_rates_in_their_units(conn):
    report = ingest_file(conn, COUNTERS, IngestOptions(host="sonic"))
    assert (report.format, report.rejected) == ("sonic_counters", 0)
    eth0 = _values(conn, "Ethernet0")
    assert eth0["sonic_rx_ok_total"] == 471_729_839_997
    assert eth0["if_in_discards_total"] == 18_682 and eth0["if_in_errors_total"] == 0
    assert eth0["sonic_rx_bytes_per_second"] == pytest.approx(653.87e6)
    assert eth0["sonic_rx_util_percent"] == 12.77 and eth0["if_oper_status"] == 1.0
    assert conn.execute("SELECT count(DISTINCT entity) FROM metrics").fetchone() == (7,)


def test_the_errors_table_names_the_interfaces_drops(conn):
    ingest_file(conn, ERRORS, IngestOptions(host="str-s6000-acs-11"))
    drops = conn.execute(
        "SELECT entity, value FROM metrics WHERE metric = 'if_in_discards_total' AND value > 0 ORDER BY entity"
    ).fetchall()
    assert drops == [("Ethernet0", 4.0), ("Ethernet8", 1.0)]


def test_n_a_is_no_data_and_a_down_port_is_oper_status_down(conn):
    ingest_file(conn, RATES_NA, IngestOptions(host="sw"))
    assert "sonic_rx_bytes_per_second" not in _values(conn, "Ethernet0")
    conn.execute("DELETE FROM metrics")
    report = ingest_file(conn, PORTSTAT_TEST, IngestOptions(host="sw"))
    assert report.rejected == 0
    assert _values(conn, "Ethernet0")["if_oper_status"] == 2.0  # STATE D
    assert "if_oper_status" not in _values(conn, "Ethernet4")  # STATE N/A
    assert _values(conn, "Ethernet8")["sonic_tx_bytes_per_second"] == pytest.approx(13.37e6)


def test_a_row_cut_short_is_a_reject_with_its_line(conn, tmp_path):
    lines = COUNTERS.read_text().splitlines()
    lines[4] = lines[4][:30]
    bad = tmp_path / "portstat.txt"
    bad.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, bad, IngestOptions(host="sw"))
    assert report.rejected == 1 and report.reject_samples[0][0] == 5
    assert conn.execute("SELECT count(DISTINCT entity) FROM metrics").fetchone() == (6,)


def test_ibswinfo_fans_psus_and_temperature_with_the_failed_fan_an_event(conn):
    report = ingest_file(conn, IBSW_FAN, IngestOptions(host="ib-leaf-3"))
    assert (report.format, report.rejected) == ("ibswinfo", 0)
    assert _values(conn, "fan2") == {"ibswinfo_fan_rpm": 7349.0}
    assert _values(conn, "psu0") == {"ibswinfo_psu_power_watts": 72.0}
    switch = _values(conn, "switch")
    assert switch["ibswinfo_temp_celsius"] == 45 and switch["ibswinfo_max_temp_celsius"] == 57
    assert switch["ibswinfo_uptime_seconds"] == 160 * 86400 + 10 * 3600 + 38 * 60 + 53
    events = conn.execute("SELECT kind, severity, component, fields FROM events ORDER BY kind").fetchall()
    assert [(k, s, c) for k, s, c, _ in events] == [
        ("switch_hw_fault", "err", "fans"),
        ("switch_identity", "info", "switch"),
    ]
    assert json.loads(events[1][3])["serial"] == "MT1943X00498"


def test_ibswinfo_a_psu_without_dc_power_reports_no_power_and_two_faults(conn):
    ingest_file(conn, IBSW_PSU, IngestOptions(host="ib-spine-1"))
    assert "ibswinfo_psu_power_watts" not in _values(conn, "psu1")
    faults = conn.execute("SELECT component, fields->>'what' FROM events WHERE kind = 'switch_hw_fault'").fetchall()
    assert sorted(faults) == [("psu1", "DC power"), ("psu1", "fan status")]


def test_ibswinfo_vitals_give_each_module_its_temperature_on_its_port(conn):
    ingest_file(conn, IBSW_VITALS, IngestOptions(host="sw"))
    assert _values(conn, "17") == {"optics_temp_celsius": 53.0}
    assert _values(conn, "psu1") == {"ibswinfo_psu_power_watts": 102.0}
    assert conn.execute("SELECT count(*) FROM metrics WHERE metric = 'optics_temp_celsius'").fetchone() == (36,)


@pytest.mark.parametrize(("path", "entity"), [(PQ_E, "lid2052"), (PQ_E_SWITCH, "lid1719:2")])
def test_perfquery_rcv_error_details_are_the_causes_of_rcv_errors(conn, path, entity):
    report = ingest_file(conn, path, IngestOptions(host="n1"))
    assert (report.format, report.rejected) == ("ib_counters", 0)
    assert _values(conn, entity) == {
        "ib_port_rcv_local_physical_errors_total": 0.0,
        "ib_port_rcv_malformed_packet_errors_total": 0.0,
        "ib_port_rcv_buffer_overrun_errors_total": 0.0,
        "ib_port_rcv_dlid_mapping_errors_total": 0.0,
        "ib_port_rcv_vl_mapping_errors_total": 0.0,
        "ib_port_rcv_looping_errors_total": 0.0,
    }


def test_ibswinfo_a_stray_line_and_a_value_that_is_no_number_are_rejects_with_their_lines(conn, tmp_path):
    lines = IBSW_VITALS.read_text().splitlines()
    fan = next(i for i, line in enumerate(lines) if line.startswith("fan#1"))
    lines[fan] = lines[fan].split(":")[0] + ": 54x"  # a paste mangled the number
    lines.insert(fan + 1, "garbage line without separator")
    cut = tmp_path / "ibswinfo.txt"
    cut.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, cut, IngestOptions(host="ib-sw-1"))
    assert (report.status, report.rejected) == ("loaded", 2)
    assert [(line, reason) for line, reason, _ in report.reject_samples] == [
        (fan + 1, "ibswinfo value is not a number"),
        (fan + 2, "not an ibswinfo `key | value` (or `key : value`) line"),
    ]
    assert conn.execute("SELECT count(*) FROM metrics WHERE entity = 'fan1'").fetchone() == (0,)


def test_perfquery_details_cut_mid_line_keep_the_counters_before_and_reject_the_cut_one(conn, tmp_path):
    lines = PQ_E.read_text().splitlines()
    cut = tmp_path / "perfquery-E.txt"
    cut.write_text("\n".join([*lines[:5], lines[5][:12]]) + "\n")  # `PortBufferOv`
    report = ingest_file(conn, cut, IngestOptions(host="n1"))
    assert (report.format, report.rejected) == ("ib_counters", 1)
    assert report.reject_samples[0][:2] == (6, "not a perfquery `Name:....value` line after its `# Port` header")
    assert set(_values(conn, "lid2052")) == {
        "ib_port_rcv_local_physical_errors_total",
        "ib_port_rcv_malformed_packet_errors_total",
    }
