"""Syslog variants seen in real exports: SONiC's year-first stamps, printk caller ids, the older NVRM
fallen-off-the-bus wording, NIC carrier lines of every Ethernet driver, and Lustre server lines."""

from __future__ import annotations

import json
import os
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

SYSLOG = REAL_SAMPLES / "syslog"


def typed(conn, name: str, **opts) -> list[dict]:
    report = ingest_file(conn, SYSLOG / name, IngestOptions(**opts))
    assert report.status == "loaded", report.error
    assert report.format == "syslog" and report.rejected == 0
    cur = conn.execute(
        "SELECT ts, host, kind, component, severity, message, fields, line FROM events "
        "WHERE kind <> 'log' ORDER BY line"
    )
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) | {"fields": json.loads(r[6] or "{}")} for r in cur.fetchall()]


def all_rows(conn) -> list[tuple]:
    return conn.execute("SELECT ts, host, severity, message FROM events ORDER BY line").fetchall()


def test_sonic_year_first_stamps_keep_their_year_and_microseconds(conn):
    typed(conn, "gh-sonic-platform-daemons-pr539_sonic-year-first_pmon-xcvrd.log", year=2019)  # --year ignored
    assert all_rows(conn) == [
        (datetime(2024, 9, 18, 21, 37, 2, 573152), "sonic", "notice", all_rows(conn)[0][3]),
        (
            datetime(2024, 9, 19, 15, 56, 48, 794489),
            "sonic",
            "notice",
            "pmon#xcvrd: Transceiver not present in port Ethernet232",
        ),
    ]


def test_sonic_year_first_with_pid_and_warning(conn):
    typed(conn, "gh-sonic-buildimage-22112_sonic-year-first_pmon-xcvrd-warning.log", timezone="Asia/Shanghai")
    rows = all_rows(conn)
    assert [(r[0], r[2]) for r in rows] == [
        (datetime(2024, 12, 24, 3, 45, 10, 916931), "warning"),
        (datetime(2024, 12, 24, 3, 45, 10, 919635), "warning"),
    ]
    assert rows[0][3].startswith("pmon#xcvrd[29]: $$$ Ethernet1 handle_port_update_event()")


def test_printk_caller_id_does_not_hide_the_event(conn):
    got = typed(conn, "lkp-202302211644_dmesg-printk-caller_e1000-link-up.log", host="lkp-vm")
    assert [(e["line"], e["kind"], e["component"], e["host"]) for e in got] == [(5, "link_up", "eth0", "lkp-vm")]
    assert got[0]["message"] == "e1000: eth0 NIC Link is Up 1000 Mbps Full Duplex, Flow Control: RX"
    ups = conn.execute(
        "SELECT line, json_extract(fields, '$.uptime_s')::DOUBLE FROM events WHERE kind = 'log' ORDER BY line LIMIT 2"
    ).fetchall()
    assert ups == [(1, 24.211773), (2, 24.212462)]  # the collapsed `[ 24.212462][ T32]` form too


def test_older_nvrm_wording_is_a_gpu_fallen_off_the_bus(conn):
    got = typed(conn, "ubuntuforums-2017_rfc3164_nvrm-gpu-at-fallen-off-bus-older-wording.log", year=2017)
    assert [(e["line"], e["kind"], e["component"], e["ts"]) for e in got] == [
        (2, "xid", "00000000:01:00.0", datetime(2017, 6, 5, 22, 36, 51)),
        (4, "gpu_fell_off_bus", "00000000:01:00.0", datetime(2017, 6, 5, 22, 36, 51)),
    ]
    assert got[1]["host"] == "zozio32-p6-2487ea"


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "gh-sonic-buildimage-7310_sonic-hiprec_igb-nic-link-down.log",
            [("link_down", "eth0", "igb", "0000:00:14.0", None, None)],
        ),
        (
            "gh-pf-ring-293_rfc3164_ixgbe-nic-link-up-down.log",
            [
                ("link_up", "eth11", "ixgbe", "0000:08:00.0", 10000, None),
                ("link_down", "eth11", "ixgbe", "0000:08:00.0", None, None),
            ],
        ),
        (
            "list-i40e-pause-frames_dmesg_i40e-nic-link-up.log",
            [("link_up", "eth0", "i40e", "0000:c1:00.0", 40000, None)],
        ),
        (
            "lkml-target-devel-2023-01_dmesg-r_ice-nic-link-up-fec.log",  # dmesg -r: the level first
            [("link_up", "ice0", "ice", "0000:01:00.0", 25000, "RS-FEC")],
        ),
        (
            "lkml-swiotlb-force_dmesg_bnxt-en-nic-link-up.log",
            [("link_up", "eno2np0", "bnxt_en", "0000:3b:00.0", 25000, None)],
        ),
        (
            "gh-ustclug-86_dmesg-T_e1000e-nic-link-flap.log",
            [("link_down", "eth1", "e1000e", None, None, None)]
            + [("link_up", "eth1", "e1000e", None, 1000, None)] * 2
            + [("link_down", "eth1", "e1000e", None, None, None), ("link_up", "eth1", "e1000e", None, 1000, None)],
        ),
    ],
)
def test_nic_carrier_lines_of_every_driver_are_link_events(conn, name, expected):
    got = typed(conn, name, year=2021, host="node1")
    assert [
        (
            e["kind"],
            e["component"],
            e["fields"]["driver"],
            e["fields"]["pci"],
            e["fields"]["speed_mbps"],
            e["fields"]["fec"],
        )
        for e in got
    ] == expected


def test_nic_link_times_and_hosts(conn):
    got = typed(conn, "gh-node-problem-detector-pr708_dmesg-T_ixgbe-nic-link.log", host="node1")
    assert [(e["ts"], e["kind"], e["component"], e["host"]) for e in got] == [
        (datetime(2021, 5, 26, 15, 21, 5), "link_down", "enp175s0f1", "node1"),
        (datetime(2021, 5, 26, 15, 21, 6), "link_up", "enp175s0f1", "node1"),
    ]


def test_sata_link_down_is_not_a_nic(conn):
    assert typed(conn, "gh-mrchromebox-firmware-143_dmesg_ata-sata-link-down-not-a-nic.log", host="nas") == []


def test_lustre_server_line_keeps_server_and_client_in_their_roles(conn):
    (e,) = typed(conn, "gh-iml-pr107_rfc3164-fqdn_lustre-mgs-server-connection-restored.log", year=2018)
    assert (e["kind"], e["component"], e["host"], e["ts"]) == (
        "lustre_restored",
        "MGS",
        "lotus-55vm15",
        datetime(2018, 6, 27, 15, 59, 33),
    )
    assert e["fields"] == {
        "role": "server",
        "server": "MGS",
        "client": "c7547940-8b66-9e67-9f49-79141907f91f",
        "client_nid": "10.14.83.21@tcp",
    }


def test_lustre_client_line_is_unchanged(conn):
    got = typed(conn, "gh-aws-parallelcluster-2701_rfc3164_lustre-connection-lost.log", year=2021)
    lost = [e for e in got if e["kind"] == "lustre_lost"]
    assert lost and lost[0]["component"] == "no2zxbmv-MDT0000"
    assert lost[0]["fields"]["client"] == "no2zxbmv-MDT0000-mdc-000000001785e248"


def test_year_from_the_mtime_is_said_in_the_report(conn, tmp_path):
    path = tmp_path / "copied.log"
    path.write_bytes((SYSLOG / "gh-pf-ring-293_rfc3164_ixgbe-nic-link-up-down.log").read_bytes())
    os.utime(path, (datetime(2023, 3, 1).timestamp(),) * 2)
    report = ingest_file(conn, path, IngestOptions())
    assert any(
        "year taken from the file's modification time (2023-03-01): 2022; pass --year" in n for n in report.notes
    ), report.notes  # Nov is after the mtime's March: the year before
    conn.execute("DELETE FROM events")
    report = ingest_file(
        conn, SYSLOG / "gh-sonic-platform-daemons-pr539_sonic-year-first_pmon-xcvrd.log", IngestOptions()
    )
    assert not any("year taken" in n for n in report.notes)  # the stamps carry their year


def test_glog_year_from_the_mtime_is_said_unless_given(conn):
    log = REAL_SAMPLES / "training" / "gh-megatron-lm-1880_torchrun-glog_exitcode-11.log"
    report = ingest_file(conn, log, IngestOptions())
    assert any("2 glog time stamps carry no year" in n and "pass --year" in n for n in report.notes)
    conn.execute("DELETE FROM job_incidents")
    report = ingest_file(
        conn, REAL_SAMPLES / "training" / "gh-llama-856_torchrun-2.1-bracketed_exitcode-9.log", IngestOptions()
    )
    assert not any("carry no year" in n for n in report.notes)


def test_one_host_name_rule_for_syslog_and_prometheus_with_the_fqdn_kept(conn):
    """Syslog's FQDN and dcgm-exporter's Hostname label are shortened by the same rule, the names kept."""
    typed(conn, "gh-iml-pr107_rfc3164-fqdn_lustre-mgs-server-connection-restored.log", year=2018)
    prom = REAL_SAMPLES / "dcgm" / "gh-dcgm-exporter-317_metrics_clock-throttle-reasons_a30-mig.prom"
    assert ingest_file(conn, prom, IngestOptions()).status == "loaded"
    hosts = conn.execute("SELECT DISTINCT host FROM events UNION SELECT DISTINCT host FROM metrics ORDER BY 1")
    assert hosts.fetchall() == [("hldy-data-k8s-gpu-a30-node0110",), ("lotus-55vm15",)]
    assert conn.execute("SELECT DISTINCT host, name FROM host_names ORDER BY 1").fetchall() == [
        ("hldy-data-k8s-gpu-a30-node0110", "hldy-data-k8s-gpu-a30-node0110.mt"),
        ("lotus-55vm15", "lotus-55vm15.lotus.hpdd.lab.intel.com"),
    ]
