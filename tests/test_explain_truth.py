"""explain against the simulator's ground truth, at seeds not used while developing (0-2 were).

Every scenario x 3 held-out seeds at 8 nodes (~4 min on 2 cores) runs by default, as CI does
(marker `truth`: `pytest -m "not truth"` skips it while developing); the same matrix at 32 nodes
(~15 min) is marked `slow`, outside the default run (`pytest -m slow`).
Big jobs: a 128-host job under campus sampling in the default run (~9e6 samples); 64-, 256- and 1,024-host
jobs are marked `campus` (`pytest -m campus`).
"""

from __future__ import annotations

import pytest
import simcache
from explain_truth import Score, run_scenario, score_job

from synestra_cli.accounting.report import tax_report
from synestra_cli.explain.job import explain_job
from synestra_cli.fleet.risks import risks_at
from synestra_cli.simulate.export import Intervals
from synestra_cli.simulate.joblog import MODEL_BUILD_US
from synestra_cli.simulate.jobs import US
from synestra_cli.simulate.scenarios import MAIN_JOB, SCENARIOS
from synestra_cli.store.connect import connect

HELD_OUT_SEEDS = (101, 202, 303)
# Scenarios the reader does not read yet (issue 37): scored on their own, xfail, until it does. The
# node-failure reboot's Slurm lines (`DUE TO NODE FAILURE`) are read as a preemption today.
NOT_YET_READ = ("gpu-fell-off-bus-reboot",)
TARGETS = {"trigger": 0.98, "category": 0.95, "host": 0.95, "component": 0.90}


def _assert_targets(total: Score) -> None:
    rates = total.rates()
    shortfalls = {k: rates[k] for k, floor in TARGETS.items() if rates[k] < floor}
    assert not shortfalls and rates["routine_blamed"] == 0 and rates["decoy_blamed"] == 0, (rates, total.misses[:20])


@pytest.mark.heavy
def test_one_crash_scenario_end_to_end():
    score = run_scenario(None, "gpu-fell-off-bus", 404, nodes=8, hours=4.0)
    assert score.checkpoints > 5 and score.caused >= 1
    _assert_targets(score)


# One case per scenario (so that xdist spreads the matrix over the cores), each held to the targets on
# its own three seeds: stricter than the pooled rates, and a miss names its scenario. A scenario not checked at
# a size since the reader changed is xfail there until it is.
@pytest.mark.truth
@pytest.mark.parametrize("nodes", [8, pytest.param(32, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_scenario_at_held_out_seeds_meets_the_targets(name, nodes, request):
    if name in NOT_YET_READ and nodes != 8:  # met at 8 nodes since the readers (issue 37); 32 not run since
        request.applymarker(pytest.mark.xfail(strict=False, reason="issue 37: not checked at 32 nodes yet"))
    total = Score()
    for seed in HELD_OUT_SEEDS:
        total.add(run_scenario(None, name, seed, nodes))
    _assert_targets(total)


# ---------------------------------------------------------------- the five physics, each in its variant
# One simulation per variant (8 nodes, 4 h, a seed not used while developing), ingested once.
PHYSICS_SEED = 404


@pytest.fixture(scope="module")
def variant():
    """One simulation per variant (tests/simcache.py: built once for every module and worker), its store
    opened read-only."""
    made: dict[str, tuple] = {}

    def get(name: str):
        if name not in made:
            sim = simcache.simulation(name, seed=PHYSICS_SEED, nodes=8, hours=4.0)
            made[name] = (connect(simcache.ingested(sim), read_only=True), simcache.truth(sim))
        return made[name]

    yield get
    for conn, _ in made.values():
        conn.close()


def _main_score(variant, name: str) -> Score:
    conn, truth = variant(name)
    job = next(j for j in truth["jobs"] if j["job"] == MAIN_JOB)
    return score_job(conn, job, truth.get("decoys", []), name)


def _all_right(sc: Score) -> None:
    assert sc.caused >= 1 and not sc.misses, sc.misses
    assert sc.decoy_blamed == 0 and sc.routine_blamed == 0


@pytest.mark.heavy
def test_power_brake_on_one_node_is_power_capping_on_that_node(variant):
    # HW power brake + HW slowdown (0x88) as DCGM 4.6 CLOCKS_EVENT_REASONS floats every 60 s, power flat
    # below the peers', no power-violation time: power.capping on that host, not a straggler
    _all_right(_main_score(variant, "power-brake"))


@pytest.mark.heavy
def test_straggler_host_is_the_one_whose_gpus_stay_busy(variant):
    _all_right(_main_score(variant, "straggler-compute"))


@pytest.mark.heavy
def test_exit_signal_handler_save_is_the_preemption_save_and_blames_no_host(variant):
    sc = _main_score(variant, "preemption-exit-signal")
    _all_right(sc)
    assert sc.trigger_ok == sc.checkpoints


def test_undated_restores_are_bounded_not_zero(variant):
    # Megatron prints its load lines undated: the restore lies between [after megatron is initialized]
    # (then a few seconds of model building) and [after model, optimizer, ... are built]
    conn, truth = variant("preemption-exit-signal")
    job = next(j for j in truth["jobs"] if j["job"] == MAIN_JOB)
    restores = [c for c in job["checkpoints"] if c["kind"] == "restore"]
    ours = next(j for j in tax_report(conn).jobs if j.buckets.job_id == MAIN_JOB).buckets.buckets_s
    want = job["buckets_s"]["checkpoint_restore"]
    assert restores and want > 0
    assert want - 1.0 <= ours["checkpoint_restore"] <= want + len(restores) * (MODEL_BUILD_US / US + 1.0)
    assert conn.execute(
        "SELECT DISTINCT ts_precision FROM checkpoints_reconciled WHERE kind = 'restore' AND job_id = ?", [MAIN_JOB]
    ).fetchall() == [("bounded",)]


@pytest.mark.heavy
def test_nfs_outage_in_journald_json_with_printk_stamps_explains_the_slow_save(variant):
    _all_right(_main_score(variant, "slow-storage-journald"))


def _causes(conn) -> list[dict]:
    doc = explain_job(conn, MAIN_JOB).to_json()
    return [c["cause"] for c in doc["checkpoints"] if c["cause"]]


@pytest.mark.heavy
def test_a_power_cap_on_one_node_names_that_node_and_a_hot_rack_its_rack(variant):
    # issue 37 item 8: one host's GPUs capped is the host's (its assets the host and its GPUs), not its rack's
    _all_right(_main_score(variant, "power-cap-host"))
    conn, truth = variant("power-cap-host")
    (fault,) = [f for f in truth["faults"] if f["kind"] == "power_cap_host"]
    for cause in _causes(conn):
        assert (cause["category"], cause["host"], cause["component"]) == ("power.capping", fault["hosts"][0], None)
        kinds = [a["kind"] for a in cause["assets"]]
        assert kinds[0] == "host" and kinds.count("gpu") >= 2
    # several hosts of one rack hot: the rack, host null
    _all_right(_main_score(variant, "thermal-rack"))
    conn, truth = variant("thermal-rack")
    assert {(c["host"], c["component"]) for c in _causes(conn)} == {(None, truth["faults"][0]["component"])}


@pytest.mark.heavy
def test_a_gray_gpu_is_named_against_its_peers_and_risks_lists_both_gray_gpus(variant):
    # issue 37 item 6: PCIe replays under every floor, found only against the job's other GPUs; beside it a
    # GPU with 1000x its peers' correctable ECC, which slows nothing and is never blamed
    _all_right(_main_score(variant, "gray-gpu"))
    conn, truth = variant("gray-gpu")
    (cause,) = _causes(conn)
    doc = explain_job(conn, MAIN_JOB).to_json()
    links = [lk for c in doc["checkpoints"] if c["cause"] for lk in c["chain"] if "peers" in lk["evidence"]]
    peers = links[0]["evidence"]["peers"]
    assert peers["found"] and peers["ratio"] >= 100 and peers["series"] == 32 and "x its peers" in links[0]["signal"]
    gray = {(f["hosts"][0], f["component"], f["category"]) for f in truth["faults"] + truth["decoys"]}
    gray = {g for g in gray if g[2] in ("host.pcie", "gpu.memory") and g[0] in truth["jobs"][0]["hosts"]}
    assert len(gray) == 2
    report = risks_at(conn, history=None)
    found = {
        (r.asset.host, r.asset.component, r.categories[0])
        for r in report.degrading
        if any("peers" in lk.evidence and lk.evidence["peers"]["found"] for lk in r.chain)
    }
    assert found == gray


# Big jobs under the sampling campus fleets use (DCGM 1 min, node_exporter 2 min, SNMP and optics 5 min):
# the reactive save comes ~6 min after the fault's onset, so a port has one or two samples of it before
# the save, and the job's thousands of NICs show stray symbol errors elsewhere.
CAMPUS = Intervals(dcgm=60.0, ib=120.0, snmp=300.0, optics=300.0)
# Every fabric counter at the slow end of what sites run (5 min).
SLOWEST = Intervals(dcgm=60.0, ib=300.0, snmp=300.0, optics=300.0)


def _assert_big_job(score: Score) -> None:
    _assert_targets(score)
    # the evidence is overwhelming (a port 10^4 past its own baseline): not a hedge
    assert score.right_confidences and min(score.right_confidences) >= 0.5, (score.right_confidences, score.misses)


@pytest.mark.truth
def test_a_128_host_job_under_campus_sampling_names_its_ghost_link(tmp_path):
    """The main job of 256 nodes holds 128 hosts (1,024 NICs); 3 h (~9e6 samples) is the least that
    teaches the save cadence (a save every ~30 min). The old code named the port at 0.29: its seven NICs
    with a stray symbol error per scrape made the ghost link look fabric-wide."""
    score = run_scenario(tmp_path, "ghost-link", 5, nodes=256, hours=3.0, intervals=CAMPUS, jobs=["1001"])
    assert score.caused >= 1
    _assert_big_job(score)


@pytest.mark.campus  # 5e6-7e7 samples each
@pytest.mark.parametrize(
    ("nodes", "hours", "intervals", "seed"),
    [
        (128, 3.0, SLOWEST, 21),  # a 64-host job, every fabric counter every 5 min
        (512, 3.0, CAMPUS, 5),  # a 256-host job (the campus job, shorter)
        (2048, 3.0, CAMPUS, 5),  # a 1,024-host job
    ],
)
def test_big_jobs_under_sparse_sampling_name_their_ghost_link(tmp_path, nodes, hours, intervals, seed):
    score = run_scenario(tmp_path, "ghost-link", seed, nodes=nodes, hours=hours, intervals=intervals, jobs=["1001"])
    assert score.caused >= 1
    _assert_big_job(score)


# Every fault family on a 256-host job under campus sampling (issue 11: "the same fault ... in a
# 1,000-host job"): the fault's host among 255 peers, the straggler's among 255 waiting ones, a hot rack
# among 64, a GPU that fell off the bus among 2,048.
BIG_JOB_FAULTS = [
    "straggler-compute",
    "power-brake",
    "thermal-rack",
    "gpu-fell-off-bus",
    "slow-storage",
    "ecc-dbe",
    "link-flap",
    "nvlink",
]


@pytest.mark.campus  # ~2e7 samples each, 2-3 min apiece
@pytest.mark.parametrize("scenario", BIG_JOB_FAULTS)
def test_every_fault_family_on_a_256_host_job_names_its_cause(tmp_path, scenario):
    score = run_scenario(tmp_path, scenario, 5, nodes=512, hours=3.0, intervals=CAMPUS, jobs=["1001"])
    assert score.caused >= 1
    _assert_targets(score)
