"""`synestra fleet` against ground truth: sample_data/ is a simulated 36-hour campaign whose truth.json
lists every fault and the jobs it hurt (issue 16, item 1)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_sample_store
from explain_fixtures import Scenario
from fleet_truth import score, true_lemons

from synestra_cli.cli.main import cli
from synestra_cli.fleet.assets import Inventory
from synestra_cli.fleet.lemons import NOT_A_COMPONENT, fleet_report
from synestra_cli.fleet.scan import episodes
from synestra_cli.store.connect import connect

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


@pytest.fixture(scope="module")
def campaign(tmp_path_factory, sample_store_template):
    db = copy_sample_store(sample_store_template, tmp_path_factory.mktemp("fleet"), "store.duckdb")
    conn = connect(db)
    report = fleet_report(conn)
    inv = Inventory(conn)
    conn.close()  # the CLI tests open it themselves
    return inv, report, json.loads((SAMPLE / "truth.json").read_text()), db


def test_lemons_are_exactly_the_components_truth_says_hurt_two_jobs(campaign):
    inv, report, truth, _ = campaign
    expected = true_lemons(truth, inv)
    assert {"rack-01", "nfs-01", "gpu-004:mlx5_0", "gpu-002:gpu0", "gpu-004:gpu1"} == set(expected)
    sc = score(report, truth, inv)
    assert sc.precision == 1.0 and sc.recall == 1.0, (sc.found, sc.truth)
    for row in report.lemons:
        if row.asset.id in expected:
            assert set(row.jobs) == expected[row.asset.id]
            assert any("hurt 2 jobs" in r for r in row.lemon_reasons)


def test_one_rack_event_is_one_row_and_one_incident(campaign):
    _, report, _, _ = campaign
    racks = [r for r in report.rows if r.asset.kind == "rack"]
    assert [r.asset.id for r in racks] == ["rack-01"]
    rack = racks[0]
    assert rack.jobs == ["1003", "1004"] and rack.incidents == 1 and rack.failures == 0
    # tax-report's component view splits it across two hosts; here no host-level row carries it
    assert not [r for r in report.rows if "cooling.thermal" in r.categories and r.asset.kind != "rack"]


def test_preemptions_and_routine_saves_are_never_a_component(campaign):
    _, report, truth, _ = campaign
    assert not {c for r in report.rows for h in r.hits for c in [h.category]} & set(NOT_A_COMPONENT)
    preempted = next(f for f in truth["faults"] if f["category"] == "scheduler.preemption")
    hit_jobs = {h.job for r in report.rows for h in r.hits if h.job in preempted["jobs_affected"]}
    # the preempted job is in the window, yet only its real faults are charged
    assert "1007" in report.jobs and all(
        h.category == "network.link_down" for r in report.rows for h in r.hits if h.job in hit_jobs and h.job == "1007"
    )


def test_assets_carry_their_identities(campaign):
    _, report, _, db = campaign
    by_id = {r.asset.id: r.asset for r in report.rows}
    gpu = by_id["gpu-002:gpu0"]
    nic = by_id["gpu-004:mlx5_0"]
    conn = connect(db, read_only=True)
    uuid = conn.execute("SELECT any_value(uuid) FROM gpus WHERE host = 'gpu-002' AND entity = 'gpu0'").fetchone()[0]
    far = conn.execute(
        "SELECT any_value(switch || ':' || switch_port) FROM topology WHERE host = 'gpu-004' AND nic = 'mlx5_0'"
    ).fetchone()[0]
    conn.close()
    assert uuid.startswith("GPU-") and gpu.identity["uuid"] == uuid
    assert nic.identity["far_end"] == far and nic.identity["rack"] == "rack-01"


def test_costs_are_tax_reports_and_ranked(campaign):
    _, report, _, _ = campaign
    hours = [r.gpu_hours for r in report.rows]
    assert hours == sorted(hours, reverse=True) and hours[0] > 1.0
    gpu = next(r for r in report.rows if r.asset.id == "gpu-004:gpu1")
    assert gpu.failures == 2 and gpu.incidents == 2 and gpu.first_seen < gpu.last_seen


def test_cli_json_csv_and_table(campaign):
    _, report, _, db = campaign
    run = CliRunner()
    res = run.invoke(cli, ["fleet", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "synestra.fleet/1" and doc["jobs"] == len(report.jobs)
    first = doc["components"][0]
    assert {
        "asset",
        "failures",
        "incidents",
        "gpu_hours",
        "jobs",
        "first_seen",
        "last_seen",
        "lemon",
        "lemon_reasons",
        "hits",
        "episodes",
    } <= set(first)
    res = run.invoke(cli, ["fleet", "--db", str(db), "--format", "csv", "--lemons"])
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert res.exit_code == 0 and len(rows) == len(report.lemons) and all(r["lemon"] == "True" for r in rows)
    res = run.invoke(cli, ["fleet", "--db", str(db), "--top", "3"])
    assert res.exit_code == 0 and "lemon" in res.stdout and "rack-01" in res.stdout


def test_bad_inputs_exit_with_documented_codes(tmp_path, campaign):
    _, _, _, db = campaign
    run = CliRunner()
    res = run.invoke(cli, ["fleet", "--db", str(db), "--since", "2026-11-03", "--until", "2026-11-02"])
    assert res.exit_code == 2 and "--since 2026-11-03T00:00:00Z is after --until 2026-11-02T00:00:00Z" in res.output
    assert run.invoke(cli, ["fleet", "--db", str(db), "--since", "yesterday"]).exit_code == 2
    assert run.invoke(cli, ["fleet", "--db", str(tmp_path / "none.duckdb")]).exit_code == 6
    connect(tmp_path / "empty.duckdb").close()
    res = run.invoke(cli, ["fleet", "--db", str(tmp_path / "empty.duckdb")])
    assert res.exit_code == 6 and "ingest" in res.output


def _port(sc: Scenario, host: str, metric: str, bad: list[tuple[float, float, float]]) -> None:
    """A cumulative counter of mlx5_0 sampled every 30 s for two hours, rising at each bad window's rate."""
    from explain_fixtures import at

    sid, total, rows = sc.source(f"/metrics/{metric}.prom", "prometheus"), 1000.0, []
    for t in range(0, 7201, 30):
        total += 30 * sum(rate for lo, hi, rate in bad if lo <= t < hi)
        rows.append([at(t), host, "mlx5_0", metric, total, sid])
    sc.conn.executemany(
        "INSERT INTO metrics (ts, host, entity, metric, value, source_id) VALUES (?, ?, ?, ?, ?, ?)", rows
    )


def test_a_noisy_but_healthy_link_is_no_episode_a_failing_one_is(conn):
    """One symbol error a scrape, alone, is noise (below magnitude 10, one metric); symbol errors with
    receive errors are a failing link; two such episodes an hour apart make a lemon with no job hurt."""
    sc = Scenario(conn).cluster()
    _port(sc, "gpu-001", "ib_port_symbol_errors_total", [(1000, 1200, 1 / 30), (5000, 5200, 1 / 30)])  # noise
    _port(sc, "gpu-002", "ib_port_symbol_errors_total", [(1000, 1600, 5.0), (6000, 6600, 5.0)])
    _port(sc, "gpu-002", "ib_port_rcv_errors_total", [(1000, 1600, 2.0), (6000, 6600, 2.0)])
    from explain_fixtures import at

    from synestra_cli.fleet.scan import fleet_signals

    signals = fleet_signals(conn, at(0), at(7200))
    assert any(s.host == "gpu-001" for s in signals)  # the anomaly rule does fire on the noise
    eps = episodes(signals, Inventory(conn))
    assert "gpu-001:mlx5_0" not in eps
    assert [e.start < e.end for e in eps["gpu-002:mlx5_0"]] == [True, True]
    report = fleet_report(conn, at(0), at(7200))
    row = next(r for r in report.rows if r.asset.id == "gpu-002:mlx5_0")
    assert row.lemon and row.jobs == [] and "2 separate episodes" in row.lemon_reasons[0]
    assert row.asset.identity["far_end"] == "leaf-01:Ethernet2"


@pytest.mark.heavy
def test_risks_lists_the_known_lemons_with_the_history_that_ended_before_t(campaign):
    from datetime import timedelta

    from synestra_cli.fleet.risks import risks_at

    _, report, _, db = campaign
    conn = connect(db, read_only=True)
    try:
        latest = conn.execute("SELECT max(ts) FROM metrics").fetchone()[0]
        known = risks_at(conn, latest, history=timedelta(days=7))
        early = risks_at(conn, report.since + timedelta(hours=6), history=timedelta(days=7))
    finally:
        conn.close()
    lemons = {r.asset.id for r in report.lemons}
    assert {r.asset.id for r in known.risks if r.lemon_reasons} == lemons
    assert all(r.action.endswith("before it costs another job") for r in known.risks if r.lemon_reasons)
    # six hours in, no job has ended yet: no lemon can be known, whatever comes later
    assert not [r for r in early.risks if r.lemon_reasons]


def test_by_host_sums_a_nodes_parts(campaign):
    from synestra_cli.fleet.lemons import rollup

    inv, report, _, _ = campaign
    by_host = {r.asset.id: r for r in rollup(report, "host", inv).rows}
    parts = [r for r in report.rows if r.asset.host == "gpu-004"]
    assert {r.asset.id for r in parts} >= {"gpu-004:gpu1", "gpu-004:mlx5_0"}
    node = by_host["gpu-004"]
    assert node.jobs == sorted({j for r in parts for j in r.jobs}) and len(node.jobs) == 4
    assert abs(node.gpu_hours - sum(r.gpu_hours for r in parts)) < 1e-9
    assert "rack-01" in by_host and by_host["rack-01"].jobs == ["1003", "1004"]  # a rack event stays the rack's
    by_rack = rollup(report, "rack", inv)
    assert {r.asset.id for r in by_rack.rows} == {"rack-01", "nfs-01"}
