"""`synestra simulate`: deterministic by seed, never half-written, and its building blocks."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.load import cumulative
from synestra_cli.simulate.promtext import family


def digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def run(*args: str):
    return CliRunner().invoke(cli, ["simulate", *args])


@pytest.mark.heavy
def test_same_seed_gives_byte_identical_output_and_another_seed_does_not(tmp_path):
    args = ["--scenario", "gpu-fell-off-bus", "--nodes", "8", "--hours", "1", "--gpus-per-node", "8"]
    for name, seed in (("a", "4"), ("b", "4"), ("c", "5")):
        result = run(str(tmp_path / name), *args, "--seed", seed)
        assert result.exit_code == 0, result.output
    a, b, c = (digest(tmp_path / n) for n in "abc")
    assert a == b
    assert len(a) > 40 and a.keys() == c.keys()
    assert sum(a[k] != c[k] for k in a) > len(a) // 2


def test_a_run_without_telemetry_writes_the_same_job_logs_sacct_and_truth_and_nothing_else(tmp_path):
    """tests/test_tax_truth.py simulates without telemetry (the accounting reads only job logs and sacct):
    what it reads must be the bytes of a full run, whose metrics and syslogs take most of its time."""
    from synestra_cli.simulate.scenarios import simulate

    full = simulate(tmp_path / "full", "preemption", seed=7, nodes=8, hours=2)
    bare = simulate(tmp_path / "bare", "preemption", seed=7, nodes=8, hours=2, telemetry=False)
    everything, jobs_only = digest(tmp_path / "full"), digest(tmp_path / "bare")
    job_logs = {k for k in everything if k.startswith("exports/jobs/")}
    assert job_logs and set(jobs_only) == {"truth.json", "exports/sacct.txt"} | job_logs
    assert {k: v for k, v in everything.items() if k in jobs_only and k != "truth.json"} == {
        k: v for k, v in jobs_only.items() if k != "truth.json"
    }
    assert full["metric_samples"] > 0 and bare["metric_samples"] == 0
    truth = [json.loads((tmp_path / d / "truth.json").read_text()) for d in ("full", "bare")]
    assert [{k: v for k, v in t.items() if k != "metric_samples"} for t in truth] == [
        {k: v for k, v in truth[0].items() if k != "metric_samples"}
    ] * 2


def test_stdout_is_the_run_summary_and_the_layout_is_exports_plus_truth(tmp_path):
    result = run(str(tmp_path), "--scenario", "routine", "--nodes", "4", "--hours", "1", "--gpus-per-node", "2")
    assert result.exit_code == 0
    meta = json.loads(result.stdout)
    assert meta["scenario"] == "routine" and meta["metric_samples"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exports", "truth.json"]
    assert {p.name for p in (tmp_path / "exports").iterdir()} == {
        "dcgm",
        "jobs",
        "node_exporter",
        "optics",
        "sacct.txt",
        "snmp",
        "syslog",
        "topology.csv",
    }
    assert {p.name for p in (tmp_path / "exports" / "snmp").iterdir()} == {
        "leaf-01.prom",
        "leaf-02.prom",
        "spine-uplinks.query_range.json",
    }
    uplinks = json.loads((tmp_path / "exports" / "snmp" / "spine-uplinks.query_range.json").read_text())
    assert uplinks["data"]["resultType"] == "matrix" and len(uplinks["data"]["result"]) == 2 * 4 * 5
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["schema"] == "synestra.simulate.truth/1" and truth["jobs"][0]["job"] == meta["main_job"]


def test_an_existing_simulation_is_kept_unless_forced(tmp_path):
    args = [str(tmp_path), "--scenario", "routine", "--nodes", "4", "--hours", "1", "--gpus-per-node", "1"]
    assert run(*args).exit_code == 0
    before = digest(tmp_path)
    again = run(*args, "--seed", "9")
    assert again.exit_code == 3 and "--force" in again.stderr and again.stdout == ""
    assert digest(tmp_path) == before
    assert run(*args, "--seed", "9", "--force").exit_code == 0
    assert digest(tmp_path) != before


def test_an_unknown_scenario_is_a_usage_error():
    result = run("/tmp/never", "--scenario", "meteor-strike")
    assert result.exit_code == 2 and "meteor-strike" in result.stderr


def test_fabric_is_rail_optimised_nic_n_of_every_host_on_leaf_n():
    cl = Cluster(nodes=12, gpus_per_node=8, rack_size=4)
    rows = cl.topology_rows()
    assert len(rows) == 96
    assert {(nic, switch) for _, nic, switch, _, _ in rows} == {(f"mlx5_{n}", f"leaf-{n + 1:02d}") for n in range(8)}
    ports = {(h, port) for h, _, _, port, _ in rows}
    assert len(ports) == 12  # one port number per host, the same on every rail
    assert cl.rack("gpu-005") == "rack-02" and (cl.leaf(1), cl.switch_port("gpu-003")) == ("leaf-02", "Ethernet8")
    assert cl.gpu_bus_id(4) == "00000000:9A:00.0" and cl.kernel_gpu_addr(4) == "0000:9a:00"


def test_cumulative_counters_restart_at_a_reboot_and_keep_their_boot_offset_before_it():
    inc = np.array([1.0, 1, 1, 1, 1])
    reset = np.array([False, False, True, False, False])
    assert cumulative(inc, reset, 10.0).tolist() == [11, 12, 1, 2, 3]


def test_prometheus_family_writes_help_type_then_masked_samples_with_ms_timestamps(tmp_path):
    path = tmp_path / "x.prom"
    with open(path, "wb") as fh:
        n = family(
            fh,
            "m",
            "gauge",
            "help me",
            ['{a="1"}', '{a="2"}'],
            np.array([[1.5, 2.0], [3.0, 4.25]]),
            np.array([[10.0, 40.0], [10.0, 40.0]]),
            np.array([[True, False], [True, True]]),
        )
    assert n == 3
    assert path.read_text().splitlines() == [
        "# HELP m help me",
        "# TYPE m gauge",
        'm{a="1"} 1.5 10000',
        'm{a="2"} 3 10000',
        'm{a="2"} 4.25 40000',
    ]
