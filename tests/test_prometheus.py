"""Prometheus text ingest: real dcgm-exporter, node_exporter and snmp_exporter samples, promtool dumps."""

from __future__ import annotations

import calendar
import gzip
import os
from datetime import datetime
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.telemetry.prom_labels import install_macros
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.store import open_store
from synestra_cli.store.connect import memory_store

DCGM = REAL_SAMPLES / "dcgm"
FABRIC = REAL_SAMPLES / "fabric"
TEXT_SAMPLES = [
    *sorted(DCGM.glob("*.prom")),
    *sorted(DCGM.glob("*.om")),
    DCGM / "prometheus_promtool_tsdb-dump_golden.txt",
]
# The vendor README elides lines with "..." (lines 7 and 11): the only rejects in the real samples.
EXPLAINED_REJECTS = {"dcgm-exporter_README_metrics_blank-sentinel.prom": [7, 11]}


def ingest(conn, path: Path, **options):
    report = ingest_file(conn, path, IngestOptions(**options))
    assert report.status == "loaded", report.error
    return report


def metric(conn, metric_name: str, host=None, entity=None) -> list[tuple]:
    return conn.execute(
        "SELECT host, entity, value, ts FROM metrics WHERE metric = ? AND host IS NOT DISTINCT FROM coalesce(?, host)"
        " AND entity IS NOT DISTINCT FROM coalesce(?, entity) ORDER BY host, entity, ts",
        [metric_name, host, entity],
    ).fetchall()


@pytest.mark.parametrize("path", TEXT_SAMPLES + sorted(FABRIC.glob("*.prom")), ids=lambda p: p.name)
def test_every_real_text_sample_is_detected_and_loads_with_only_explained_rejects(conn, path):
    report = ingest(conn, path)
    assert report.format == "prometheus"
    assert report.rows > 0
    assert [line for line, _, _ in report.reject_samples] == EXPLAINED_REJECTS.get(path.name, [])


def test_dcgm_temperature_power_and_utilisation_land_under_canonical_names(conn):
    ingest(conn, DCGM / "gh-dcgm-exporter-568_metrics_4.3.1-4.4.0_k8s-labels.prom")
    ingest(conn, DCGM / "gh-dcgm-exporter-250_metrics_v100_no-pci-bus-id.prom")
    assert [r[:3] for r in metric(conn, "gpu_util_percent")] == [("r6i3n0", "gpu0", 0.0), ("xxxxx", "gpu0", 38.0)]
    assert [r[:3] for r in metric(conn, "gpu_pcie_replay_total", host="r6i3n0")] == [
        ("r6i3n0", f"gpu{i}", 0.0) for i in range(4)
    ]
    # not in the catalog: kept under its own name
    assert [r[2] for r in metric(conn, "DCGM_FI_DEV_POWER_MGMT_LIMIT")] == [300.0, 300.0]


def test_dcgm_blank_sentinel_is_null_and_its_neighbours_are_not(conn):
    ingest(conn, DCGM / "dcgm-exporter_README_metrics_blank-sentinel.prom", host="node-a")
    assert metric(conn, "gpu_memory_temp_celsius")[0][:3] == ("node-a", "gpu0", None)
    assert metric(conn, "gpu_sm_clock_mhz")[0][2] == 139.0
    assert metric(conn, "gpu_memory_clock_mhz")[0][2] == 405.0


def test_both_dcgm_name_generations_map_to_one_canonical_name(conn, tmp_path):
    labels = 'gpu="3",UUID="GPU-1",pci_bus_id="00000000:9B:00.0",device="nvidia3",modelName="H100",Hostname="gpu-001"'
    old = tmp_path / "old.prom"
    old.write_text(
        f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 61 1795000000000\nDCGM_FI_DEV_XID_ERRORS{{{labels}}} 79 1795000000000\n"
    )
    new = tmp_path / "new.prom"
    new.write_text(
        f"DCGM_FI_DEV_GPU_TEMP_CELSIUS{{{labels}}} 62 1795000015000\n"
        f"DCGM_FI_DEV_XID_ERROR{{{labels}}} 79 1795000015000\n"
    )
    ingest(conn, old)
    ingest(conn, new)
    temps = metric(conn, "gpu_temp_celsius")
    assert [(h, e, v) for h, e, v, _ in temps] == [("gpu-001", "gpu3", 61.0), ("gpu-001", "gpu3", 62.0)]
    assert temps[0][3] == datetime(2026, 11, 18, 11, 6, 40)  # ms timestamps honoured
    assert [r[2] for r in metric(conn, "gpu_xid_last")] == [79.0, 79.0]  # the last Xid, not a count


def test_xid_errors_with_err_code_labels_keep_the_xid_as_value(conn, tmp_path):
    path = tmp_path / "xid.prom"
    path.write_text(
        'DCGM_FI_DEV_XID_ERRORS{gpu="1",UUID="GPU-2",Hostname="gpu-002",err_code="45",'
        'err_msg="Preemptive cleanup, due to previous errors"} 45\n'
    )
    ingest(conn, path)
    assert metric(conn, "gpu_xid_last") == [
        ("gpu-002", "gpu1", 45.0, conn.execute("SELECT first_ts FROM sources").fetchone()[0])
    ]


def test_clock_throttle_reasons_become_a_bitmask_with_named_bits(conn):
    ingest(conn, DCGM / "gh-dcgm-exporter-317_metrics_clock-throttle-reasons_a30-mig.prom")
    rows = metric(conn, "gpu_clock_events_bitmask")
    assert [(h, e, v) for h, e, v, _ in rows] == [
        ("hldy-data-k8s-gpu-a30-node0110", "gpu0/gi3", 1.0),
        ("hldy-data-k8s-gpu-a30-node0110", "gpu0/gi4", 1.0),
    ]
    # the host is the short name every source joins on; the Hostname label as written is kept
    assert conn.execute("SELECT host, name FROM host_names").fetchall() == [
        ("hldy-data-k8s-gpu-a30-node0110", "hldy-data-k8s-gpu-a30-node0110.mt")
    ]
    install_macros(conn)
    assert conn.execute("SELECT clock_event_names(1), clock_event_names(96)").fetchone() == (
        ["gpu_idle"],
        ["sw_thermal", "hw_thermal"],
    )


def test_gpus_table_holds_one_row_per_gpu_with_normalised_bus_id(conn, tmp_path):
    ingest(conn, DCGM / "gh-dcgm-exporter-512_metrics_h100-mig.prom")  # 3 MIG instances of one GPU
    lower = tmp_path / "lower.prom"
    lower.write_text(
        'DCGM_FI_DEV_GPU_TEMP{gpu="2",UUID="GPU-9",pci_bus_id="0000:9b:00.0",modelName="H100",hostname="gpu-009"} 50\n'
    )
    ingest(conn, lower)
    assert conn.execute("SELECT host, entity, pci_bus_id, uuid, model FROM gpus ORDER BY host").fetchall() == [
        ("gpu-009", "gpu2", "00000000:9B:00.0", "GPU-9", "H100"),
        (
            "gsrh100-074",
            "gpu0",
            "00000000:1A:00.0",
            "GPU-58e8f5ea-13cc-013a-d88f-2bcf5ae8bc77",
            "NVIDIA H100 80GB HBM3",
        ),
    ]


def test_node_exporter_infiniband_bytes_and_ports(conn):
    ingest(conn, FABRIC / "node_exporter_e2e-golden_infiniband.prom", host="ib-node")
    # node_exporter already reports bytes (procfs multiplies the 4-byte PMA words): no further scaling
    assert [(e, v) for _, e, v, _ in metric(conn, "ib_port_rcv_data_bytes_total")] == [
        ("mlx4_0", 18527668.0),
        ("mlx4_0:2", 0.0),
    ]
    assert [(e, v) for _, e, v, _ in metric(conn, "ib_port_xmit_wait_total")] == [("mlx4_0", 4294967295.0)]
    assert [e for _, e, _, _ in metric(conn, "ib_port_state_id")] == ["i40iw0", "mlx4_0", "mlx4_0:2"]
    # the legacy counters are a different source: kept under their own name, not doubled into the canonical
    assert len(metric(conn, "node_infiniband_legacy_data_received_bytes_total")) == 2


def test_if_mib_errors_take_the_switch_from_instance_and_the_port_from_ifname(conn, tmp_path):
    ingest(conn, FABRIC / "gh-snmp_exporter-1139_if_mib_output.prom", host="leaf-01")
    assert [(h, e, v) for h, e, v, _ in metric(conn, "if_out_errors_total")] == [
        ("leaf-01", "eth0", 0.0),
        ("leaf-01", "lo", 0.0),
        ("leaf-01", "sit0", 0.0),
    ]
    path = tmp_path / "snmp.prom"
    path.write_text(
        'ifInErrors{ifIndex="21",ifName="Ethernet21",instance="leaf-02:9116",job="snmp"} 17\n'
        'ifInErrors{ifIndex="22",ifName="",instance="leaf-02:9116",job="snmp"} 3\n'
    )
    ingest(conn, path)
    assert [(h, e, v) for h, e, v, _ in metric(conn, "if_in_errors_total")] == [
        ("leaf-02", "22", 3.0),
        ("leaf-02", "Ethernet21", 17.0),
    ]


def test_unknown_metrics_keep_distinguishing_labels_in_the_entity(conn):
    ingest(conn, DCGM / "gh-dcgm-exporter-pr261_metrics_clock-events-count.prom")
    assert [e for _, e, _, _ in metric(conn, "DCGM_EXP_CLOCK_EVENTS_COUNT")] == [
        f'gpu0{{clock_event="{ev}",window_size_in_ms="300000"}}' for ev in ("gpu_idle", "hw_thermal", "sw_thermal")
    ]


def test_promtool_dump_is_ms_and_openmetrics_dump_is_seconds(conn):
    ingest(conn, DCGM / "prometheus_promtool_tsdb-dump_golden.txt")
    ingest(conn, DCGM / "prometheus_promtool_tsdb-dump-openmetrics_golden.om")
    heavy = metric(conn, "heavy_metric")
    assert [(e, v, ts) for _, e, v, ts in heavy][:2] == [
        ('{foo="foo"}', 5.0, datetime(1970, 1, 1, 0, 0)),
        ('{foo="foo"}', 4.0, datetime(1970, 1, 1, 0, 1)),
    ]
    gauge = metric(conn, "my_gauge")
    assert [ts for _, _, _, ts in gauge][-1] == datetime(1970, 1, 1, 0, 4)  # 240.000 s
    assert [v for _, _, v, _ in gauge] == [9.0, 8.0, 0.0, 4.0, 7.0]


def test_scraped_text_without_timestamps_takes_the_file_mtime(conn, tmp_path):
    path = tmp_path / "scrape.prom"
    path.write_text('DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="gpu-003"} 312.5\n')
    when = datetime(2026, 11, 29, 3, 0, 0)
    epoch = calendar.timegm(when.timetuple())
    os.utime(path, (epoch, epoch))
    report = ingest(conn, path)
    assert metric(conn, "gpu_power_watts") == [("gpu-003", "gpu0", 312.5, when)]
    assert report.notes == ["1 samples carry no timestamp: stamped with the file's mtime 2026-11-29 03:00:00 UTC"]


def test_malformed_lines_are_counted_with_their_line_numbers_and_the_rest_loads(conn, tmp_path):
    path = tmp_path / "bad.prom"
    path.write_text(
        "# TYPE x gauge\n"
        'x{a="1"} 1 1795000000000\n'
        'x{a="1" 2 1795000000000\n'  # unterminated labels
        'x{a="1"} twelve 1795000000000\n'  # value not a number
        'x{a="1"} 3 17950000000000000000\n'  # timestamp out of range
        'x{a="1"} 4 1795000060000\n'
    )
    report = ingest(conn, path)
    assert report.rows == 2
    assert report.rejected == 3
    assert [(line, reason) for line, reason, _ in report.reject_samples] == [
        (3, "malformed metric name or labels"),
        (4, "value is not a number"),
        (5, "bad timestamp"),
    ]


def test_gzip_text_takes_the_numbered_path_with_the_same_result(conn, tmp_path):
    src = DCGM / "gh-dcgm-exporter-250_metrics_v100_no-pci-bus-id.prom"
    gz = tmp_path / "scrape.prom.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    assert ingest(conn, gz).rows == 7


def test_a_promql_answer_pasted_as_text_is_refused_as_unknown_format(conn):
    report = ingest_file(conn, DCGM / "gh-dcgm-235_promql-result_xid-errors-err_code.txt", IngestOptions())
    assert report.status == "failed"
    assert "unknown format" in report.error


def test_crlf_lines_blank_lines_and_braces_inside_label_values_still_parse(conn, tmp_path):
    path = tmp_path / "odd.prom"
    path.write_bytes(
        b'# HELP x a "} " in help text\r\n'
        b'x{gpu="0",Hostname="h1",note="a} b"} 1 1795000000000\r\n'
        b"\r\n"
        b"   \r\n"
        b'x{gpu="0",Hostname="h1",note="c"} 2 1795000000000\r\n'
        b"bare_metric 3 1795000000000\r\n"
    )
    report = ingest(conn, path)
    assert (report.rows, report.rejected) == (3, 0)
    assert [(e, v) for _, e, v, _ in metric(conn, "x")] == [('gpu0{note="a} b"}', 1.0), ('gpu0{note="c"}', 2.0)]
    assert [v for _, _, v, _ in metric(conn, "bare_metric")] == [3.0]


def test_a_truncated_gzip_is_refused_with_a_clear_message_and_multi_member_gzip_loads(conn, tmp_path):
    body = "".join(f'x{{Hostname="h",gpu="0"}} {i} {1795000000000 + i * 1000}\n' for i in range(5000)).encode()
    cut = tmp_path / "cut.prom.gz"
    cut.write_bytes(gzip.compress(body)[:2000])
    report = ingest_file(conn, cut, IngestOptions(format="prometheus"))
    assert report.status == "failed"
    assert "truncated or corrupt gzip" in report.error
    assert conn.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
    bad = bytearray(gzip.compress(body))
    bad[-8] ^= 0xFF  # the CRC of the text: inflating succeeds, the check fails (DuckDB's reader does not look)
    crc = tmp_path / "crc.prom.gz"
    crc.write_bytes(bytes(bad))
    report = ingest_file(conn, crc, IngestOptions(format="prometheus"))
    assert report.status == "failed" and "truncated or corrupt gzip" in report.error
    assert conn.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
    two = tmp_path / "two.prom.gz"
    two.write_bytes(gzip.compress(body[:40]) + gzip.compress(body[40:80]))  # two whole lines, one per member
    assert ingest(conn, two).rows == 2


def test_a_gzipped_openmetrics_file_is_told_by_its_last_line(conn, tmp_path):
    # the text's tail is read as the gzip is checked: 200,000 lines (~7 MB of text) end with `# EOF`
    lines = "".join(f'x{{Hostname="h",gpu="{i % 8}"}} {i} {1795000000 + i // 8}\n' for i in range(200_000))
    path = tmp_path / "om.txt.gz"
    path.write_bytes(gzip.compress(("# TYPE x gauge\n" + lines + "# EOF\n").encode()))
    assert ingest(conn, path).rows == 200_000
    assert metric(conn, "x")[0][3] == datetime(2026, 11, 18, 11, 6, 40)  # seconds, not milliseconds


def test_openmetrics_integer_timestamps_are_seconds(conn, tmp_path):
    path = tmp_path / "om.txt"
    path.write_text('# TYPE x gauge\nx{Hostname="h"} 1 1795000000\n# EOF\n')
    ingest(conn, path)
    assert metric(conn, "x")[0][3] == datetime(2026, 11, 18, 11, 6, 40)


def test_a_scrape_without_a_host_label_says_pass_host(conn):
    path = DCGM / "dcgm-exporter_README_metrics_blank-sentinel.prom"  # the vendor README's sample: no Hostname
    report = ingest(conn, path)
    assert any(n.startswith("no host: 3 series carry no Hostname") and n.endswith("pass --host") for n in report.notes)
    assert any("1 GPU(s) kept by UUID, model and PCI id without a host" in n for n in report.notes)
    # the GPU's identity is kept without a host (it was lost before: gpus.host was NOT NULL)
    assert conn.execute("SELECT host, entity, uuid FROM gpus").fetchall() == [
        (None, "gpu0", "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52")
    ]
    other = memory_store()  # a fresh store: the same file is not ingested twice
    try:
        report = ingest(other, path, host="gpu-node-7")
        assert not any(n.startswith("no host") for n in report.notes)
        assert other.execute("SELECT host, entity, uuid FROM gpus").fetchall() == [
            ("gpu-node-7", "gpu0", "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52")
        ]
    finally:
        other.close()


def test_dcgm_attribute_labels_are_not_part_of_a_gpus_identity(conn):
    # A real A800 MIG scrape with dcgm-exporter's attribute labels DCGM_FI_DRIVER_VERSION and DCGM_FI_PROCESS_NAME
    # on every series; DCGM_FI_DEV_ENC_UTIL has no canonical name, so its entity is built from the residual labels.
    path = DCGM / "notes-a800-mig_dcgm-exporter_process-name-label.prom"
    report = ingest_file(conn, path, IngestOptions())
    assert (report.format, report.rejected) == ("prometheus", 0)
    enc = conn.execute("SELECT DISTINCT entity FROM metrics WHERE metric = 'DCGM_FI_DEV_ENC_UTIL' ORDER BY 1")
    enc = enc.fetchall()
    assert enc == [(f"gpu{i}",) for i in range(1, 8)]  # not gpu1{DCGM_FI_PROCESS_NAME="/usr/bin/dcgm-exporter"}
    assert conn.execute("SELECT count(*) FROM metrics WHERE entity LIKE '%DCGM_FI_%'").fetchone() == (0,)
    rows = conn.execute(
        "SELECT entity, value FROM metrics WHERE host = 'msxf-hpc-64-35-ai' AND metric = "
        "'gpu_temp_celsius' AND entity IN ('gpu0/gi5', 'gpu3') ORDER BY 1"
    ).fetchall()
    assert rows == [("gpu0/gi5", 33.0), ("gpu3", 31.0)]
    assert conn.execute("SELECT uuid, model FROM gpus WHERE entity = 'gpu7'").fetchone() == (
        "GPU-4e75c9ab-0ed7-8a57-75f5-23761b9f053f",
        "NVIDIA A800-SXM4-80GB",
    )


def test_other_dcgm_attribute_labels_and_dcgm_fi_dev_name_as_the_model(conn, tmp_path):
    # The same real scrape with the attribute labels `dcgm-exporter -a` can add instead (serial, brand, name):
    # still gpu1, and DCGM_FI_DEV_NAME names the model when modelName is absent.
    text = (DCGM / "notes-a800-mig_dcgm-exporter_process-name-label.prom").read_text()
    text = text.replace('modelName="NVIDIA A800-SXM4-80GB"', 'DCGM_FI_DEV_NAME="NVIDIA A800-SXM4-80GB"').replace(
        'DCGM_FI_PROCESS_NAME="/usr/bin/dcgm-exporter"', 'DCGM_FI_DEV_BRAND="NVIDIA",DCGM_FI_DEV_SERIAL="165282"'
    )
    path = tmp_path / "attrs.prom"
    path.write_text(text)
    ingest_file(conn, path, IngestOptions())
    assert conn.execute("SELECT count(*) FROM metrics WHERE entity LIKE '%{%'").fetchone() == (0,)
    assert conn.execute("SELECT model FROM gpus WHERE entity = 'gpu1'").fetchone() == ("NVIDIA A800-SXM4-80GB",)


def test_legacy_pre_2_0_exporter_names_map_to_the_catalog(conn):
    # gpu-monitoring-tools' prometheus-dcgm sample output: lowercase dcgm_* names and a lowercase uuid label.
    path = DCGM / "gpu-monitoring-tools_README_prometheus-dcgm_legacy-names.prom"
    report = ingest_file(conn, path, IngestOptions(host="dgx1"))
    assert (report.format, report.rejected) == ("prometheus", 0)
    got = dict(conn.execute("SELECT metric, value FROM metrics WHERE host = 'dgx1' AND entity = 'gpu0'").fetchall())
    assert got == {
        "gpu_temp_celsius": 34.0,
        "gpu_util_percent": 0.0,
        "gpu_power_watts": 31.737,
        "gpu_sm_clock_mhz": 135.0,
        "gpu_energy_millijoules_total": 7824041.0,
        "gpu_xid_last": 0.0,
    }
    assert conn.execute("SELECT uuid FROM gpus WHERE host = 'dgx1' AND entity = 'gpu0'").fetchone() == (
        "GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323",
    )
    assert {r[0] for r in conn.execute("SELECT metric FROM metric_catalog").fetchall()} >= set(got)


def _another_source_names(conn, uuid: str, host: str, path: str = "/dcgm/node-7.prom") -> None:
    """A source already in the store that gives this GPU UUID a host (a scrape with Hostname, --host)."""
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, source_key) "
        "VALUES (900, ?, 'x', 'prometheus', 1, 1, 0, 'x')",
        [path],
    )
    conn.execute("INSERT INTO gpus VALUES (?, 'gpu0', NULL, ?, 'Tesla V100', 900)", [host, uuid])


@pytest.mark.parametrize(
    ("sample", "uuid", "series"),
    [
        ("dcgm-exporter_README_metrics_blank-sentinel.prom", "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52", 3),
        (
            "gpu-monitoring-tools_README_prometheus-dcgm_legacy-names.prom",
            "GPU-8f640a3c-7e9a-608d-02a3-f4372d72b323",
            3,
        ),
    ],
)
def test_a_scrape_without_a_host_takes_the_host_its_gpu_uuid_has_in_the_store(conn, sample, uuid, series):
    # Real raw scrapes (`curl :9400/metrics`, the pre-2.0 exporter) name no host; a GPU's UUID is its identity
    # anywhere, so another source that puts the same UUID on a host gives it (FQDN shortened like every host).
    _another_source_names(conn, uuid, "gpu-node-7")
    report = ingest(conn, DCGM / sample)
    assert not any(n.startswith("no host:") for n in report.notes)
    assert any(
        n == "no host label: host gpu-node-7 taken from the UUID of its 1 GPU(s), which /dcgm/node-7.prom names "
        "on that host"
        for n in report.notes
    )
    hosts = conn.execute("SELECT DISTINCT host FROM metrics").fetchall()
    assert hosts == [("gpu-node-7",)]
    assert conn.execute("SELECT count(DISTINCT metric) FROM metrics").fetchone()[0] >= series
    assert conn.execute("SELECT host, uuid FROM gpus WHERE source_id <> 900").fetchall() == [("gpu-node-7", uuid)]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_hostless_scrape_takes_its_host_from_a_scrape_of_the_same_run_whatever_the_order(tmp_path, workers):
    # The raw scrape comes first and both are small enough to be parsed together: were it parsed before the
    # other is in the store, its series would have no host. The other is the same GPU as dcgm-exporter 2.x
    # and later label it (`Hostname`), scraped an hour later.
    inputs = tmp_path / "in"
    inputs.mkdir()
    raw = DCGM / "dcgm-exporter_README_metrics_blank-sentinel.prom"
    uuid = 'UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"'
    (inputs / "a-raw.prom").write_text(raw.read_text())
    (inputs / "z-node-7.prom").write_text(raw.read_text().replace(uuid, f'{uuid}, Hostname="gpu-node-7"'))
    for name, at in (("a-raw.prom", 1_700_000_000), ("z-node-7.prom", 1_700_003_600)):
        os.utime(inputs / name, (at, at))
    db = tmp_path / "store.duckdb"
    reports = ingest_paths(db, [inputs], IngestOptions(), workers=workers)
    assert [(Path(r.path).name, r.status) for r in reports] == [("a-raw.prom", "loaded"), ("z-node-7.prom", "loaded")]
    assert any(n.startswith("no host label: host gpu-node-7 taken from the UUID") for n in reports[0].notes)
    with open_store(db, read_only=True) as conn:
        hosts = conn.execute("SELECT DISTINCT host FROM metrics WHERE source_id = ?", [reports[0].source_id]).fetchall()
    assert hosts == [("gpu-node-7",)]


def test_a_uuid_two_hosts_claim_gives_no_host(conn):
    uuid = "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"
    _another_source_names(conn, uuid, "gpu-node-7")
    conn.execute("INSERT INTO gpus VALUES ('gpu-node-8', 'gpu0', NULL, ?, 'Tesla V100', 900)", [uuid])
    report = ingest(conn, DCGM / "dcgm-exporter_README_metrics_blank-sentinel.prom")
    assert any(n.startswith("no host: 3 series") for n in report.notes)
    assert conn.execute("SELECT DISTINCT host FROM metrics").fetchall() == [(None,)]


def test_a_prometheus_side_scrape_takes_the_host_from_instance(conn, tmp_path):
    # As Prometheus returns a raw dcgm-exporter series (no Hostname): `instance` is the scrape target host:port.
    path = tmp_path / "federate.prom"
    path.write_text(
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-8c16e996-bd76-aa91-17e7-b48bcd0208ba",device="nvidia0",'
        'instance="gpu-node-3.cluster.local:9400",job="dcgm-exporter"} 41 1795000000000\n'
    )
    report = ingest(conn, path)
    assert not any(n.startswith("no host") for n in report.notes)
    assert conn.execute("SELECT host, entity, uuid FROM gpus").fetchall() == [
        ("gpu-node-3", "gpu0", "GPU-8c16e996-bd76-aa91-17e7-b48bcd0208ba")
    ]
    assert conn.execute("SELECT host, name FROM host_names").fetchall() == [("gpu-node-3", "gpu-node-3.cluster.local")]
