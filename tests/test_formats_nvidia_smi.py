"""nvidia-smi -q and --query-gpu CSV: real captures of five driver generations, their facts, and bad input."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

NV = REAL_SAMPLES / "nvidia"
A10 = NV / "gpud_nvidia-smi-q_535.129.03_a10_row-remap-pending.txt"
H100 = NV / "gpud_nvidia-smi-q_535.161.08_h100-x8.txt"
TITAN_V = NV / "gpud_nvidia-smi-q_560.35.03_titan-v_ecc-bit-layout.txt"
OLD_331 = NV / "martinthoma-blog-2015_nvidia-smi-a_331.79_gtx-titan-black.txt"
CUT_410 = NV / "gh-netdata-4892_nvidia-smi-a_410.72_gtx-960m_cut.txt"
CSV_UNITS = NV / "aau-aicloud-docs_nvidia-smi-query-gpu_csv_units.txt"
NOHEADER_NA = NV / "gh-i3pystatus-pr776_nvidia-smi-query-gpu_noheader-nounits_na.txt"
NOHEADER_CUT = NV / "gh-i3pystatus-pr776_nvidia-smi-query-gpu_noheader-nounits_not-supported_cut-command.txt"
NOHEADER_UUID = NV / "gh-gpu-utils-83_nvidia-smi-query-gpu_noheader-nounits_rtx2080.txt"


@pytest.fixture(autouse=True)
def only_nvidia(monkeypatch):
    only_formats(monkeypatch, ["nvidia_smi_q", "nvidia_smi_csv"])


def _metric(conn, metric, entity="gpu0"):
    rows = conn.execute("SELECT value FROM metrics WHERE metric = ? AND entity = ?", [metric, entity]).fetchall()
    return rows[0][0] if len(rows) == 1 else rows


def test_a10_remapped_rows_pending_are_a_metric_an_event_and_the_gpu_is_identified(conn):
    report = ingest_file(conn, A10, IngestOptions(host="gpu-017"))
    assert (report.status, report.format, report.rejected) == ("loaded", "nvidia_smi_q", 0)
    assert conn.execute("SELECT host, entity, pci_bus_id, uuid, model FROM gpus").fetchall() == [
        ("gpu-017", "gpu0", "00000000:07:00.0", "GPU-73d12ef7-f589-f867-4259-c7090ab44736", "NVIDIA A10")
    ]
    assert _metric(conn, "gpu_uncorrectable_remapped_rows_total") == 4.0
    assert _metric(conn, "gpu_row_remap_pending") == 1.0
    assert _metric(conn, "gpu_row_remap_failure") == 0.0
    assert _metric(conn, "gpu_power_watts") == 43.89
    assert _metric(conn, "gpu_power_limit_watts") == 150.0
    assert _metric(conn, "gpu_clock_events_bitmask") == 1.0  # Idle only
    assert _metric(conn, "gpu_pcie_link_width") == 16.0
    ts = conn.execute("SELECT DISTINCT ts FROM metrics").fetchall()
    assert ts == [(datetime(2024, 9, 25, 10, 40, 24),)]
    events = dict(conn.execute("SELECT kind, fields FROM events").fetchall())
    assert json.loads(events["gpu_identity"])["serial"] == "1324521052681"
    assert json.loads(events["gpu_identity"])["board_part"] == "900-2G133-0020-100"
    assert json.loads(events["gpu_row_remap_pending"])["count"] == 4.0


def test_the_capture_time_is_local_time_read_in_the_given_zone(conn):
    ingest_file(conn, A10, IngestOptions(host="gpu-017", timezone="Europe/Paris"))
    assert conn.execute("SELECT DISTINCT ts FROM metrics").fetchall() == [(datetime(2024, 9, 25, 8, 40, 24),)]


def test_eight_h100_are_gpu0_to_gpu7_in_bus_order_with_the_power_brake_bits_set(conn):
    ingest_file(conn, H100, IngestOptions(host="n1"))
    gpus = conn.execute("SELECT entity, pci_bus_id FROM gpus ORDER BY entity").fetchall()
    assert [e for e, _ in gpus] == [f"gpu{i}" for i in range(8)]
    assert gpus[0][1] == "00000000:19:00.0" and gpus[7][1] == "00000000:DB:00.0"
    # HW Slowdown (0x8) and HW Power Brake Slowdown (0x80) Active on every GPU
    masks = conn.execute("SELECT DISTINCT value FROM metrics WHERE metric = 'gpu_clock_events_bitmask'").fetchall()
    assert masks == [(136.0,)]
    # SRAM (Parity + SEC-DED) and DRAM uncorrectable summed into DCGM's DBE total: all zero here
    assert _metric(conn, "gpu_ecc_dbe_volatile_total", "gpu5") == 0.0
    assert _metric(conn, "gpu_power_limit_watts", "gpu7") == 700.0


def test_volta_on_a_new_driver_keeps_the_bit_layout_and_n_a_is_no_data(conn):
    ingest_file(conn, TITAN_V, IngestOptions(host="n1"))
    assert _metric(conn, "gpu_memory_temp_celsius") == 41.0
    assert _metric(conn, "gpu_ecc_dbe_volatile_total") == []  # ECC off: every count N/A
    assert (_metric(conn, "gpu_pcie_link_gen"), _metric(conn, "gpu_pcie_link_gen_max")) == (1.0, 3.0)
    # an idle GPU's PCIe generation drops; only a narrower link is a fault
    assert conn.execute("SELECT count(*) FROM events WHERE kind = 'gpu_pcie_width_degraded'").fetchone() == (0,)


def test_the_2015_layout_reads_its_temperature_and_its_four_digit_domain(conn):
    report = ingest_file(conn, OLD_331, IngestOptions(host="n1"))
    assert report.rejected == 0
    assert conn.execute("SELECT pci_bus_id, uuid FROM gpus").fetchall() == [
        ("00000000:01:00.0", "GPU-fcff168f-a045-2f95-7a4f-8e1cf26a24eb")
    ]
    assert _metric(conn, "gpu_temp_celsius") == 29.0
    assert conn.execute("SELECT DISTINCT ts FROM metrics").fetchall() == [(datetime(2015, 4, 17, 18, 44, 41),)]


def test_a_paste_cut_after_the_identity_still_identifies_the_gpu(conn):
    report = ingest_file(conn, CUT_410, IngestOptions(host="n1"))
    assert report.status == "loaded"
    assert conn.execute("SELECT uuid, model FROM gpus").fetchall() == [
        ("GPU-101b1cf0-fdf7-b374-a62c-76b25134fcf2", "GeForce GTX 960M")
    ]


def test_a_line_outside_the_report_is_a_reject_with_its_line_and_the_rest_loads(conn, tmp_path):
    lines = A10.read_text().splitlines()
    lines.insert(30, "nvidia-smi: some stray diagnostic")
    bad = tmp_path / "q.txt"
    bad.write_text("\n".join(lines) + "\n")
    report = ingest_file(conn, bad, IngestOptions(host="n1"))
    assert report.status == "loaded" and report.rejected == 1
    assert report.reject_samples[0][0] == 31
    assert _metric(conn, "gpu_uncorrectable_remapped_rows_total") == 4.0


def test_csv_with_units_in_header_and_values(conn):
    report = ingest_file(conn, CSV_UNITS, IngestOptions(host="nv-ai-03"))
    assert (report.format, report.rejected) == ("nvidia_smi_csv", 0)
    first = conn.execute(
        "SELECT metric, value FROM metrics WHERE ts = '2020-11-12 13:48:11.412' ORDER BY metric"
    ).fetchall()
    assert first == [
        ("gpu_fb_free_mib", 1486.0),
        ("gpu_fb_used_mib", 30994.0),
        ("gpu_util_percent", 99.0),
        ("nvsmi_memory_total", 32480.0),
        ("nvsmi_utilization_memory", 52.0),
    ]
    assert conn.execute("SELECT count(DISTINCT ts), min(entity), max(entity) FROM metrics").fetchone() == (
        17,
        "gpu0",
        "gpu0",
    )


@pytest.mark.parametrize("path", [NOHEADER_NA, NOHEADER_CUT])
def test_noheader_columns_come_from_the_echoed_command_and_not_available_is_no_data(conn, path):
    report = ingest_file(conn, path, IngestOptions(host="n1"))
    assert (report.status, report.rejected) == ("loaded", 0)
    rows = dict(conn.execute("SELECT metric, value FROM metrics").fetchall())
    assert rows["gpu_temp_celsius"] == 44.0 and rows["gpu_fb_free_mib"] == 2004.0
    assert "nvsmi_fan_speed" not in rows  # [N/A] / [Not Supported]


def test_noheader_without_index_names_the_gpu_by_uuid(conn):
    ingest_file(conn, NOHEADER_UUID, IngestOptions(host="n1"))
    uuid = "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"
    assert conn.execute("SELECT entity, uuid, model FROM gpus").fetchall() == [(uuid, uuid, "GeForce RTX 2080")]
    assert _metric(conn, "gpu_power_watts", uuid) == 176.98
    assert _metric(conn, "nvsmi_pstate", uuid) == 2.0
    assert _metric(conn, "gpu_memory_temp_celsius", uuid) == []  # N/A


def test_a_row_with_the_wrong_number_of_fields_is_rejected_with_its_line(conn, tmp_path):
    text = CSV_UNITS.read_text().splitlines()
    text[3] = "0, 2020/11/12 13:48:21.417, 99 %"
    bad = tmp_path / "smi.csv"
    bad.write_text("\n".join(text) + "\n")
    report = ingest_file(conn, bad, IngestOptions(host="n1"))
    assert report.rejected == 1 and report.reject_samples[0][0] == 4
    assert "expected 7" in report.reject_samples[0][1]
    assert conn.execute("SELECT count(DISTINCT ts) FROM metrics").fetchone() == (16,)


def test_noheader_rows_without_their_command_are_refused_with_how_to_fix_it(conn, tmp_path):
    bare = tmp_path / "bare.csv"
    bare.write_text("2004, 2004, 0, 44, [N/A], 0, 0\n")
    report = ingest_file(conn, bare, IngestOptions(format="nvidia_smi_csv"))
    assert report.status == "failed" and "--format=csv" in (report.error or "")
