"""Badput charged to the causes explain names; the CLI's formats and runbook exit code."""

from __future__ import annotations

import json
from types import SimpleNamespace as NS

import pytest
from builders import T0, crash_and_resume
from click.testing import CliRunner

from synestra_cli.accounting.attribution import ROUTINE, by_cause, charges_for
from synestra_cli.accounting.report import tax_report
from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode
from synestra_cli.store import open_store

LINK = NS(category="network.link_degraded", host="gpu-003", component="mlx5_1")


def _cp(kind, attempt, iteration, start, dur, cause=None):
    from datetime import timedelta

    return NS(
        kind=kind,
        attempt=attempt,
        iteration=iteration,
        start=T0 + timedelta(seconds=start),
        end=T0 + timedelta(seconds=start + dur),
        duration_s=dur,
        cause=cause,
    )


def test_a_failure_is_charged_whole_to_the_cause_of_the_restore_after_it(conn):
    crash_and_resume(conn)
    (job,) = tax_report(conn).jobs
    cps = [_cp("save", 1, 20, 300, 60), _cp("restore", 2, 20, 1550, 60, LINK), _cp("save", 2, 100, 2450, 60)]
    rows = by_cause(job, charges_for(job, cps), price=None)
    link = next(r for r in rows if r["category"] == "network.link_degraded")
    assert link["host"] == "gpu-003" and link["component"] == "mlx5_1"
    assert link["buckets_s"] == {"checkpoint_restore": 60, "startup": 90, "lost_work": 300, "hang": 600, "requeue": 240}
    routine = next(r for r in rows if r["category"] == ROUTINE)
    assert routine["seconds"] == 120
    # everything in the checkpoint tax is charged to someone, once
    assert sum(r["seconds"] for r in rows) == pytest.approx(job.buckets.checkpoint_tax_s)


def test_cli_json_follows_the_documented_schema(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    out = CliRunner().invoke(
        cli, ["tax-report", "--all", "--format", "json", "--db", str(db_path), "--gpu-hour-price", "3"]
    )
    assert out.exit_code == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["schema"] == "synestra.tax/1"
    (job,) = doc["jobs"]
    assert set(job) >= {
        "job",
        "gpus",
        "wall_s",
        "gpu_hours",
        "buckets_s",
        "checkpoint_tax",
        "hidden_tax",
        "goodput",
        "by_cause",
        "interval",
    }
    assert sum(job["buckets_s"].values()) == pytest.approx(job["wall_s"])
    assert doc["fleet"]["jobs"] == 1 and doc["fleet"]["usd"]["allocated"] == pytest.approx(2520 * 16 / 3600 * 3)


def test_fail_over_exits_7_when_the_tax_exceeds_the_threshold(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    runner = CliRunner()
    over = runner.invoke(cli, ["tax-report", "--job", "42", "--fail-over", "20", "--db", str(db_path)])
    under = runner.invoke(cli, ["tax-report", "--job", "42", "--fail-over", "90", "--db", str(db_path)])
    assert over.exit_code == ExitCode.THRESHOLD and "exceeds 20.0%" in over.stderr
    assert under.exit_code == 0
    assert "checkpoint tax" in under.stdout and "lost_work" in under.stdout


def test_cli_csv_has_one_row_per_job_with_every_bucket(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    out = CliRunner().invoke(cli, ["tax-report", "--format", "csv", "--db", str(db_path)])
    header, row = out.stdout.strip().splitlines()
    assert header.startswith("job,gpus,wall_s") and "lost_work_s" in header
    assert row.startswith("42,16,2520")


def test_unknown_job_exits_5(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    out = CliRunner().invoke(cli, ["tax-report", "--job", "999", "--db", str(db_path)])
    assert out.exit_code == ExitCode.NOT_FOUND and out.stdout == ""


def test_a_slowdown_that_outlives_its_reactive_save_and_a_restart_stays_with_its_cause():
    from datetime import timedelta

    from synestra_cli.accounting.attribution import _window_cause

    thermal = NS(category="cooling.thermal", host="gpu-001", component="rack-01")
    bus = NS(category="gpu.fell_off_bus", host="gpu-002", component="gpu0")
    reactive = NS(**vars(_cp("save", 1, 180, 1000, 40, thermal)), trigger="reactive")
    restart = NS(**vars(_cp("restore", 2, 150, 5000, 60, bus)), trigger="restart")
    caused = [reactive, restart]

    def window(a, b):
        return NS(start=T0 + timedelta(seconds=a), end=T0 + timedelta(seconds=b))

    assert _window_cause(window(700, 3000), caused) is reactive  # the save it provoked, inside it
    assert _window_cause(window(3500, 4000), caused) is restart  # ended in the crash: the restart after
    assert _window_cause(window(6000, 9000), caused) is reactive  # after the restart, still slow
    assert _window_cause(window(6000, 9000), [restart]) is None  # nothing explains it: unknown
