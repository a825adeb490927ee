"""explain_job on hand-built scenarios: the right trigger, cause, host and component; decoys ignored."""

from __future__ import annotations

import pytest
from explain_fixtures import HOSTS, OTHER, SAVE_S, Scenario, bus_id, healthy_job, reactive_job

from synestra_cli.errors import EmptyStoreError, NotFoundError
from synestra_cli.explain.job import explain_job


def _ports(sc: Scenario, metric: str, end: float, bad_host: str | None, bad=(300, 1e9, 0.5)) -> None:
    for i, h in enumerate([*HOSTS, OTHER]):
        window = bad if h == bad_host else (100, 1e9, 2.0) if h == OTHER else None
        sc.series("leaf-01", f"Ethernet{i + 1}", metric, -1800, end, 30, 0.0, window, counter=True)


def _by_iteration(conn, job="100"):
    return {(c.kind, c.iteration): c for c in explain_job(conn, job).checkpoints}


def _clock_events(sc: Scenario, end: float, bad_host: str, gpus: range, bits: float, every: float = 60.0) -> None:
    """DCGM clocks-event reasons for every GPU: SW power cap (0x4) all along, as a GPU at its power
    limit shows (routine); `bits` (a float, as some exporters write it) on bad_host's `gpus` from 290 s."""
    for h in HOSTS:
        for g in range(8):
            bad = (290, 1e9, bits) if h == bad_host and g in gpus else None
            sc.series(h, f"gpu{g}", "gpu_clock_events_bitmask", -1800, end + 600, every, 4.0, bad)


@pytest.mark.parametrize(
    ("bits", "gpus", "want"),
    [
        (136.0, range(8), ("power.capping", "gpu-002", None)),  # HW power brake + HW slowdown, whole node
        (96.0, range(3, 4), ("cooling.thermal", "gpu-002", "gpu3")),  # SW + HW thermal on one GPU
        (8.0, range(5, 6), ("gpu.hw_slowdown", "gpu-002", "gpu5")),  # the GPU's own HW slowdown
    ],
)
def test_clock_event_reasons_tell_power_brake_from_thermal_from_a_gpus_own_slowdown(conn, bits, gpus, want):
    sc, end = reactive_job(conn)
    _clock_events(sc, end, "gpu-002", gpus, bits)
    reactive = _by_iteration(conn)[("save", 330)]
    assert reactive.trigger == "reactive"
    assert (reactive.cause.category, reactive.cause.host, reactive.cause.component) == want
    assert reactive.cause.confidence > 0.5


def test_healthy_job_has_only_routine_checkpoints(conn):
    healthy_job(conn)
    cps = explain_job(conn, "100").checkpoints
    assert [c.trigger for c in cps] == ["periodic"] * 4 + ["final"]
    assert all(c.cause is None and not c.chain for c in cps)


def test_lossy_switch_port_explains_the_reactive_save_and_decoys_are_ignored(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, "gpu-002")
    # Noisy but healthy: a steady low symbol-error rate on another host's HCA from the start.
    sc.series("gpu-003", "mlx5_0", "ib_port_symbol_errors_total", -1800, end + 600, 30, 0.01, counter=True)
    sc.event(150, OTHER, "xid", bus_id(2), 13)  # another job's node
    cps = _by_iteration(conn)
    reactive = cps[("save", 330)]
    assert reactive.trigger == "reactive"
    assert (reactive.cause.category, reactive.cause.host, reactive.cause.component) == (
        "network.link_degraded",
        "leaf-01",
        "leaf-01:Ethernet2",
    )
    assert reactive.cause.reported_healthy is True
    assert reactive.cause.confidence > 0.6
    layers = [lk.layer for lk in reactive.chain]
    assert layers[0] == "physical" and layers[-1] == "checkpoint" and "throughput" in layers
    assert all(OTHER not in (a.host or "") and "Ethernet5" not in (a.component or "") for a in reactive.alternatives)
    assert cps[("save", 200)].cause is None and cps[("save", 400)].trigger == "final"


def test_a_link_that_went_down_is_not_reported_healthy(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, "gpu-002")
    sc.event(290, "leaf-01", "link_down", "Ethernet2")  # the switch end of the same cable
    sc.event(295, "gpu-002", "link_down", "mlx5_0", message="mlx5_core: Link down")
    cause = _by_iteration(conn)[("save", 330)].cause
    assert cause.category in ("network.link_degraded", "network.link_down")
    assert cause.reported_healthy is False


def test_fault_beginning_after_the_checkpoint_is_not_blamed(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, "gpu-002", bad=(500, 1e9, 0.5))
    cause = _by_iteration(conn)[("save", 330)].cause
    assert cause.category == "workload.straggler" and cause.host is None


def test_slowdown_with_healthy_telemetry_is_a_straggler(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, None)  # every job port clean
    cause = _by_iteration(conn)[("save", 330)].cause
    assert cause.category == "workload.straggler"


def _activity(sc: Scenario, end: float, busy: tuple[str, int] | None, every: float = 30.0) -> None:
    """DCGM activity of every GPU: tensor 0.52, SM 0.86, 660 W; from the slowdown (300 s, x1.5) each
    GPU waits for the slowest and keeps 1/1.5 of it, but the `busy` GPU, which sets the pace."""
    for h in HOSTS:
        for g in range(8):
            keep = 1.0 if (h, g) == busy else 1 / 1.5
            for metric, level in (
                ("gpu_tensor_active_ratio", 0.52),
                ("gpu_sm_active_ratio", 0.86),
                ("gpu_power_watts", 660.0),
            ):
                sc.series(h, f"gpu{g}", metric, -1800, end + 600, every, level, (300, 1e9, level * keep))


def test_straggler_host_is_the_one_whose_gpus_stay_busy_while_peers_wait(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, None)
    _activity(sc, end, ("gpu-003", 2))
    reactive = _by_iteration(conn)[("save", 330)]
    assert (reactive.cause.category, reactive.cause.host, reactive.cause.component) == (
        "workload.straggler",
        "gpu-003",
        None,
    )
    assert reactive.cause.confidence > 0.7
    busy = next(lk for lk in reactive.chain if lk.evidence.get("metric") == "gpu_activity_kept_ratio")
    assert (busy.host, busy.entity) == ("gpu-003", "gpu2") and busy.evidence["after"] > 0.95


def test_straggler_without_an_asymmetry_names_no_host(conn):
    sc, end = reactive_job(conn)
    _ports(sc, "port_symbol_errors_total", end + 600, None)
    _activity(sc, end, None)  # every GPU slowed alike: nothing tells the slow rank apart
    cause = _by_iteration(conn)[("save", 330)].cause
    assert (cause.category, cause.host, cause.confidence) == ("workload.straggler", None, 0.5)


def test_slowdown_without_any_telemetry_says_unknown_not_straggler(conn):
    reactive_job(conn)
    cause = _by_iteration(conn)[("save", 330)].cause
    assert cause.category == "unknown" and cause.confidence < 0.3


def _crashed_job(conn, incident: str = "nccl_timeout") -> Scenario:
    """Attempt 1 hangs at ~t=330 and fails at 930; attempt 2 restores iteration 200 and finishes."""
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 300)
    if incident == "nccl_timeout":
        sc.incident(1, t + 5, "nccl_timeout", ran_for_s=600)
    else:
        sc.incident(1, t + 5, incident, host="gpu-004")
    sc.attempt(1, -60, t + 605, "FAILED", "1:0")
    sc.checkpoint(2, "restore", 200, t + 700, 30)
    t2 = sc.steps(2, t + 730, 210, 400)
    sc.checkpoint(2, "save", 400, t2)
    sc.attempt(2, t + 680, t2 + 60, "COMPLETED")
    return sc


def test_gpu_fell_off_the_bus_explains_the_restart(conn):
    sc = _crashed_job(conn)
    sc.event(318, "gpu-003", "xid", bus_id(3), 79, "NVRM: Xid (PCI:0000:48:00): 79, GPU has fallen off the bus.")
    sc.event(1200, "gpu-002", "link_down", "mlx5_0")  # after the restore: a decoy
    sc.event(100, OTHER, "xid", bus_id(1), 79)  # outside the job
    restore = _by_iteration(conn)[("restore", 200)]
    assert restore.trigger == "restart"
    assert (restore.cause.category, restore.cause.host, restore.cause.component) == (
        "gpu.fell_off_bus",
        "gpu-003",
        "gpu3",
    )
    log = next(lk for lk in restore.chain if lk.layer == "gpu")
    assert log.evidence["source"] == "/logs/syslog" and log.evidence["line"] == 42
    assert [lk.layer for lk in restore.chain][-1] == "checkpoint"
    assert any(lk.layer == "collective" for lk in restore.chain)


def test_memory_xid_is_gpu_memory(conn):
    sc = _crashed_job(conn)
    sc.event(320, "gpu-001", "xid", bus_id(5), 48, "Xid 48: DBE")
    cause = _by_iteration(conn)[("restore", 200)].cause
    assert (cause.category, cause.host, cause.component) == ("gpu.memory", "gpu-001", "gpu5")


def test_traceback_without_hardware_signal_is_a_software_crash(conn):
    _crashed_job(conn, "python_exception")
    cause = _by_iteration(conn)[("restore", 200)].cause
    assert (cause.category, cause.host) == ("software.crash", "gpu-004")


def test_hang_without_any_evidence_says_unknown_with_low_confidence(conn):
    _crashed_job(conn)
    restore = _by_iteration(conn)[("restore", 200)]
    assert restore.trigger == "restart"
    assert restore.cause.category == "unknown" and restore.cause.confidence < 0.3


def test_preemption_save_and_the_restore_after_it(conn):
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 270)
    sc.incident(1, t + 1, "sigterm")
    sc.checkpoint(1, "save", 270, t + 2)
    sc.attempt(1, -60, t + 40, "PREEMPTED", "0:15")
    sc.checkpoint(2, "restore", 270, t + 300, 30)
    t2 = sc.steps(2, t + 330, 280, 400)
    sc.checkpoint(2, "save", 400, t2)
    sc.attempt(2, t + 290, t2 + 60, "COMPLETED")
    cps = _by_iteration(conn)
    assert cps[("save", 270)].trigger == "preemption"
    assert cps[("restore", 270)].trigger == "preemption"
    assert cps[("save", 270)].cause.category == "scheduler.preemption"
    assert cps[("save", 200)].cause is None and cps[("save", 400)].trigger == "final"


def test_exit_signal_handler_save_is_the_preemption_save_and_no_host_is_blamed(conn):
    # Megatron's --exit-signal-handler: SIGTERM arrives unlogged, the job saves off-cadence (a 40 s
    # save), then prints its exit line; sacct calls the attempt PREEMPTED, exit 0:15.
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 270)
    sc.checkpoint(1, "save", 273, t + 2, 40.0)
    sc.incident(
        1, t + 44, "sigterm", message="[exiting program after receiving SIGTERM.] datetime: 2026-11-02 01:00:00"
    )
    sc.attempt(1, -60, t + 47, "PREEMPTED", "0:15")
    sc.checkpoint(2, "restore", 273, t + 1300, 55)
    t2 = sc.steps(2, t + 1360, 280, 400)
    sc.checkpoint(2, "save", 400, t2)
    sc.attempt(2, t + 1200, t2 + 60, "COMPLETED")
    cps = _by_iteration(conn)
    save, restore = cps[("save", 273)], cps[("restore", 273)]
    assert (save.trigger, save.cause.category, save.cause.host) == ("preemption", "scheduler.preemption", None)
    assert (restore.trigger, restore.cause.category, restore.cause.host) == ("preemption", "scheduler.preemption", None)


def test_a_save_with_training_after_it_is_not_the_preemption_save(conn):
    sc = Scenario(conn).cluster()
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 260)
    sc.checkpoint(1, "save", 250, t - 100, 40.0)  # an off-cadence save, then 10 more iterations logged
    sc.incident(1, t + 60, "sigterm", message="[exiting program after receiving SIGTERM.] datetime: x")
    sc.attempt(1, -60, t + 63, "PREEMPTED", "0:15")
    assert _by_iteration(conn)[("save", 250)].trigger != "preemption"


def test_slow_periodic_save_with_nfs_trouble_is_storage(conn):
    sc = Scenario(conn).cluster()
    t = 0.0
    for i, it in enumerate((200, 400, 600)):
        t = sc.steps(1, t, it - 190, it)
        dur = 150.0 if i == 1 else SAVE_S
        sc.checkpoint(1, "save", it, t, dur)
        if i == 1:
            sc.event(t + 10, "gpu-002", "nfs_not_responding", "nfs-01", message="nfs: server nfs-01 not responding")
        t += dur
    sc.attempt(1, -60, t + 30, "COMPLETED")
    cps = _by_iteration(conn)
    slow = cps[("save", 400)]
    assert slow.trigger == "periodic" and slow.slow
    assert (slow.cause.category, slow.cause.component) == ("storage.slow", "nfs-01")
    assert cps[("save", 200)].cause is None


def test_unknown_job_and_empty_store_raise_documented_errors(conn):
    with pytest.raises(EmptyStoreError):
        explain_job(conn, "100")
    healthy_job(conn)
    with pytest.raises(NotFoundError):
        explain_job(conn, "nope")
    with pytest.raises(NotFoundError):
        explain_job(conn, "100", checkpoint=12345)
    assert [c.iteration for c in explain_job(conn, "100", checkpoint=400).checkpoints] == [400]


def test_a_few_seconds_of_clock_skew_do_not_break_precedence(conn):
    sc = _crashed_job(conn)
    hang = conn.execute("SELECT epoch(ts) - epoch(TIMESTAMP '2026-03-01 12:00:00') FROM job_incidents").fetchone()[0]
    sc.event(hang + 20, "gpu-003", "xid", bus_id(3), 79)  # syslog clock 20 s ahead of the job log's
    cause = _by_iteration(conn)[("restore", 200)].cause
    assert (cause.category, cause.component) == ("gpu.fell_off_bus", "gpu3") and cause.confidence > 0.6


def test_infrastructure_evidence_too_thin_to_name_is_listed_and_lowers_the_fallback(conn):
    # A few discards per second on gpu-002's switch port since 13 min before the save: below the floor
    # to be named (weak signal, begun well before), but not nothing: the straggler fallback says so.
    sc, end = reactive_job(conn)
    _ports(sc, "if_in_discards_total", end + 600, "gpu-002", bad=(-450, 1e9, 0.2))
    cp = _by_iteration(conn)[("save", 330)]
    assert cp.cause.category == "workload.straggler" and cp.cause.confidence < 0.5
    assert [(a.category, a.host, a.component) for a in cp.alternatives] == [
        ("network.link_degraded", "leaf-01", "leaf-01:Ethernet2")
    ]
    assert cp.alternatives[0].confidence < cp.cause.confidence
