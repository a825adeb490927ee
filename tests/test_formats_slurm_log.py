"""slurmctld logs: node and job events from real controller logs, node lists, time zones, rejects."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

SLURM = REAL_SAMPLES / "slurm"
REQUEUE = SLURM / "gh-aws-parallelcluster-5670_slurmctld_requeue-node-failure_power-save.log"
REBOOT = SLURM / "gh-aws-parallelcluster-6641_slurmctld_spot-node-rebooted-now-responding.log"
HEALTH = SLURM / "gh-aws-parallelcluster-6842_slurmctld_power-save-health-check-failed.log"
NODE1 = "a10g-1x-spot-dy-a10g-1x-spot-cr-0-1"


@pytest.fixture(autouse=True)
def only_slurm(monkeypatch):
    only_formats(monkeypatch, ["slurm_log", "syslog"])


def test_a_requeue_after_a_node_failure_is_one_incident_of_the_job_the_line_names(conn):
    report = ingest_file(conn, REQUEUE, IngestOptions(host="head-node"))
    assert (report.status, report.format, report.rejected) == ("loaded", "slurm_log", 0)
    ((job, kind, ts, fields),) = conn.execute("SELECT job_id, kind, ts, fields FROM job_incidents").fetchall()
    assert (job, kind, ts) == ("10", "requeue", datetime(2023, 8, 28, 16, 55, 46, 905000))
    assert json.loads(fields)["host"] == NODE1 and json.loads(fields)["reason"] == "node failure"


def test_node_events_are_on_the_node_the_line_names_and_other_lines_on_the_controller(conn):
    ingest_file(conn, REQUEUE, IngestOptions(host="head-node"))
    typed = conn.execute(
        "SELECT kind, fields->>'reason', fields->>'state', fields->>'action' FROM events "
        "WHERE host = ? ORDER BY line, kind",
        [NODE1],
    ).fetchall()
    assert typed == [
        ("slurm_power_save", None, None, "resume"),
        ("slurm_node_reason", "(Code:LimitedInstanceCapacity)Failure when resuming nodes", None, None),
        ("slurm_node_fail", None, None, None),
        ("slurm_node_state", None, "DOWN", None),
        ("slurm_node_reason", "Scheduler health check failed", None, None),
        ("slurm_power_save", None, None, "power_down"),
        ("slurm_power_save", None, None, "suspend"),
    ]
    assert conn.execute("SELECT count(*) FROM events WHERE kind = 'log' AND host = 'head-node'").fetchone() == (5,)


def test_a_node_that_rebooted_and_responds_again(conn):
    report = ingest_file(conn, REBOOT, IngestOptions())
    kinds = conn.execute("SELECT kind, fields->>'uptime_s' FROM events WHERE kind <> 'log' ORDER BY line").fetchall()
    assert kinds == [
        ("slurm_power_save", None),
        ("slurm_node_reboot", "136"),
        ("slurm_node_responding", None),
        ("slurm_power_save", None),
    ]
    # the paste lost the first line's `[`: counted, with its line, not guessed
    assert report.rejected == 1 and report.reject_samples[0][0] == 1


def test_times_are_local_and_read_in_the_given_zone(conn):
    ingest_file(conn, HEALTH, IngestOptions(timezone="America/Los_Angeles"))
    assert conn.execute("SELECT min(ts) FROM events").fetchone() == (datetime(2025, 7, 2, 9, 11, 52, 6000),)


def test_nodes_not_responding_are_one_event_per_node_of_the_hostlist(conn, tmp_path):
    # ping_nodes.c: error("Nodes %s not responding, setting DOWN", host_str); node_mgr.c: "Node %s now responding"
    log = tmp_path / "slurmctld.log"
    log.write_text(
        "[2026-11-02T10:00:00.000] error: Nodes gpu-[001-003],gpu-009 not responding, setting DOWN\n"
        "[2026-11-02T10:05:00.000] Node gpu-002 now responding\n"
    )
    ingest_file(conn, log, IngestOptions())
    down = conn.execute(
        "SELECT host, fields->>'set_down' FROM events WHERE kind = 'slurm_node_not_responding' ORDER BY host"
    ).fetchall()
    assert down == [("gpu-001", "true"), ("gpu-002", "true"), ("gpu-003", "true"), ("gpu-009", "true")]
    assert conn.execute("SELECT host FROM events WHERE kind = 'slurm_node_responding'").fetchall() == [("gpu-002",)]
