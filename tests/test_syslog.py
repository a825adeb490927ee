"""Syslog / kernel-log ingest: every real sample loads with nothing dropped, and the typed events are right."""

from __future__ import annotations

import csv
import gzip
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import REAL_DATA, REAL_SAMPLES

from synestra_cli.formats import envelope
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.kernel import kernel_events as kev
from synestra_cli.formats.kernel import syslog
from synestra_cli.ingest import ingest_file
from synestra_cli.store.connect import memory_store

SYSLOG = REAL_SAMPLES / "syslog"
SAMPLES = sorted(p for p in SYSLOG.glob("*.log"))
LINUX = REAL_DATA / "loghub-2k" / "Linux" / "Linux_2k.log"


def load(conn, path: Path, **opts):
    report = ingest_file(conn, path, IngestOptions(**opts))
    assert report.status == "loaded", report.error
    assert report.format == "syslog"
    return report


def events(conn, path: Path, kind: str | None = None) -> list[dict]:
    sql = """SELECT e.* FROM events e JOIN sources s USING (source_id)
             WHERE s.path = ? AND (? IS NULL OR e.kind = ?) ORDER BY e.line"""
    cur = conn.execute(sql, [str(path.resolve()), kind, kind])
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    for r in rows:
        r["fields"] = json.loads(r["fields"]) if r["fields"] else {}
    return rows


def write(tmp_path: Path, name: str, text: str, mtime: datetime | None = None) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    if mtime:
        stamp = mtime.replace(tzinfo=UTC).timestamp()
        os.utime(path, (stamp, stamp))
    return path


def file_year(path: Path, month: int) -> int:
    """The year syslog inference must give a line of `month`: the mtime's, or the one before if later."""
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    return mtime.year - (month > mtime.month)


@pytest.mark.parametrize("path", SAMPLES + [LINUX], ids=lambda p: p.name[:40])
def test_every_real_sample_loads_every_line(conn, path):
    report = load(conn, path)
    assert report.rejected == 0
    # Each non-empty line is an event or folded into the event before it: nothing dropped (but the prompt
    # and echoed command a paste starts with: formats/envelope.py).
    text = path.read_text(encoding="utf-8")
    env = envelope.detect(text)
    prompts = set(env.prompt_lines) if env else set()
    lines = [ln for i, ln in enumerate(text.splitlines(), start=1) if ln and i not in prompts]
    stored = sum(1 + (e["message"] or "").count("\n") for e in events(conn, path))
    assert stored == len(lines)


def test_xid_codes_bus_ids_and_year_from_mtime(conn):
    path = SYSLOG / "gh-gpu-operator-1146_rfc3164_xid48_xid64.log"
    load(conn, path)
    xids = events(conn, path, "xid")
    assert [(e["code"], e["component"], e["host"]) for e in xids] == [
        (48, "00000000:07:00.0", "worker4"),
        (64, "00000000:07:00.0", "worker4"),
    ]
    assert xids[0]["ts"] == datetime(file_year(path, 12), 12, 2, 11, 38, 47)
    assert xids[0]["fields"]["pid"] is None and xids[0]["fields"]["process"] is None  # pid='<unknown>'
    assert xids[0]["fields"]["uptime_s"] == pytest.approx(219.470994)


def test_xid_pid_process_and_old_driver_without_pid(conn):
    pr46 = SYSLOG / "gh-gpud-pr46_dmesg-ctime_xid13_xid109_peermem.log"
    old = SYSLOG / "gh-dxvk-1027_dmesg_xid31_xid13_xid32.log"
    load(conn, pr46)
    load(conn, old)
    x109 = [e for e in events(conn, pr46, "xid") if e["code"] == 109][0]
    assert x109["fields"]["pid"] == 1797828 and x109["fields"]["process"] == "pt_main_thread"
    assert x109["component"] == "00000000:CB:00.0"
    assert x109["ts"] == datetime(2024, 8, 30, 11, 43, 14)  # dmesg -T carries its year
    assert [e["code"] for e in events(conn, old, "xid")] == [31, 13, 13, 13, 13, 32]


def test_xid_that_annotates_an_earlier_xid(conn):
    caused = SYSLOG / "gh-open-gpu-kernel-modules-1150_journal_xid45_caused-by-xid149.log"
    gb200 = SYSLOG / "gpud_kmsg-test_xid149_xid154_gb200.log"
    load(conn, caused)
    load(conn, gb200)
    assert [e["fields"]["refers_to_xid"] for e in events(conn, caused, "xid")] == [149, 145, 145, 145]
    x154 = [e for e in events(conn, gb200, "xid") if e["code"] == 154]
    # 154 names no Xid: it refers to the previous Xid of the same GPU (none logged for 0019:01:00 here).
    assert [(e["component"], e["fields"].get("refers_to_xid")) for e in x154] == [
        ("00000009:01:00.0", 149),
        ("00000019:01:00.0", None),
        ("00000018:01:00.0", None),
        ("00000008:01:00.0", 149),
    ]
    assert x154[0]["fields"]["recovery_action"] == "Drain and Reset"


def test_mig_instance_and_driver_without_pci_prefix(conn, tmp_path):
    # Vendor-authored example (driver source comment) and the very old "no PCI:" form (log-formats.md A.1).
    path = write(
        tmp_path,
        "mig.log",
        "Nov 29 10:00:00 gpu-001 kernel: NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7194, "
        "Contained: CE User Channel (0x9). RST: No, D-RST: No\n"
        "Nov 29 10:00:01 gpu-001 kernel: NVRM: Xid (0000:03:00): 14, Channel 00000001\n",
        mtime=datetime(2026, 11, 30),
    )
    load(conn, path)
    mig, old = events(conn, path, "xid")
    assert (mig["code"], mig["component"], mig["fields"]["gpu_instance"], mig["fields"]["pid"]) == (
        94,
        "00000000:01:00.0",
        5,
        7194,
    )
    assert (old["code"], old["component"]) == (14, "00000000:03:00.0")


def test_fallen_off_the_bus_report_without_xid_is_one_event(conn):
    path = SYSLOG / "gh-nvsentinel-155_dmesg_fallen-off-bus_multiline_no-xid.log"
    report = load(conn, path)
    fell = events(conn, path, "gpu_fell_off_bus")
    assert len(fell) == 1 and report.rejected == 0
    assert fell[0]["component"] == "00000000:B3:00.0"
    assert fell[0]["message"].count("\n") == 2 and "fallen off the bus" in fell[0]["message"]
    assert len(events(conn, path)) == 3  # the report, then two plain lines


def test_link_state_changes(conn):
    eth = SYSLOG / "gh-cubecos-733_journal_mlx5e-link-up-flap.log"
    ib = SYSLOG / "gh-gpud-pr1209_journal-k_mlx5-ib-port-state.log"
    module = SYSLOG / "gh-arm-nas-16_dmesg_mlx5-port-module-event-plugged.log"
    sonic = SYSLOG / "gh-sonic-194_rsyslog-hiprec-with-severity.log"
    for p in (eth, ib, module, sonic):
        load(conn, p)
    ups = events(conn, eth, "link_up")
    assert [(e["component"], e["fields"]["pci"]) for e in ups] == [("eth1", "0000:01:00.1")] * 4
    ports = events(conn, ib, "ib_port_state")
    assert [(e["component"], e["fields"]["port"], e["fields"]["state"]) for e in ports] == [
        ("mlx5_5", 1, "INIT"),
        ("mlx5_5", 1, "ACTIVE"),
    ]
    (plugged,) = events(conn, module, "port_module")
    assert plugged["fields"] == {"pci": "0004:01:00.0", "module": 0, "status": "Cable plugged", "error": None}
    (down,) = events(conn, sonic, "link_down")
    assert (down["component"], down["severity"], down["host"]) == ("12500", "warning", "sonic-mellanox")


@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "gh-gpu-burn-1_dmesg_aer-fatal_then_xid79.log",
            [
                ("corrected", "0000:00:02.0", "Data Link Layer", ["Replay Timer Timeout"]),
                ("fatal", "0000:00:02.0", "Transaction Layer", ["Surprise Down Error"]),
            ],
        ),
        (
            "gh-returnn-1500_dmesg-relative_aer-fatal-cmpltto.log",
            [("fatal", "0000:00:03.0", "Transaction Layer", ["SDES", "CmpltTO"])],
        ),
        (
            "gh-pop-3363_rfc3164_aer-correctable_new-kernel.log",
            [
                ("corrected", "0000:00:03.1", "Data Link Layer", ["Timeout"]),
                ("corrected", "0000:00:03.1", "Data Link Layer", ["BadTLP"]),
            ],
        ),
        (
            "gh-gsconnect-1052_journal-ru-locale_aer-corrected.log",
            [("corrected", "0000:00:1c.5", "Physical Layer", ["RxErr"])],
        ),
        (
            "gh-nbfc-181_journal_aer-corrected_old-kernel.log",
            [("corrected", "0000:00:1c.5", "Physical Layer", ["Receiver Error"])],
        ),
    ],
)
def test_aer_severity_device_and_error_bits(conn, name, expected):
    path = SYSLOG / name
    load(conn, path)
    got = [
        (e["fields"]["severity"], e["component"], e["fields"]["type"], e["fields"]["errors"])
        for e in events(conn, path, "aer")
    ]
    assert got == expected


def test_localized_month_names(conn):
    ru = SYSLOG / "gh-gsconnect-1052_journal-ru-locale_aer-corrected.log"  # "фев 12"
    nl = SYSLOG / "gh-nbfc-181_journal_aer-corrected_old-kernel.log"  # "jan. 29"
    load(conn, ru)
    load(conn, nl)
    assert events(conn, ru)[0]["ts"] == datetime(file_year(ru, 2), 2, 12, 0, 48, 2)
    assert events(conn, nl)[0]["ts"] == datetime(file_year(nl, 1), 1, 29, 20, 50, 17)
    assert events(conn, ru)[0]["host"] is None and events(conn, nl)[0]["host"] == "kevin"


def test_nfs_and_lustre(conn, tmp_path):
    ganesha = SYSLOG / "gh-nfs-ganesha-1295_dmesg_nfs-not-responding.log"
    surface = SYSLOG / "gh-linux-surface-1494_dmesg_nfs-timed-out.log"
    lustre = SYSLOG / "gh-aws-parallelcluster-2701_rfc3164_lustre-connection-lost.log"
    for p in (ganesha, surface, lustre):
        load(conn, p)
    kinds = [(e["kind"], e["component"]) for e in events(conn, ganesha)]
    assert kinds == [("nfs_ok", "100.73.159.36")] * 2 + [("nfs_not_responding", "100.73.159.36")] * 3
    assert [e["fields"].get("mode") for e in events(conn, surface)] == ["timed out", "timed out", "still trying", None]
    (lost,) = events(conn, lustre, "lustre_lost")
    assert (lost["component"], lost["fields"]["server_nid"]) == ("no2zxbmv-MDT0000", "10.0.47.232@tcp")
    # The recovery line, in the kernel's own format string ("%s: Connection restored to %s (at %s)").
    back = write(
        tmp_path,
        "lustre.log",
        "Apr 30 13:52:10 ip-10-0-33-4 kernel: Lustre: no2zxbmv-MDT0000-mdc-"
        "000000001785e248: Connection restored to no2zxbmv-MDT0000 (at 10.0.47.232@tcp)\n",
    )
    load(conn, back)
    assert [(e["kind"], e["component"]) for e in events(conn, back)] == [("lustre_restored", "no2zxbmv-MDT0000")]


def test_oom_kills_once_per_kill(conn):
    new = SYSLOG / "gh-docker-for-linux-1001_rfc3164_oom-killed-new-format.log"
    old = SYSLOG / "gh-genular-pandora-49_journal_oom-kill-old-format.log"
    constraint = SYSLOG / "gh-py-autovod-7_dmesg-T_oom-kill-constraint.log"
    for p in (new, old, constraint):
        load(conn, p)
    assert [(e["fields"]["pid"], e["fields"]["process"]) for e in events(conn, new, "oom_kill")] == [(15784, "python3")]
    assert [(e["fields"]["pid"], e["fields"]["process"]) for e in events(conn, old, "oom_kill")] == [(27438, "R")]
    (c,) = events(conn, constraint, "oom_kill")
    assert (c["fields"]["pid"], c["fields"]["process"]) == (7899, "python")
    assert c["fields"]["constraint"] == "CONSTRAINT_NONE"


def test_oom_kill_line_pair_counts_one_kill(conn, tmp_path):
    path = write(
        tmp_path,
        "oom.log",
        "Mar 30 08:24:00 n1 kernel: oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
        "mems_allowed=0,oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1,task=python,pid=7899,uid=0\n"
        "Mar 30 08:24:00 n1 kernel: Memory cgroup out of memory: Killed process 7899 (python) "
        "total-vm:11964kB, anon-rss:4288kB, file-rss:3028kB, shmem-rss:0kB\n",
    )
    load(conn, path)
    assert [(e["kind"], e["fields"].get("constraint")) for e in events(conn, path)] == [
        ("oom_kill", "CONSTRAINT_MEMCG"),
        ("log", None),
    ]


def test_nccl_warn(conn, tmp_path):
    path = write(
        tmp_path,
        "nccl.log",
        "Nov 29 10:00:00 gpu-001 python[4242]: gpu-001:4242:4300 [3] NCCL WARN "
        "NET/IB : Got completion from peer 10.0.0.2<55022> with error 12, opcode 0, len 0, vendor err 129\n",
    )
    load(conn, path)
    (w,) = events(conn, path, "nccl_warn")
    assert (w["fields"]["node"], w["fields"]["cuda_dev"]) == ("gpu-001", 3)
    assert w["fields"]["text"].startswith("NET/IB : Got completion")


def test_december_to_january_rollover(conn, tmp_path):
    text = "Dec 31 23:59:58 gpu-001 kernel: a\nJan  1 00:00:01 gpu-001 kernel: b\nJan  2 08:00:00 gpu-001 kernel: c\n"
    path = write(tmp_path, "roll.log", text, mtime=datetime(2027, 1, 5))
    load(conn, path)
    assert [e["ts"] for e in events(conn, path)] == [
        datetime(2026, 12, 31, 23, 59, 58),
        datetime(2027, 1, 1, 0, 0, 1),
        datetime(2027, 1, 2, 8, 0),
    ]
    # --year names the year the file starts in.
    other = write(tmp_path, "roll2.log", text + "Jan  3 00:00:00 gpu-001 kernel: d\n")
    load(conn, other, year=2024)
    assert [e["ts"].year for e in events(conn, other)] == [2024, 2025, 2025, 2025]


def test_timezone_applies_only_to_zoneless_stamps(conn, tmp_path):
    local = write(tmp_path, "local.log", "Jun 14 15:16:01 combo sshd[1]: x\n", mtime=datetime(2026, 7, 1))
    iso = write(tmp_path, "iso.log", "2021-12-19T20:35:40.572463+01:00 pluto rtkit-daemon[582]: y\n")
    load(conn, local, timezone="Europe/Paris")
    load(conn, iso, timezone="America/New_York")
    assert events(conn, local)[0]["ts"] == datetime(2026, 6, 14, 13, 16, 1)  # CEST = UTC+2
    assert events(conn, iso)[0]["ts"] == datetime(2021, 12, 19, 19, 35, 40, 572463)


def test_unknown_timezone_is_a_clear_error(conn, tmp_path):
    path = write(tmp_path, "tz.log", "Jun 14 15:16:01 combo sshd[1]: x\n")
    report = ingest_file(conn, path, IngestOptions(timezone="Mars/Olympus"))
    assert report.status == "failed" and "time zone" in report.error


def test_host_option_names_hostless_files_only(conn, tmp_path):
    dmesg = SYSLOG / "gh-linux-surface-1494_dmesg_nfs-timed-out.log"
    load(conn, dmesg, host="gpu-007")
    assert {e["host"] for e in events(conn, dmesg)} == {"gpu-007"}
    named = write(tmp_path, "named.log", "Jun 14 15:16:01 node-3.cluster.local sshd[1]: x\n")
    load(conn, named, host="gpu-007")
    assert events(conn, named)[0]["host"] == "node-3"  # short host name, as DCGM labels carry it


def test_uptime_only_files_end_at_the_file_mtime(conn, tmp_path):
    path = write(tmp_path, "dmesg.log", "[  100.500000] a\n[  102.000000] b\n", mtime=datetime(2026, 11, 29, 12))
    report = load(conn, path)
    assert [e["ts"] for e in events(conn, path)] == [
        datetime(2026, 11, 29, 11, 59, 58, 500000),
        datetime(2026, 11, 29, 12),
    ]
    assert any("modification time" in n for n in report.notes)
    rel = write(
        tmp_path, "rel.log", "[  +0.000000] a\n[  +1.500000] b\n[  +0.250000] c\n", mtime=datetime(2026, 11, 29, 12)
    )
    load(conn, rel)
    assert [e["ts"] for e in events(conn, rel)] == [
        datetime(2026, 11, 29, 11, 59, 58, 250000),
        datetime(2026, 11, 29, 11, 59, 59, 750000),
        datetime(2026, 11, 29, 12),
    ]


def test_journal_json(conn, tmp_path):
    # Field set per systemd.journal-fields(7) / log-formats.md A.0.1 (all values strings).
    rows = [
        {
            "__REALTIME_TIMESTAMP": "1700000000000000",
            "_HOSTNAME": "gpu-001",
            "SYSLOG_IDENTIFIER": "kernel",
            "_TRANSPORT": "kernel",
            "PRIORITY": "3",
            "_SOURCE_MONOTONIC_TIMESTAMP": "1843308145",
            "MESSAGE": "NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.",
        },
        {
            "__REALTIME_TIMESTAMP": "1700000001500000",
            "_HOSTNAME": "gpu-001",
            "SYSLOG_IDENTIFIER": "slurmd",
            "_PID": "812",
            "PRIORITY": "6",
            "MESSAGE": "launch task StepId=1.0",
        },
    ]
    path = write(tmp_path, "journal.json", "".join(json.dumps(r) + "\n" for r in rows))
    load(conn, path)
    xid, log = events(conn, path)
    assert (xid["ts"], xid["host"], xid["kind"], xid["code"], xid["severity"]) == (
        datetime(2023, 11, 14, 22, 13, 20),
        "gpu-001",
        "xid",
        79,
        "err",
    )
    assert xid["fields"]["uptime_s"] == pytest.approx(1843.308145)
    assert (log["severity"], log["fields"]["pid"]) == ("info", "812")
    assert log["message"] == "slurmd[812]: launch task StepId=1.0"


def test_kernel_lines_in_journal_json_keep_their_printk_stamp_and_still_type(conn, tmp_path):
    # A kernel line forwarded through the syslog socket (or by a collector) keeps the printk stamp in
    # MESSAGE: the typed event must come out the same as from the rfc3164 line that carries it.
    rows = [
        {
            "__REALTIME_TIMESTAMP": "1700000000000000",
            "_HOSTNAME": "gpu-007",
            "SYSLOG_IDENTIFIER": "kernel",
            "_TRANSPORT": "syslog",
            "PRIORITY": "4",
            "MESSAGE": "[267043.104677] nfs: server fs01 not responding, still trying",
        },
        {
            "__REALTIME_TIMESTAMP": "1700000002000000",
            "_HOSTNAME": "gpu-007",
            "SYSLOG_IDENTIFIER": "kernel",
            "_TRANSPORT": "syslog",
            "PRIORITY": "3",
            "MESSAGE": "[  267045.5] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.",
        },
        {
            "__REALTIME_TIMESTAMP": "1700000003000000",
            "_HOSTNAME": "gpu-007",
            "SYSLOG_IDENTIFIER": "kernel",
            "_TRANSPORT": "syslog",
            "PRIORITY": "6",
            "MESSAGE": "[267046.0] nfs: server fs01 OK",
        },
    ]
    path = write(tmp_path, "journal.json", "".join(json.dumps(r) + "\n" for r in rows))
    load(conn, path)
    nfs, xid, ok = events(conn, path)
    assert (nfs["kind"], nfs["component"], nfs["message"]) == (
        "nfs_not_responding",
        "fs01",
        "nfs: server fs01 not responding, still trying",
    )
    assert nfs["fields"] == {"server": "fs01", "mode": "still trying"}
    assert (xid["kind"], xid["code"], xid["component"]) == ("xid", 79, "00000000:9B:00.0")
    assert xid["fields"]["uptime_s"] == pytest.approx(267045.5)
    assert ok["kind"] == "nfs_ok"


def test_severity_from_the_envelope(conn):
    iso = SYSLOG / "gpud_dmesg-decode-iso_xid13_xid43.log"
    kmsg = SYSLOG / "gpud_dev-kmsg-raw.log"
    sonic = SYSLOG / "gh-sonic-194_rsyslog-hiprec-with-severity.log"
    for p in (iso, kmsg, sonic):
        load(conn, p)
    assert {e["severity"] for e in events(conn, iso)} == {"warning"}
    assert {e["severity"] for e in events(conn, kmsg)} == {"info"}
    assert [e["severity"] for e in events(conn, sonic)] == ["warning", "info"]


def test_lines_fitting_no_envelope_are_rejected_with_line_numbers(conn, tmp_path):
    path = write(
        tmp_path,
        "mixed.log",
        "Jun 14 15:16:01 combo sshd[1]: a\nthis is not syslog\n"
        "Jun 14 15:16:02 combo sshd[1]: b\n    indented continuation\n-- Boot 3f2a --\n"
        "Jun 14 15:17:00 combo kernel: c\n-- Reboot --\n",
    )
    report = load(conn, path)
    assert report.rejected == 1
    assert report.reject_samples[0][:2] == (2, "does not match the rfc3164 envelope of this file")
    got = [(e["line"], e["message"]) for e in events(conn, path)]
    assert got == [
        (1, "sshd[1]: a"),
        (3, "sshd[1]: b\n    indented continuation"),
        (5, "-- Boot 3f2a --"),
        (6, "c"),
        (7, "-- Reboot --"),
    ]
    stamps = [e["ts"] for e in events(conn, path)]
    assert stamps[2] == stamps[3] == stamps[4]  # a marker takes the next line's time, or the last one's


def test_loghub_thunderbird_loads_with_epoch_time_node_and_tags(conn):
    path = REAL_DATA / "loghub-2k" / "Thunderbird" / "Thunderbird_2k.log"
    report = load(conn, path)
    assert (report.rows, report.rejected) == (2000, 0)
    with open(path.parent / "Thunderbird_2k.log_structured_corrected.csv", encoding="utf-8") as f:
        truth = {int(t["LineId"]): t for t in csv.DictReader(f)}
    for e in events(conn, path):
        t = truth[e["line"]]
        assert e["ts"] == datetime.fromtimestamp(int(t["Timestamp"]), UTC).replace(tzinfo=None)
        assert e["host"] == t["User"]  # the loghub column naming the node
        # loghub also calls kernel prefixes such as `audit(1131538222.234:0)` a component; a tag has no ':'.
        if t["Component"] and not set(" :") & set(t["Component"]) and e["kind"] == "log":
            assert (e["fields"]["tag"], e["fields"]["pid"]) == (t["Component"], t["PID"][:-2] or None), t
    # the one typed event: the 2005 e1000 wording of a NIC carrier change
    typed = [(e["line"], e["kind"], e["component"], e["fields"]) for e in events(conn, path) if e["kind"] != "log"]
    assert typed == [
        (
            1307,
            "link_up",
            "eth0",
            {
                "device": "eth0",
                "driver": "e1000",
                "pci": None,
                "state": "up",
                "speed_mbps": 1000,
                "duplex": "full",
                "fec": None,
            },
        )
    ]


def test_loghub_linux_tags_and_pids_match_the_ground_truth(conn):
    load(conn, LINUX)
    with open(LINUX.parent / "Linux_2k.log_structured_corrected.csv", encoding="utf-8") as f:
        truth = list(csv.DictReader(f))
    got = {e["line"]: e for e in events(conn, LINUX)}
    assert len(got) == len(truth) == 2000
    simple = [t for t in truth if " " not in t["Component"] and t["Component"]]
    assert len(simple) > 1900
    for t in simple:
        e = got[int(t["LineId"])]
        assert (e["fields"]["tag"], e["fields"]["pid"]) == (t["Component"], t["PID"][:-2] or None), t
        assert e["host"] == "combo"


@pytest.mark.parametrize(
    "head",
    [
        "[2024-05-01 12:00:00] iteration      100/  1000 | consumed samples: 800 | "
        "elapsed time per iteration (ms): 51\n"
        "[2024-05-01 12:00:05] iteration      110/  1000 | consumed samples: 880 | "
        "elapsed time per iteration (ms): 52\n",
        "I0501 12:00:00.123456  1234 main.cc:10] starting\nW0501 12:00:01.000000  1234 main.cc:11] slow\n",
        "timestamp,host,entity,metric,value\n2024-05-01T12:00:00Z,gpu-001,gpu0,temp,40\n",
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature.\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n"
        'DCGM_FI_DEV_GPU_TEMP{gpu="0"} 40\n',
        '{"status":"success","data":{"resultType":"matrix","result":[]}}\n',
        "2024-05-01T12:00:00.123Z INFO rank0 step 100 loss 2.31\n2024-05-01T12:00:01.123Z INFO rank0 step 101\n",
    ],
)
def test_sniff_does_not_claim_other_formats(head):
    assert syslog.sniff(head) < 0.5


@pytest.mark.parametrize("name", ["BGL", "HPC"])
def test_loghub_supercomputer_logs_are_refused_not_crashed(conn, name):
    path = REAL_DATA / "loghub-2k" / name / f"{name}_2k.log"
    assert syslog.sniff(path.read_text(encoding="utf-8")[:65536]) == 0
    report = ingest_file(conn, path, IngestOptions())
    assert report.status in ("loaded", "failed")
    assert report.status == "loaded" or "unknown format" in report.error


def test_forcing_syslog_on_other_content_is_a_clear_error(conn):
    path = REAL_DATA / "loghub-2k" / "HPC" / "HPC_2k.log"
    report = ingest_file(conn, path, IngestOptions(format="syslog"))
    assert report.status == "failed" and "does not look like syslog" in report.error


def test_rfc5424_with_structured_data_and_pri(conn, tmp_path):
    # RFC 5424 section 6.5 examples (no real GPU-node capture exists; log-formats.md A.0).
    path = write(
        tmp_path,
        "rfc5424.log",
        "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - 'su root' failed for lonvick\n"
        '<165>1 2003-10-11T22:14:15.003-07:00 gpu-002 evntslog - ID47 [exampleSDID@32473 iut="3" '
        'eventSource="Application" eventID="1011"] An application event log entry\n',
    )
    load(conn, path)
    su, app = events(conn, path)
    assert (su["ts"], su["host"], su["severity"], su["message"]) == (
        datetime(2003, 10, 11, 22, 14, 15, 3000),
        "mymachine",
        "crit",
        "su: 'su root' failed for lonvick",
    )
    assert (app["ts"], app["severity"], app["message"]) == (
        datetime(2003, 10, 12, 5, 14, 15, 3000),
        "notice",
        "evntslog: An application event log entry",
    )


def test_impossible_date_is_rejected_not_fatal(conn, tmp_path):
    path = write(
        tmp_path,
        "feb30.log",
        "Feb 28 10:00:00 n1 kernel: a\nFeb 30 10:00:00 n1 kernel: b\n",
        mtime=datetime(2026, 3, 1),
    )
    report = load(conn, path)
    assert (report.rows, report.rejected, report.reject_samples[0][0]) == (1, 1, 2)


def test_kmsg_dictionary_lines_fold_into_their_record(conn, tmp_path):
    # /dev/kmsg continuation lines (Documentation/ABI/testing/dev-kmsg) start with a space.
    path = write(
        tmp_path,
        "kmsg.log",
        "7,160,424069,-;pci_root PNP0A03:00: host bridge window [io  0x0000-0x0cf7]\n"
        " SUBSYSTEM=acpi\n DEVICE=+acpi:PNP0A03:00\n6,339,5140900,-;NET: Registered protocol family 10\n",
    )
    load(conn, path)
    first, second = events(conn, path)
    assert first["message"].endswith("DEVICE=+acpi:PNP0A03:00") and first["severity"] == "debug"
    assert (second["ts"] - first["ts"]).total_seconds() == pytest.approx(5140900e-6 - 424069e-6)


def test_events_of_a_file_are_written_in_host_time_order(conn, tmp_path):
    path = write(
        tmp_path,
        "merged.log",
        "Jun 14 15:00:02 b kernel: 1\nJun 14 15:00:01 a kernel: 2\nJun 14 15:00:00 b kernel: 3\n",
        mtime=datetime(2026, 7, 1),
    )
    load(conn, path)
    rows = conn.execute("SELECT host, line FROM events").fetchall()  # storage order
    assert rows == [("a", 2), ("b", 3), ("b", 1)]


def test_a_reboot_inside_an_uptime_only_file_is_reported(conn, tmp_path):
    path = write(tmp_path, "boots.log", "[ 5000.000000] before\n[    1.000000] after reboot\n[    2.000000] x\n")
    report = load(conn, path)
    assert any("reboot; first at line 2" in n for n in report.notes)


def test_gzipped_syslog_gives_the_same_events(conn, tmp_path):
    plain = SYSLOG / "gh-gpu-operator-1146_rfc3164_xid48_xid64.log"
    packed = tmp_path / "messages.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    stamp = plain.stat().st_mtime
    os.utime(packed, (stamp, stamp))
    load(conn, plain)
    load(conn, packed)
    strip = [{k: v for k, v in e.items() if k != "source_id"} for e in events(conn, plain)]
    assert strip == [{k: v for k, v in e.items() if k != "source_id"} for e in events(conn, packed)]


MIXED = """Nov  1 00:00:00 gpu-017 systemd[1]: Started Session 1 of User slurm.
  an indented continuation line
Nov  1 00:00:01 gpu-017 kernel: [  100.000001] NVRM: Xid (PCI:0000:9b:00): 119, pid=77, name=python, Timeout
Nov  1 00:00:02 gpu-017 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE
<13>Nov  1 00:00:03 gpu-017 slurmd[42]: pri-prefixed line
Nov 1 00:00:04 gpu-017 sshd[7]: one-space day
Nov  1 00:00:05.250 gpu-017 sshd[7]: fractional seconds
Nov  1 00:00:06 gpu-017 INFO swss#orchagent: severity word (SONiC)
Nov  1 00:00:07 gpu-017 no tag at all here
Ene  1 00:00:08 gpu-017 cron[9]: Spanish month
Feb 30 00:00:09 gpu-017 cron[9]: impossible date
Nov  1 24:00:10 gpu-017 cron[9]: hour 24
Nov  1 00:00:11 gpu-017 python3[5]: [rank0] a bracket that is no printk stamp
Nov  1 00:00:12 gpu-017 kernel: [  101.5] nfs: server fs01 not responding, still trying
Nov  1 00:00:13 gpu-017 foo[x]: a pid that is no number
"""


def test_fast_path_reads_every_line_as_the_envelope_pattern_does(tmp_path, monkeypatch):
    # The fast path and the plain pattern must store the same events, whichever lines each takes.
    path = write(tmp_path, "mixed.log", MIXED, mtime=datetime(2026, 11, 2))
    results = []
    for fast in (True, False):  # forced: the file is too mixed for the fast path to be chosen
        monkeypatch.setattr(syslog.env, "fast_fits", lambda env, head, fast=fast: fast)
        store = memory_store()
        report = load(store, path)
        results.append((report.rows, report.reject_samples, events(store, path)))
    assert results[0] == results[1]
    rows, rejects, evs = results[0]
    assert rows == 12 and [line for line, _, _ in rejects] == [11, 12]  # Feb 30, 24:00:00
    assert evs[0]["message"].endswith("\n  an indented continuation line")
    assert [(e["kind"], e["severity"], e["fields"].get("uptime_s")) for e in evs[1:4]] == [
        ("xid", None, 100.000001),
        ("ib_port_state", None, None),
        ("log", "notice", None),
    ]


def _has_fast_path(path: Path) -> bool:
    envelope, _ = syslog.env.detect(path.read_text(encoding="utf-8", errors="replace")[:65536])
    return envelope is not None and bool(envelope.fast)


@pytest.mark.heavy
@pytest.mark.parametrize("path", [p for p in SAMPLES + [LINUX] if _has_fast_path(p)], ids=lambda p: p.name[:40])
def test_fast_path_agrees_with_the_pattern_on_real_samples(path, monkeypatch):
    # Forced both ways: the fast path (and the UPDATE for the lines it leaves) against the pattern alone.
    fast_store, plain_store = memory_store(), memory_store()
    monkeypatch.setattr(syslog.env, "fast_fits", lambda env, head: True)
    load(fast_store, path)
    monkeypatch.setattr(syslog.env, "fast_fits", lambda env, head: False)
    load(plain_store, path)
    assert events(fast_store, path) == events(plain_store, path)


def test_fast_path_is_taken_for_plain_syslog_and_not_for_other_envelopes():
    env = syslog.env
    assert not env.fast_fits(env.RFC3164, MIXED)  # 8 of 14 lines only (the continuation aside)
    assert env.fast_fits(env.RFC3164, MIXED.splitlines()[0] + "\n" + MIXED.splitlines()[2] + "\n")
    assert not env.fast_fits(env.RFC3164, "<13>Nov  1 00:00:03 h t[1]: x\n" * 5)
    assert env.fast_fits(env.RFC3339, "2026-11-29T14:02:11.123456+00:00 h t[1]: x\n")
    assert not env.fast_fits(env.DMESG_RAW, "[    1.000000] x\n")


EDGES = """Nov  1 00:00:00 n1 kernel: GPU 0000:3b:00.0 has fallen off the bus (no NVRM prefix)
Nov  1 00:00:01 n1 kernel: mlx5_core 0000:ab:00.0 mlx5_5: Port: 2 Link INIT
Nov  1 00:00:02 n1 kernel: mlx5_core 0000:01:00.1 eth1: Link flapping
Nov  1 00:00:03 n1 nvidia-smi[4]: GPU 2 temperature above threshold
Nov  1 00:00:04 n1 ipmi[5]: High temperature on CPU1
Nov  1 00:00:05 n1 kernel: Memory cgroup out of memory: Killed process 1234 (python) total-vm:1kB
Nov  1 00:00:06 n1 nfs: server fs01 not responding, timed out
Nov  1 00:00:07 n1 kernel: Link is up on some other driver
"""


@pytest.mark.heavy
def test_candidate_prefilter_drops_no_typed_event(tmp_path, monkeypatch):
    # With the prefilter made always true, every line goes through the matchers: same events.
    path = write(tmp_path, "edges.log", EDGES, mtime=datetime(2026, 11, 2))
    paths = [path] + [p for p in SAMPLES if "xid" in p.name or "mlx5" in p.name or "aer" in p.name][:6]
    filtered = memory_store()
    for p in paths:
        load(filtered, p)
    monkeypatch.setattr(kev, "CLASSIFY_SQL", kev.CLASSIFY_SQL.replace(kev.CANDIDATE_SQL, "true"))
    unfiltered = memory_store()
    for p in paths:
        load(unfiltered, p)
        assert events(filtered, p) == events(unfiltered, p)
    kinds = [e["kind"] for e in events(filtered, path)]
    assert kinds == ["log", "ib_port_state", "log", "thermal", "thermal", "oom_kill", "nfs_not_responding", "log"]
