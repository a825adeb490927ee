"""The simulator's truth agrees with its exports: the first signal it names is in the files at that time,
the physics crosses layers as documented, and decoys are where explain must not look."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
import simcache

SKEW_S = 3.5  # sources' clocks differ by up to MAX_SKEW_S (3 s) plus jitter
NODES, HOURS, GPUS = 8, 3.0, 2


@pytest.fixture(scope="module")
def sims():
    def get(scenario: str, seed: int = 5) -> tuple[Path, dict]:
        sim = simcache.simulation(scenario, seed=seed, nodes=NODES, hours=HOURS, gpus_per_node=GPUS)
        return sim / "exports", simcache.truth(sim)

    return get


def ts(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def series(path: Path, metric: str, **labels: str) -> tuple[np.ndarray, np.ndarray]:
    """(times in s, values) of one series in a Prometheus text file with ms timestamps."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    rows = [
        line.rsplit(" ", 2)[1:]
        for line in path.read_text().splitlines()
        if line.startswith(metric + "{") and all(w in line for w in want)
    ]
    arr = np.array(rows, dtype=float).reshape(-1, 2)
    return arr[:, 1] / 1000.0, arr[:, 0]


def syslog_times(exports: Path, host: str, needle: str, year: int) -> list[float]:
    """When a host's syslog printed a line containing needle, whatever the file's flavour."""
    (path,) = (exports / "syslog").glob(f"{host}.*")
    out = []
    for line in path.read_text().splitlines():
        if needle not in line:
            continue
        if line.startswith("{"):
            out.append(int(json.loads(line)["__REALTIME_TIMESTAMP"]) / 1e6)
        elif re.match(r"\d{4}-", line):
            out.append(datetime.fromisoformat(line.split(" ", 1)[0]).timestamp())
        else:
            out.append(datetime.strptime(f"{year} {line[:15]}", "%Y %b %d %H:%M:%S").replace(tzinfo=UTC).timestamp())
    return out


def main_fault(truth: dict) -> dict:
    (fault,) = [f for f in truth["faults"] if truth["main_job"] in f["jobs_affected"]]
    return fault


def main_job(truth: dict) -> dict:
    return next(j for j in truth["jobs"] if j["job"] == truth["main_job"])


def test_ghost_link_sags_optics_and_raises_errors_at_both_ends_while_the_link_stays_up(sims):
    exports, truth = sims("ghost-link")
    f = main_fault(truth)
    host, nic = f["hosts"][0], f["component"]
    t0 = ts(f["first_signal"])
    assert f["reported_healthy"] is True
    rows = [ln.split(",") for ln in (exports / "optics" / f"{host}.csv").read_text().splitlines()[1:]]
    rx = np.array([(ts(r[0]), float(r[4])) for r in rows if r[2] == nic and r[3] == "optics_rx_power_dbm"])
    before = rx[rx[:, 0] < t0 - SKEW_S, 1]
    first_after = rx[rx[:, 0] >= t0 + SKEW_S][0]
    assert first_after[0] - t0 < 60 + 2 * SKEW_S  # the first optics sample after onset ...
    assert before.mean() - first_after[1] > 0.8  # ... already shows the sag
    t, sym = series(exports / "node_exporter" / f"{host}.prom", "node_infiniband_symbol_error_total", device=nic)
    before = sym[t < t0].max() - sym[t < t0].min()  # at most a trickle (a noisy-but-healthy link)
    assert sym[-1] - sym[t < t0].max() > 100 + 20 * before  # ... then climbing
    _, state = series(exports / "node_exporter" / f"{host}.prom", "node_infiniband_state_id", device=nic)
    assert set(state) == {4.0}  # ACTIVE throughout: reported healthy
    leaf = f"leaf-{int(nic.split('_')[1]) + 1:02d}"
    t, err = series(exports / "snmp" / f"{leaf}.prom", "ifInErrors", ifAlias=f"{host}:{nic}")
    assert err[-1] - err[t < t0].max() > 100  # the switch peer sees the loss too


def test_ghost_link_slows_every_gpu_of_the_job_while_gpu_util_stays_near_100(sims):
    exports, truth = sims("ghost-link")
    job, f = main_job(truth), main_fault(truth)
    react = next(c for c in job["checkpoints"] if c["trigger"] == "reactive")
    t_fault, t_react = ts(f["first_signal"]), ts(react["start"])
    for host in job["hosts"]:
        dcgm = exports / "dcgm" / f"{host}.prom"
        t, tensor = series(dcgm, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu="0")
        _, util = series(dcgm, "DCGM_FI_DEV_GPU_UTIL", gpu="0")
        healthy = (t > t_fault - 1200) & (t < t_fault - 60) & (util > 90)
        slow = (t > t_fault + 120) & (t < t_react) & (util > 90)
        assert healthy.sum() > 5 and slow.sum() > 3
        assert tensor[slow].mean() < 0.85 * tensor[healthy].mean()
        assert util[slow].mean() > 95


def test_gpu_fell_off_bus_logs_xid_79_at_the_first_signal_and_its_metrics_stop(sims):
    exports, truth = sims("gpu-fell-off-bus")
    f = main_fault(truth)
    host, gpu = f["hosts"][0], f["component"][3:]
    t0 = ts(f["first_signal"])
    seen = syslog_times(exports, host, "): 79, GPU has fallen off the bus.", 2026)
    assert len(seen) == 1 and abs(seen[0] - t0) <= SKEW_S
    t, _ = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_GPU_TEMP", gpu=gpu)
    gap = np.diff(t)[np.searchsorted(t, t0) - 1]
    assert gap > 600  # silent from the Xid until the node is rebooted
    restart = next(c for c in main_job(truth)["checkpoints"] if c["trigger"] == "restart")
    assert restart["cause"]["category"] == "gpu.fell_off_bus" and restart["cause"]["component"] == f"gpu{gpu}"


def test_ecc_dbe_logs_xid_48_and_counts_the_double_bit_error(sims):
    exports, truth = sims("ecc-dbe")
    f = main_fault(truth)
    host, gpu, t0 = f["hosts"][0], f["component"][3:], ts(f["first_signal"])
    assert [abs(x - t0) <= SKEW_S for x in syslog_times(exports, host, "): 48, ", 2026)] == [True]
    t, dbe = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu=gpu)
    assert dbe[t < t0].max() == 0 and dbe[(t > t0) & (t < t0 + 60)].min() == 1


def test_nvlink_errors_climb_from_the_first_signal_before_xid_74(sims):
    exports, truth = sims("nvlink")
    f = main_fault(truth)
    host, gpu, t0 = f["hosts"][0], f["component"][3:], ts(f["first_signal"])
    (xid_at,) = syslog_times(exports, host, "): 74, ", 2026)
    assert xid_at - t0 > 60
    t, crc = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", gpu=gpu)
    assert crc[t < t0 - SKEW_S].max() == 0 and crc[(t > t0 + 30) & (t < xid_at)].max() > 0


def test_power_capping_sets_the_power_cap_bit_and_holds_power_under_the_cap(sims):
    exports, truth = sims("power-capping")
    f = main_fault(truth)
    t0, t1 = ts(f["first_signal"]), ts(f["end"])
    for host in f["hosts"]:
        t, bits = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu="1")
        _, power = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_POWER_USAGE", gpu="1")
        during = (t > t0 + SKEW_S) & (t < t1 - SKEW_S)
        assert (bits[during].astype(int) & 0x4).all() and not (bits[t < t0 - SKEW_S].astype(int) & 0x4).any()
        assert power[during].max() < 480 < power[(t < t0) & (bits == 0)].max()


def test_link_flap_logs_port_down_and_bumps_link_downed(sims):
    exports, truth = sims("link-flap")
    f = main_fault(truth)
    host, nic, t0 = f["hosts"][0], f["component"], ts(f["first_signal"])
    assert [abs(x - t0) <= SKEW_S for x in syslog_times(exports, host, f"{nic}: Port: 1 Link DOWN", 2026)] == [True]
    t, downed = series(exports / "node_exporter" / f"{host}.prom", "node_infiniband_link_downed_total", device=nic)
    assert downed[(t > t0 + SKEW_S) & (t < t0 + 120)].min() == downed[t < t0].max() + 1


def test_thermal_rack_heats_before_the_clocks_throttle_before_the_reactive_save(sims):
    exports, truth = sims("thermal-rack")
    f, job = main_fault(truth), main_job(truth)
    t0 = ts(f["first_signal"])
    react = ts(next(c for c in job["checkpoints"] if c["trigger"] == "reactive")["start"])
    host = next(h for h in f["hosts"] if h in job["hosts"])
    dcgm = exports / "dcgm" / f"{host}.prom"
    t, temp = series(dcgm, "DCGM_FI_DEV_GPU_TEMP", gpu="0")
    _, bits = series(dcgm, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gpu="0")
    throttled = t[(bits.astype(int) & 0x60) == 0x60]
    assert t0 < throttled[0] < react
    hot = (t > t0 + 300) & (t < throttled[0])
    busy_before = (t > t0 - 900) & (t < t0) & (bits == 0)
    assert temp[hot].mean() > temp[busy_before].mean() + 5


def test_slow_storage_complaints_start_at_the_first_signal_and_saves_stretch(sims):
    exports, truth = sims("slow-storage")
    f, job = main_fault(truth), main_job(truth)
    t0 = ts(f["first_signal"])
    for host in job["hosts"]:
        got = syslog_times(exports, host, "nfs-01 not responding", 2026) + syslog_times(
            exports, host, "was lost; in progress operations", 2026
        )
        assert any(abs(x - t0) <= SKEW_S + 2 for x in got)
    slow = [c for c in job["checkpoints"] if c["cause"] and c["cause"]["category"] == "storage.slow"]
    normal = [c["duration_s"] for c in job["checkpoints"] if c["kind"] == "save" and not c["cause"]]
    assert slow and min(c["duration_s"] for c in slow) > 2 * max(normal)


def test_a_straggler_is_the_one_gpu_that_keeps_its_tensor_activity_while_the_others_wait(sims):
    exports, truth = sims("straggler-compute")
    f, job = main_fault(truth), main_job(truth)
    react = ts(next(c for c in job["checkpoints"] if c["trigger"] == "reactive")["start"])
    start = ts(f["first_signal"])
    kept = {}
    for host in job["hosts"]:
        for gpu in range(GPUS):
            t, tensor = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gpu=str(gpu))
            before = tensor[(t > start - 1500) & (t < start - 60) & (tensor > 0.3)].mean()
            during = tensor[(t > start + 60) & (t < react - 60) & (tensor > 0.2)].mean()
            kept[(host, gpu)] = during / before
    busy = [k for k, v in kept.items() if v > 0.95]
    assert [h for h, _ in busy] == f["hosts"]  # one GPU, on the straggler's host
    assert all(v < 0.85 for k, v in kept.items() if k not in busy)  # every other GPU waits


@pytest.mark.parametrize("scenario", ["software-crash", "straggler-compute", "preemption"])
def test_not_the_infrastructure_scenarios_leave_no_hardware_signal_on_the_job(sims, scenario):
    exports, truth = sims(scenario)
    for host in main_job(truth)["hosts"]:
        text = next((exports / "syslog").glob(f"{host}.*")).read_text()
        assert "NVRM: Xid" not in text and "Link DOWN" not in text and "not responding" not in text


@pytest.mark.parametrize("scenario", ["ghost-link", "gpu-fell-off-bus", "thermal-rack", "slow-storage", "routine"])
def test_decoys_are_outside_the_job_or_begin_after_the_checkpoint_they_could_be_blamed_for(sims, scenario):
    _, truth = sims(scenario)
    job = main_job(truth)
    placed = [f for f in truth["faults"] + truth["decoys"] if f["decoy"]]
    assert {"after_checkpoint"} < {f["decoy"] for f in placed}
    assert all(d["decoy"] and not d["jobs_affected"] for d in truth["decoys"])  # decoys touched no job
    for d in placed:
        assert truth["main_job"] not in d["jobs_affected"]
        if d["decoy"] == "outside_job":
            assert not set(d["hosts"]) & set(job["hosts"])
        if d["decoy"] == "after_checkpoint":
            first = ([c for c in job["checkpoints"] if c["trigger"] != "periodic"] or job["checkpoints"])[0]
            assert ts(d["start"]) > ts(first["end"])
            # never on the component of a real fault: a decoy is told apart by what it is, not by when
            assert not any(
                set(d["hosts"]) & set(f["hosts"]) and d["component"] == f["component"]
                for f in truth["faults"]
                if not f["decoy"]
            )


def test_counters_restart_from_zero_when_the_node_reboots(sims):
    exports, truth = sims("gpu-fell-off-bus")
    host = main_fault(truth)["hosts"][0]
    _, energy = series(exports / "dcgm" / f"{host}.prom", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gpu="0")
    drops = np.flatnonzero(np.diff(energy) < 0)
    assert len(drops) == 1 and energy[drops[0] + 1] < 0.01 * energy[drops[0]]


def test_the_after_checkpoint_decoy_never_lands_on_a_real_faults_nic():
    from types import SimpleNamespace

    from synestra_cli.simulate import faults as F
    from synestra_cli.simulate.cluster import Cluster
    from synestra_cli.simulate.jobs import US
    from synestra_cli.simulate.scenarios import after_checkpoint_decoy, base_plan

    for seed in range(20):
        rng = np.random.default_rng(seed)
        plan = base_plan(Cluster(4, 8, seed=seed), 4.0, rng)
        a, b = plan.main.hosts
        # real degraded links on every NIC of the job but one: the decoy must take that one
        plan.faults += [
            F.ghost_link(plan.cl, h, n, plan.t0 + 3600, plan.t0 + 7200, rng)
            for h in (a, b)
            for n in range(8)
            if (h, n) != (b, 5)
        ]
        tl = SimpleNamespace(
            spec=plan.main, checkpoints=[SimpleNamespace(trigger="periodic", end=int((plan.t0 + 600) * US))]
        )
        decoy = after_checkpoint_decoy(plan, tl)
        assert (decoy.hosts, decoy.cause.component) == ((b,), "mlx5_5")
