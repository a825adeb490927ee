"""Runbook answers (issue 15) against the simulator's truth on the bundled sample: each cause's action,
its assets (the faulty GPU's UUID, serial and PCI id; the far-end switch port; a rack's hosts), signals in
the words of their layer, and chains that hold only their own cause's signals."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES, copy_sample_store

from synestra_cli.explain.assets import load_book
from synestra_cli.explain.job import explain_job
from synestra_cli.explain.rules import SKEW_S
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.signals.scope import JobScope
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.store.connect import connect, memory_store

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"
TRUTH = json.loads((SAMPLE / "truth.json").read_text())
CLUSTER = Cluster(TRUTH["nodes"], TRUTH["gpus_per_node"], seed=TRUTH["seed"])


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, sample_store_template) -> Path:
    return copy_sample_store(sample_store_template, tmp_path_factory.mktemp("runbook"))


@pytest.fixture(scope="module")
def explained(sample_db):
    conn = connect(sample_db)
    try:
        return {j["job"]: explain_job(conn, j["job"]) for j in TRUTH["jobs"]}
    finally:
        conn.close()


def truth_checkpoints():
    return [(j["job"], c) for j in TRUTH["jobs"] for c in j["checkpoints"] if c["cause"]]


def checkpoint(explained, job: str, iteration: int, trigger: str):
    return next(c for c in explained[job].checkpoints if c.iteration == iteration and c.trigger == trigger)


@pytest.mark.heavy
def test_every_cause_has_an_action_from_a_sourced_rule_and_its_assets(explained):
    for job, t in truth_checkpoints():
        cp = checkpoint(explained, job, t["iteration"], t["trigger"])
        a = cp.cause.action
        assert a and all(a[k] for k in ("kind", "text", "why", "source")), (job, t["iteration"], a)
        assert cp.cause.assets, (job, t["iteration"])
        for alt in cp.alternatives:
            assert alt.action and alt.action["text"]


def test_the_fallen_gpu_is_named_by_its_uuid_serial_and_pci_id(explained):
    for job, t in truth_checkpoints():
        if t["cause"]["category"] != "gpu.fell_off_bus":
            continue
        cp = checkpoint(explained, job, t["iteration"], t["trigger"])
        host, gpu = t["cause"]["host"], int(t["cause"]["component"].removeprefix("gpu"))
        uuid = CLUSTER.gpu_uuid(host, gpu)
        asset = cp.cause.assets[0]
        assert (asset["kind"], asset["host"], asset["uuid"], asset["pci_bus_id"]) == (
            "gpu",
            host,
            uuid,
            CLUSTER.gpu_bus_id(gpu),
        )
        assert asset["serial"] == f"1654{CLUSTER.host_index(host):05d}{gpu:04d}"  # the driver's banner line
        assert cp.cause.action["kind"] == "drain_rma"
        assert f"Drain {host}" in cp.cause.action["text"] and uuid in cp.cause.action["text"]
        assert "Xid 79 (GPU has fallen off the bus)" in cp.cause.action["why"]
        assert "RESTART_BM" in cp.cause.action["why"]  # the catalog's resolution bucket


def test_a_link_fault_names_both_ends_of_the_cable(explained):
    seen = 0
    for job, t in truth_checkpoints():
        if not t["cause"]["category"].startswith("network."):
            continue
        cp = checkpoint(explained, job, t["iteration"], t["trigger"])
        host, nic = t["cause"]["host"], t["cause"]["component"]
        leaf, port = CLUSTER.leaf(int(nic.removeprefix("mlx5_"))), CLUSTER.switch_port(host)
        asset = cp.cause.assets[0]
        assert (asset["kind"], asset["host"], asset["nic"], asset["switch"], asset["switch_port"]) == (
            "cable",
            host,
            nic,
            leaf,
            port,
        )
        assert cp.cause.action["kind"] == "reseat_cable"
        assert f"{host} {nic}" in cp.cause.action["text"] and f"{leaf} {port}" in cp.cause.action["text"]
        if t["cause"]["reported_healthy"]:
            assert "never went down" in cp.cause.action["why"]
        seen += 1
    assert seen >= 5


def test_a_hot_rack_is_one_cause_named_by_its_rack_in_every_job_it_hit(explained):
    hits = [(job, t) for job, t in truth_checkpoints() if t["cause"]["category"] == "cooling.thermal"]
    assert len({job for job, _ in hits}) >= 2
    named = set()
    for job, t in hits:
        c = checkpoint(explained, job, t["iteration"], t["trigger"]).cause
        named.add((c.category, c.host, c.component))
        rack = c.assets[0]
        assert rack == {
            "kind": "rack",
            "rack": t["cause"]["component"],
            "hosts": list(CLUSTER.rack_hosts(t["cause"]["component"])),
        }
        assert c.action["kind"] == "facilities_ticket" and ", ".join(rack["hosts"]) in c.action["text"]
    assert named == {("cooling.thermal", None, "rack-01")}


def test_slow_saves_get_a_storage_ticket_naming_the_filesystem_and_preemption_is_not_a_repair(explained):
    kinds = {}
    for job, t in truth_checkpoints():
        c = checkpoint(explained, job, t["iteration"], t["trigger"]).cause
        kinds.setdefault(t["cause"]["category"], set()).add(c.action["kind"])
        if c.category == "storage.slow":
            assert c.assets[0]["kind"] == "filesystem" and c.assets[0]["server"] == t["cause"]["component"]
            assert f"filesystem {t['cause']['component']}" in c.action["text"]
    assert kinds["storage.slow"] == {"storage_ticket"}
    assert kinds["scheduler.preemption"] == {"scheduler"}
    assert kinds["gpu.memory"] == {"drain_rma"}


def test_signals_read_in_the_words_of_their_layer(explained):
    signals = {lk.signal for j in explained.values() for cp in j.checkpoints for lk in cp.chain}
    assert "Xid 79 (GPU has fallen off the bus)" in signals
    assert "Xid 48 (Double Bit ECC Error)" in signals
    assert "+1 double-bit ECC error" in signals
    assert "+1 link down" in signals
    assert "ib_port_state Active -> Down" in signals
    assert not any(s.startswith("xid ") or s.endswith(" rate up") or s.endswith(" anomalous") for s in signals)


def test_a_chain_holds_no_slowdown_that_began_before_its_cause(explained):
    """Job 1003's restart at iteration 1950: the thermal event's step-time rise an hour earlier is not
    the GPU's (before issue 15 the chain began with it)."""
    cp = checkpoint(explained, "1003", 1950, "restart")
    assert cp.cause.category == "gpu.fell_off_bus"
    first = cp.cause.first_signal - timedelta(seconds=SKEW_S)
    assert not [lk for lk in cp.chain if lk.layer == "throughput" and lk.time < first]
    for j in explained.values():
        for c in j.checkpoints:
            if (
                c.cause
                and c.cause.first_signal
                and c.chain
                and c.cause.category not in ("workload.straggler", "unknown")
            ):
                lead = c.cause.first_signal - timedelta(seconds=SKEW_S)
                assert all(lk.time >= lead for lk in c.chain if lk.layer == "throughput"), (j.job, c.iteration)


@pytest.mark.parametrize(
    "name, pci, uuid, serial",
    [
        (
            "gh-gpu-burn-1_dmesg_aer-fatal_then_xid79.log",
            "00000000:02:00.0",
            "GPU-660d987e-5b28-3bf6-2a2d-1d5ecae7f6df",
            "0322716036227",
        ),
        (
            "gpud_dmesg-ctime_xid119_gsp.log",
            "00000000:9B:00.0",
            "GPU-509665ad-b600-ac93-3616-d754b23d636d",
            "1650124014249",
        ),
        (
            "gpud-sxid-readme_dmesg_xid79_serial-inline.log",
            "00000000:91:00.0",
            "GPU-b6c3b2be-c55b-d076-fa0e-d464e4c7e08b",
            "1653723052734",
        ),
    ],
)
def test_gpu_serial_and_uuid_come_from_the_drivers_own_banner_in_real_kernel_logs(name, pci, uuid, serial):
    conn = memory_store()
    report = ingest_file(conn, REAL_SAMPLES / "syslog" / name, IngestOptions(host="node-a"))
    assert report.status == "loaded", report.error
    book = load_book(conn, JobScope("j", [], ["node-a"]))
    gpu = book.gpu("node-a", pci)
    assert (gpu["uuid"], gpu["serial"], gpu["pci_bus_id"]) == (uuid, serial, pci)


def run(*args: str):
    from click.testing import CliRunner

    from synestra_cli.cli.main import cli

    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_markdown_ticket_for_one_checkpoint_has_every_section_in_order(sample_db):
    res = run("explain", "--db", str(sample_db), "--job", "1003", "--checkpoint", "1950", "--format", "markdown")
    assert res.exit_code == 0, res.output
    md = res.output
    lines = md.splitlines()
    assert lines[0] == "# Job 1003: gpu.fell_off_bus on gpu-002 gpu0 behind the restart restore at iteration 1950"
    heads = [ln for ln in lines if ln.startswith("#")]
    assert heads[1:] == ["## Assets", "## Restart", "## Chain", "## Alternatives", "## Cost"]
    stages = md.split("## Restart")[1].split("## Chain")[0]  # issue 37: the restart's stages, each dated
    assert "| fault | 2026-11-02T" in stages and "| first step | 2026-11-02T" in stages
    assert md.index("**Verdict:**") < md.index("**Action:**") < md.index("## Assets")
    assert CLUSTER.gpu_uuid("gpu-002", 0) in md.split("## Assets")[1].split("## Chain")[0]
    chain = [ln for ln in md.split("## Chain")[1].split("## Alternatives")[0].splitlines() if ln.startswith("|")]
    assert chain[0] == "| time (UTC) | offset | layer | where | signal | evidence |"
    assert all(ln.count(" | ") == 5 for ln in chain[2:])  # six cells, no stray pipe
    assert any("Xid 79 (GPU has fallen off the bus)" in ln and "gpu-002.syslog.gz:20`" in ln for ln in chain)
    assert chain[-1].split(" | ")[4] == "restart restore at iteration 1950"
    assert "GPU-h**" in md.split("## Cost")[1]


def test_markdown_for_the_whole_job_lists_each_non_routine_checkpoint_with_alternatives_and_evidence(sample_db):
    res = run("explain", "--db", str(sample_db), "--job", "1006", "--format", "markdown")
    assert res.exit_code == 0, res.output
    md = res.output
    assert md.startswith("# Job 1006: ")
    sections = [ln for ln in md.splitlines() if ln.startswith("## Job 1006")]
    assert len(sections) == sum(1 for c in TRUTH["jobs"][5]["checkpoints"] if c["cause"])
    alts = [s.split("### Cost")[0] for s in md.split("### Alternatives")[1:]]
    listed = [a for a in alts if "- **" in a]
    assert listed and all("\n  - " in a for a in listed)  # each alternative lists its evidence
    assert "## Job tax" in md


def test_markdown_for_a_checkpoint_that_does_not_exist_exits_5(sample_db):
    res = run("explain", "--db", str(sample_db), "--job", "1003", "--checkpoint", "7", "--format", "markdown")
    assert res.exit_code == 5


def test_annotations_are_grafana_bodies_with_epoch_ms_and_one_per_event(sample_db, explained):
    res = run("annotations", "--db", str(sample_db), "--job", "1003", "--format", "jsonl")
    assert res.exit_code == 0
    rows = [json.loads(ln) for ln in res.output.splitlines()]
    assert all(set(r) == {"time", "timeEnd", "tags", "text"} and r["time"] <= r["timeEnd"] for r in rows)
    cps = [r for r in rows if "checkpoint" in r["tags"]]
    causes = [r for r in rows if "cause" in r["tags"]]
    assert len(cps) == len(explained["1003"].checkpoints)
    restore = next(c for c in explained["1003"].checkpoints if c.iteration == 1950 and c.kind == "restore")
    epoch = int(
        (
            restore.start - restore.start.replace(year=1970, month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
        ).total_seconds()
        * 1000
    )
    assert any(r["time"] in (epoch, epoch + 1) and "restart" in r["tags"] for r in cps)
    assert sorted(r["tags"][3] for r in causes) == ["cooling.thermal", "gpu.fell_off_bus"]
    assert any("action:drain_rma" in r["tags"] for r in causes)
    doc = json.loads(run("annotations", "--db", str(sample_db), "--all").output)
    assert doc["schema"] == "synestra.annotations/1" and len(doc["annotations"]) > len(rows)


@pytest.mark.heavy
def test_timeline_writes_self_contained_html_svg_and_png(sample_db, tmp_path):
    for name in ("t.html", "t.svg", "t.png"):
        res = run("timeline", "--db", str(sample_db), "--job", "1003", "-o", str(tmp_path / name))
        assert res.exit_code == 0, res.output
    html = (tmp_path / "t.html").read_text()
    assert "<script src=" not in html and "vega-embed" in html  # libraries inlined: opens offline
    assert "gpu.fell_off_bus gpu-002 gpu0" in html and "cooling.thermal rack-01" in html
    assert "<svg" in (tmp_path / "t.svg").read_text()[:500]
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(
    not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")),
    reason="no Chromium on PATH (apt-get install -y chromium)",
)
def test_timeline_html_renders_offline_in_headless_chromium(sample_db, tmp_path):
    page = tmp_path / "t.html"
    assert run("timeline", "--db", str(sample_db), "--job", "1003", "-o", str(page)).exit_code == 0
    script = Path(__file__).resolve().parents[1] / "scripts" / "timeline_browser.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(page),
            "--expect",
            "step time (s)",
            "--expect",
            "gpu.fell_off_bus gpu-002 gpu0",
            "--expect",
            "attempt 2 COMPLETED",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_an_xid_the_catalog_resolves_by_restarting_the_app_is_filed_against_the_job():
    from synestra_cli.explain.actions import action_for
    from synestra_cli.explain.chain import ChainLink

    def xid(code: int) -> ChainLink:
        return ChainLink(None, "gpu", "gpu-001", "gpu3", f"Xid {code}", {"type": "log", "kind": "xid", "code": code})

    gpu = [
        {
            "kind": "gpu",
            "host": "gpu-001",
            "gpu": "gpu3",
            "uuid": "GPU-x",
            "serial": None,
            "pci_bus_id": None,
            "model": None,
        }
    ]
    assert action_for("gpu.other_xid", "gpu-001", "gpu3", gpu, [xid(13), xid(31)])["kind"] == "file_against_job"
    reset = action_for("gpu.other_xid", "gpu-001", "gpu3", gpu, [xid(13), xid(119)])
    assert reset["kind"] == "drain_reset" and "RESET_GPU" in reset["why"] and "GPU-x" in reset["text"]


def test_the_table_view_shows_the_action_and_the_assets(sample_db):
    out = run("explain", "--db", str(sample_db), "--job", "1003").output
    uuid = CLUSTER.gpu_uuid("gpu-002", 0)
    assert f"action: Drain gpu-002 and open an RMA for {uuid}" in out
    assert f"asset: GPU gpu-002 gpu0 uuid {uuid} serial" in out
    assert "action: Open a facilities ticket for rack-01 (cooling): hosts gpu-001, gpu-002, gpu-003, gpu-004" in out
    assert "cause: cooling.thermal  rack-01  confidence" in out


def test_the_save_cadence_action_follows_daly_and_stays_quiet_without_an_mtbf():
    from synestra_cli.accounting.interval import advise, cadence_action

    wall = 40 * 3600.0  # 4 failures: MTBF 10 h; a 60 s save puts Daly's interval near 34 min
    assert cadence_action(advise(60.0, 4, wall, 5 * 60.0, 600.0))["text"].startswith("Save less often")
    assert cadence_action(advise(60.0, 4, wall, 6 * 3600.0, 600.0))["text"].startswith("Save more often")
    daly = advise(60.0, 4, wall, 1.0, 600.0).daly_s
    keep = cadence_action(advise(60.0, 4, wall, daly, 600.0))
    assert keep["kind"] == "save_cadence" and keep["text"].startswith("Keep the save cadence")
    assert cadence_action(advise(60.0, 1, wall, 5 * 60.0, 600.0)) is None  # one failure: no MTBF


def test_a_job_without_causes_still_draws_and_annotates_and_an_unknown_job_exits_5(db_path, tmp_path):
    from explain_fixtures import healthy_job

    conn = connect(db_path)
    healthy_job(conn)
    conn.close()
    res = run("timeline", "--db", str(db_path), "--job", "100", "-o", str(tmp_path / "h.svg"))
    assert res.exit_code == 0, res.output
    assert "<svg" in (tmp_path / "h.svg").read_text()[:500]
    doc = json.loads(run("annotations", "--db", str(db_path), "--job", "100").output)
    assert doc["annotations"] and all("cause" not in a["tags"] for a in doc["annotations"])
    assert run("timeline", "--db", str(db_path), "--job", "nope", "-o", str(tmp_path / "x.png")).exit_code == 5
    assert run("annotations", "--db", str(db_path), "--job", "nope").exit_code == 5
