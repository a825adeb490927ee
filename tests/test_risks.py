"""`synestra risks` on a simulated ghost link: named between the fault's onset and the reactive save it
causes, with the job running on it; the decoy on an idle node is degrading too but puts nothing at stake
(issue 16, item 2)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import simcache
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.fleet.risks import risks_at
from synestra_cli.store.connect import connect


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", ""))


@pytest.fixture(scope="module")
def ghost():
    out = simcache.simulation("ghost-link", seed=3, nodes=8, hours=1.5, gpus_per_node=2)
    db = simcache.ingested(out)  # shared: the tests read it (risks and fleet open the store read-only)
    truth = json.loads((out / "truth.json").read_text())
    fault = next(f for f in truth["faults"] if f["kind"] == "ghost_link" and f["decoy"] is None)
    decoy = next(f for f in truth["decoys"] if f["kind"] == "ghost_link")
    main = next(j for j in truth["jobs"] if j["job"] == "1001")
    save = next(c for c in main["checkpoints"] if c["trigger"] == "reactive")
    return db, fault, decoy, main, _ts(save["start"])


def _ids(report) -> list[str]:
    return [r.asset.id for r in report.degrading]


def test_the_link_is_named_half_way_to_the_reactive_save(ghost):
    db, fault, decoy, main, save = ghost
    onset = _ts(fault["start"])
    half = onset + (save - onset) / 2
    link = f"{fault['hosts'][0]}:{fault['component']}"
    with _ro(db) as conn:
        before = risks_at(conn, onset, history=None)
        now = risks_at(conn, half, history=None)
    assert link not in _ids(before)
    assert link in _ids(now)
    risk = next(r for r in now.risks if r.asset.id == link)
    # since: the onset the telemetry shows (the exports carry a few seconds of clock skew)
    assert risk.categories[0] == "network.link_degraded" and abs((risk.since - onset).total_seconds()) < 120
    assert [j["job"] for j in risk.jobs] == ["1001"] and risk.gpu_hours_per_hour == main["gpus"]
    assert risk.asset.identity["far_end"] and "isolate the port" in risk.action
    assert all(lk.evidence["type"] in ("metric", "log") for lk in risk.chain)
    # the decoy on an idle node degrades too, but no job runs there: ranked after, nothing at stake
    other = f"{decoy['hosts'][0]}:{decoy['component']}"
    assert _ids(now).index(other) > _ids(now).index(link)
    assert next(r for r in now.risks if r.asset.id == other).gpu_hours_per_hour == 0


class _ro:
    def __init__(self, db):
        self.db = db

    def __enter__(self):
        self.conn = connect(self.db, read_only=True)
        return self.conn

    def __exit__(self, *exc):
        self.conn.close()


def test_fail_over_exit_code_and_formats(ghost):
    db, fault, _, _, save = ghost
    onset = _ts(fault["start"])
    half = (onset + (save - onset) / 2).strftime("%Y-%m-%dT%H:%M:%S")
    run = CliRunner()
    base = ["risks", "--db", str(db), "--history-hours", "0", "--at", half]
    res = run.invoke(cli, [*base, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    n = doc["degrading"]  # the link, the decoy, and a benign flap on an idle node
    assert doc["schema"] == "synestra.risks/1" and n >= 2
    res = run.invoke(cli, [*base, "--fail-over", str(n - 1)])
    assert res.exit_code == 7 and f"{n} components degrading" in res.output
    assert run.invoke(cli, [*base, "--fail-over", str(n)]).exit_code == 0
    res = run.invoke(cli, [*base, "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.splitlines()[0].startswith("rank,status,kind,asset")
    assert run.invoke(cli, [*base, "--fail-over", "-1"]).exit_code == 2
    assert run.invoke(cli, ["risks", "--db", str(db), "--at", "soon"]).exit_code == 2


def test_default_time_is_the_latest_data_and_lemons_need_history(ghost):
    db, *_ = ghost
    with _ro(db) as conn:
        latest = conn.execute("SELECT max(ts) FROM metrics").fetchone()[0]
        report = risks_at(conn, history=None)
    assert report.at >= latest and all(r.status == "degrading" for r in report.risks) and not report.stale
    res = CliRunner().invoke(cli, ["risks", "--db", str(db), "--history-hours", "0", "--at", "2030-01-01"])
    assert res.exit_code == 0 and "ingest the latest exports first" in res.output


def test_empty_store_exits_6(tmp_path):
    connect(tmp_path / "empty.duckdb").close()
    res = CliRunner().invoke(cli, ["risks", "--db", str(tmp_path / "empty.duckdb")])
    assert res.exit_code == 6 and "ingest" in res.output


def test_a_counter_reset_is_no_risk_errors_after_it_are(conn):
    """A reboot zeroes the HCA counters: the drop is a reset, not a negative rate or an error burst; the
    errors that follow it still count (rates by window functions, resets handled)."""
    from explain_fixtures import Scenario, at

    sc = Scenario(conn).cluster()
    sc.series("gpu-001", "mlx5_0", "ib_port_symbol_errors_total", 0, 3600, 30, 0.0, counter=True, reset_at=3000)
    sc.series(
        "gpu-002",
        "mlx5_0",
        "ib_port_symbol_errors_total",
        0,
        3600,
        30,
        0.0,
        (3100, 3600, 5.0),
        counter=True,
        reset_at=3000,
    )
    sc.series(
        "gpu-002",
        "mlx5_0",
        "ib_port_rcv_errors_total",
        0,
        3600,
        30,
        0.0,
        (3100, 3600, 2.0),
        counter=True,
        reset_at=3000,
    )
    ids = [r.asset.id for r in risks_at(conn, at(3590), history=None).degrading]
    assert ids == ["gpu-002:mlx5_0"]
