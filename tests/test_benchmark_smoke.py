"""The benchmark script runs end to end on a tiny dataset, so that it cannot rot (figures: docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.heavy
def test_the_benchmark_prints_and_writes_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "run.py"),
            "--nodes",
            "4",
            "--hours",
            "1",
            "--scales",
            "1",
            "--runs",
            "1",
            "--drain3-lines",
            "1000",
            "--syslog-lines",
            "20000",
            "--cache",
            str(tmp_path / "cache"),
            "--job-sizes",
            "2",
            "--job-node-hours",
            "4",
            "--days",
            "1,2",
            "--days-nodes",
            "4",
            "--days-hours",
            "2",
            "--peer-files",
            "1",
            "--small-files",
            "20",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    formats = {r["format"] for r in doc["formats"]}
    assert {"prometheus", "syslog", "megatron", "sacct"} <= formats
    assert doc["syslog_big"]["lines"] >= 1000 and doc["syslog_big"]["vs_floor"] > 0
    assert all(r["rows"] > 0 and r["floor_s"] > 0 and r["vs_floor"] > 0 for r in doc["formats"])
    (scale,) = doc["scales"]
    assert scale["store"]["files_failed"] == 0, scale["store"]["failed_examples"]
    assert scale["explain"]["warm_median_s"] > 0 and scale["tax_report"]["warm_median_s"] > 0
    assert "vs floor" in proc.stdout and "explain --job" in proc.stdout
    sizes = doc["job_sizes"]
    assert [r["hosts"] for r in sizes] == [2] and all(r["explain"]["peak_rss_mb"] > 0 for r in sizes)
    assert all(r["explain_raw"]["warm_median_cpu_s"] > 0 for r in sizes)  # the raw-path baseline, same run
    assert all(r["store"]["store_mb"] > 0 and r["metric_samples"] > 0 for r in sizes)
    assert "by job size" in proc.stdout
    assert [d["days"] for d in doc["days"]] == [1, 2]
    one, two = doc["days"]
    assert two["samples"] == 2 * one["samples"] and two["store_mb"] > one["store_mb"]
    assert all(d[k]["peak_rss_mb"] > 0 for d in doc["days"] for k in ("tax_report_cold", "fleet", "risks", "explain"))
    assert doc["peers"]["rows"] > 0 and doc["peers"]["vs_floor"] > 0
    assert doc["small_files"]["files"] == [2, 20] and "ms_per_file" in doc["small_files"]
    assert "The baseline over days" in proc.stdout and "small files" in proc.stdout


@pytest.mark.slow
def test_the_follow_benchmark_ends_with_the_rows_of_a_one_shot_ingest(tmp_path):
    out = tmp_path / "follow.json"
    args = ["--minutes", "0.5", "--interval", "2", "--rotate-every", "10", "--sample", "5", "--hosts", "2"]
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "follow_growth.py"),
            *args,
            "--work",
            str(tmp_path),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc["rows_equal"] and doc["follow"]["exit"] == 130 and doc["tables"]["events"]["follow"] > 0


def test_proc_tree_counts_the_cpu_of_a_grandchild_and_passes_the_exit_code_on():
    # the command runs a grandchild that spins ~0.6 CPU s (as a local Ray's actors run under its
    # raylet): the tree's figure holds it, and the command's exit code is passed on
    spin = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.6: pass')"
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {spin!r}]); sys.exit(3)"
    tree = [sys.executable, str(ROOT / "benchmarks" / "proc_tree.py"), "--every", "0.05", "--"]
    proc = subprocess.run(
        [*tree, sys.executable, "-c", child],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3
    report = json.loads(proc.stderr.strip().splitlines()[-1])
    assert report["rc"] == 3
    assert report["cpu_s"] >= 0.55
    assert report["processes"] >= 2
