"""fleet --exclude (fleet/exclude.py): drain, cordon and taint commands that parse as their tools' arguments,
a hostlist the project's own expander reads back, and never a node for a preemption or a routine save."""

from __future__ import annotations

import json
import re
import shlex
from datetime import datetime

import pytest
from click.testing import CliRunner
from conftest import copy_sample_store

from synestra_cli.cli.main import cli
from synestra_cli.fleet.assets import Asset
from synestra_cli.fleet.exclude import LABEL_VALUE, SCHEMA, exclusions
from synestra_cli.fleet.lemons import FleetReport, FleetRow, Hit
from synestra_cli.hostlist import compress, expand
from synestra_cli.store.connect import memory_store

# kubectl's own rules: a node name is a DNS-1123 subdomain, a taint `key=value:Effect` whose key is a qualified
# name (an optional DNS prefix and a name of 63 characters), whose value is a label value.
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUALIFIED = re.compile(
    r"^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
HEAVY = pytest.mark.heavy  # sample_data ingested and its fleet explained


@pytest.fixture(scope="module")
def sample_db(sample_store_template, tmp_path_factory):
    return copy_sample_store(sample_store_template, tmp_path_factory.mktemp("exclude"))


def _run(db, *args):
    result = CliRunner().invoke(cli, ["fleet", "--exclude", "--db", str(db), *args])
    assert result.exit_code == 0, result.output
    return result.output


@HEAVY
def test_slurm_lines_are_scontrol_drains_with_cause_and_evidence_and_the_hostlist_reads_back(sample_db):
    out = _run(sample_db, "--format", "slurm").splitlines()
    drains = [shlex.split(line) for line in out if not line.startswith("#")]
    assert drains
    nodes = []
    for argv in drains:
        assert argv[:2] == ["scontrol", "update"] and argv[3] == "State=DRAIN", argv
        assert argv[2].startswith("NodeName=") and argv[4].startswith("Reason=synestra: ")
        assert "evidence " in argv[4] and len(argv) == 5
        nodes.append(argv[2].removeprefix("NodeName="))
    (hostline,) = [line for line in out if line.startswith("#")]
    hostlist = hostline.split("--exclude=", 1)[1]
    assert set(expand(hostlist)) == set(nodes)
    assert _run(sample_db, "--format", "hostlist").strip() == hostlist
    # the GPU that fell off the bus is named with the node (sample_data/truth.json: gpu-002 gpu0)
    gpu002 = next(a for a in drains if a[2] == "NodeName=gpu-002")[4]
    assert "gpu.fell_off_bus gpu-002:gpu0 (GPU-" in gpu002


@HEAVY
def test_kubectl_lines_parse_as_kubectl_arguments(sample_db):
    lines = _run(sample_db, "--format", "kubernetes").splitlines()
    verbs = {"cordon": 0, "taint": 0, "annotate": 0}
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "kubectl"
        verbs[argv[1]] += 1
        if argv[1] == "cordon":
            assert len(argv) == 3 and DNS_SUBDOMAIN.match(argv[2])
        elif argv[1] == "taint":
            assert argv[2] == "nodes" and DNS_SUBDOMAIN.match(argv[3]) and argv[5:] == ["--overwrite"]
            key_value, effect = argv[4].rsplit(":", 1)
            key, value = key_value.split("=", 1)
            assert effect in EFFECTS and QUALIFIED.match(key) and key == "synestra.io/suspect"
            assert LABEL_VALUE.match(value) and len(value) <= 63
        else:
            assert argv[2] == "node" and DNS_SUBDOMAIN.match(argv[3]) and argv[5:] == ["--overwrite"]
            key, value = argv[4].split("=", 1)
            assert QUALIFIED.match(key) and value.startswith("synestra: ")
    assert verbs["cordon"] == verbs["taint"] == verbs["annotate"] > 0


@HEAVY
def test_json_document_carries_its_schema_and_every_command(sample_db):
    doc = json.loads(_run(sample_db, "--format", "json"))
    assert doc["schema"] == SCHEMA == "synestra.exclude/1"
    assert doc["slurm"]["exclude"] == "--exclude=" + compress([n["name"] for n in doc["hosts"]])
    gpu = [c for n in doc["hosts"] for c in n["causes"] if c["gpu"]]
    assert gpu and all(c["gpu"]["uuid"].startswith("GPU-") and c["kind"] == "gpu" for c in gpu)


@HEAVY
def test_a_command_format_implies_exclude_and_csv_is_refused_with_it(sample_db):
    result = CliRunner().invoke(cli, ["fleet", "--db", str(sample_db), "--format", "hostlist"])
    assert result.exit_code == 0 and result.output.strip() == _run(sample_db, "--format", "hostlist").strip()
    refused = CliRunner().invoke(cli, ["fleet", "--exclude", "--db", str(sample_db), "--format", "csv"])
    assert refused.exit_code == 2


def _row(category: str, what: str) -> FleetRow:
    hits = [Hit(f"j{i}", 1, what, datetime(2026, 1, 1, i), category, 0.9) for i in range(3)]
    return FleetRow(Asset("host", "gpu-009", "gpu-009", None, {}), hits)


@pytest.mark.parametrize(
    ("category", "what"),
    [
        ("scheduler.preemption", "restart"),
        ("checkpoint.routine", "periodic save"),
        ("software.crash", "failure"),
        ("host.oom", "failure"),
    ],
)
def test_a_preemption_a_routine_save_or_the_jobs_own_fault_never_puts_a_node_on_the_list(category, what):
    conn = memory_store()
    from synestra_cli.fleet.assets import Inventory

    fleet = FleetReport(None, None, ["j0", "j1", "j2"], [_row(category, what)])
    assert fleet.lemons  # three jobs "hurt": a lemon by count, but not by cause
    assert exclusions(conn, fleet, None, Inventory(conn)).nodes == []
    bad = FleetReport(None, None, ["j0"], [_row("gpu.memory", "failure")])
    assert [n.name for n in exclusions(conn, bad, None, Inventory(conn)).nodes] == ["gpu-009"]


def test_hostlist_round_trips_through_the_expander():
    for hosts in (
        ["gpu-001", "gpu-002", "gpu-003", "gpu-007"],
        ["a", "gpu-9", "gpu-010", "node1"],
        ["ip-10-0-1-23.ec2.internal", "ip-10-0-1-24.ec2.internal"],
    ):
        assert set(expand(compress(hosts))) == set(hosts)
    assert compress(["gpu-001", "gpu-002", "gpu-003", "gpu-007"]) == "gpu-[001-003,007]"
