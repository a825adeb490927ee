"""Gray parts against their peers (signals/peers.py) and host before rack (explain/attribute.py), on small
stores and hand-made signals: the simulated scenarios (gray-gpu, power-cap-host) are in the truth matrix."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pytest

from synestra_cli.explain.attribute import Effect, score_all
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.signals.anomalies import Anomaly, Peers
from synestra_cli.signals.peers import peer_outliers
from synestra_cli.signals.scope import JobScope, Link
from synestra_cli.store.connect import memory_store

T0 = datetime(2026, 11, 2, 0, 0, 0)
HOSTS = ["gpu-001", "gpu-002"]
STEP = 30.0
N = 240  # two hours at 30 s
WINDOW = [(T0 + timedelta(minutes=20), T0 + timedelta(minutes=115))]


def _counter(rate: np.ndarray, rng: np.random.Generator, reset_at: int | None = None) -> np.ndarray:
    """Cumulative Poisson counts at `rate` per s (per sample), restarting from zero at `reset_at`."""
    inc = rng.poisson(rate * STEP)
    total = np.cumsum(inc) + 1000
    if reset_at is not None:
        total[reset_at:] = np.cumsum(inc[reset_at:])
    return total


def _write(tmp_path, series: dict[tuple[str, str, str], np.ndarray]):
    """A metrics_long CSV of the series (host, entity, metric) -> values every STEP s from T0."""
    lines = ["timestamp,host,entity,metric,value"]
    for (host, entity, metric), values in series.items():
        for i, v in enumerate(values):
            ts = (T0 + timedelta(seconds=STEP * i + 0.25)).isoformat(timespec="milliseconds") + "Z"
            lines.append(f"{ts},{host},{entity},{metric},{int(v)}")
    path = tmp_path / "counters.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def _fleet(rng: np.random.Generator, metric: str = "gpu_pcie_replay_total") -> dict:
    quiet = np.full(N, 0.0)
    return {(h, f"gpu{g}", metric): _counter(quiet, rng) for h in HOSTS for g in range(8)}


def _outliers(conn, known=None):
    return peer_outliers(conn, HOSTS, [], WINDOW, known)


@pytest.fixture(scope="module")
def gray_store(tmp_path_factory):
    """16 GPUs: gpu-002 gpu5's PCIe replays rise to 0.05/s at minute 80; gpu-001 gpu3's correctable ECC run at
    0.02/s from the start, through a counter reset (a reboot) at minute 60; gpu-001 gpu6 has three stray ECC
    errors; NICs: one of 16 errs a symbol every ~8 min (noisy but healthy)."""
    rng = np.random.default_rng(7)
    series = _fleet(rng)
    rise = np.where(np.arange(N) >= 160, 0.05, 0.0)
    series[("gpu-002", "gpu5", "gpu_pcie_replay_total")] = _counter(rise, rng)
    ecc = _fleet(rng, "gpu_ecc_sbe_volatile_total")
    ecc[("gpu-001", "gpu3", "gpu_ecc_sbe_volatile_total")] = _counter(np.full(N, 0.02), rng, reset_at=120)
    stray = np.zeros(N)
    stray[[30, 100, 200]] = 1 / STEP
    ecc[("gpu-001", "gpu6", "gpu_ecc_sbe_volatile_total")] = _counter(stray, rng)
    nics = {
        (h, f"mlx5_{n}", "ib_port_symbol_errors_total"): _counter(np.zeros(N), rng) for h in HOSTS for n in range(8)
    }
    nics[("gpu-001", "mlx5_2", "ib_port_symbol_errors_total")] = _counter(np.full(N, 0.002), rng)
    conn = memory_store()  # one store for the module: the tests only read it
    report = ingest_file(conn, _write(tmp_path_factory.mktemp("gray"), {**series, **ecc, **nics}), IngestOptions())
    assert report.status == "loaded", report.error
    yield conn
    conn.close()


def test_a_gpu_far_above_its_peers_is_found_and_its_rise_dated(gray_store):
    _, found = _outliers(gray_store)
    got = {(a.host, a.entity, a.metric): a for a in found}
    assert set(got) == {
        ("gpu-002", "gpu5", "gpu_pcie_replay_total"),
        ("gpu-001", "gpu3", "gpu_ecc_sbe_volatile_total"),
    }
    pcie = got[("gpu-002", "gpu5", "gpu_pcie_replay_total")]
    assert abs((pcie.onset - (T0 + timedelta(minutes=80))).total_seconds()) <= 2 * STEP
    assert pcie.category == "host.pcie" and pcie.is_rate and pcie.before == 0.0
    assert pcie.peers == Peers(16, 0.0, 0.0, pytest.approx(pcie.after / 1e-4), True)
    assert 0.035 < pcie.after < 0.07  # the rate after the rise, not diluted by the hour before it
    # an old fault: the whole read at its rate (a counter reset counted from zero), dated at its first sample
    ecc = got[("gpu-001", "gpu3", "gpu_ecc_sbe_volatile_total")]
    assert ecc.onset == ecc.last_normal == ecc.first_bad <= WINDOW[0][0] + timedelta(seconds=STEP)
    assert 0.015 < ecc.after < 0.025 and ecc.peers.ratio > 100


def test_the_summaries_and_the_samples_give_the_same_suspects(gray_store, monkeypatch):
    _, with_summaries = _outliers(gray_store)
    monkeypatch.setenv("SYNESTRA_SUMMARIES", "0")
    _, raw = _outliers(gray_store)
    assert raw == with_summaries and raw


def test_a_window_of_its_own_history_is_set_beside_its_peers_and_a_stray_one_is_ordinary(gray_store):
    def own(host, entity, metric, onset):
        return Anomaly(host, entity, metric, "physical", "network.link_degraded", 1.0, onset, onset, 0.0, 0.033,
                       0.033, 3, True, onset, 0.004, onset)  # fmt: skip

    noisy = own("gpu-001", "mlx5_2", "ib_port_symbol_errors_total", T0 + timedelta(minutes=50))
    early = own("gpu-002", "gpu5", "gpu_pcie_replay_total", T0 + timedelta(minutes=79))
    late = own("gpu-002", "gpu5", "gpu_pcie_replay_total", T0 + timedelta(minutes=100))
    beside, found = _outliers(gray_store, [noisy])
    assert beside[0].ordinary and not beside[0].peers.found and beside[0].peers.series == 16
    assert ("gpu-002", "gpu5", "gpu_pcie_replay_total") in {(a.host, a.entity, a.metric) for a in found}
    # its own history dated the rise first: that window speaks for it; a later burst over a floor does not
    assert "gpu_pcie_replay_total" not in {a.metric for a in _outliers(gray_store, [early])[1]}
    assert "gpu_pcie_replay_total" in {a.metric for a in _outliers(gray_store, [late])[1]}


def test_a_fault_every_peer_shares_is_no_outlier(conn, tmp_path):
    rng = np.random.default_rng(3)
    series = {k: _counter(np.full(N, 0.05), rng) for k in _fleet(rng)}
    ingest_file(conn, _write(tmp_path, series), IngestOptions())
    assert _outliers(conn) == ([], [])


def test_too_few_peers_say_nothing(conn, tmp_path):
    rng = np.random.default_rng(5)
    series = {k: v for k, v in _fleet(rng).items() if k[0] == "gpu-001" and k[1] in ("gpu0", "gpu1", "gpu2")}
    series[("gpu-001", "gpu0", "gpu_pcie_replay_total")] = _counter(np.full(N, 0.05), rng)
    ingest_file(conn, _write(tmp_path, series), IngestOptions())
    assert _outliers(conn)[1] == []


# ---------------------------------------------------------------- host before rack (issue 37 item 8)
RACKS = [
    Link(h, f"mlx5_{n}", f"leaf-0{n + 1}", f"Ethernet{4 * i}", "rack-01") for i, h in enumerate(HOSTS) for n in range(2)
]
SCOPE = JobScope("j", [], HOSTS, RACKS)
AT = T0 + timedelta(hours=1)
EFFECT = Effect("slowdown", AT, AT, AT)


def _flag(host: str, gpu: int, metric: str, category: str) -> Anomaly:
    onset = AT - timedelta(minutes=5)
    return Anomaly(host, f"gpu{gpu}", metric, "gpu", category, 0.9, onset, AT, 0.0, 1.0, 1.0, 5, False, onset,
                   0.5, onset)  # fmt: skip


@pytest.mark.parametrize(
    ("metric", "category"),
    [("gpu_clock_event_sw_power_cap", "power.capping"), ("gpu_clock_event_sw_thermal", "cooling.thermal")],
)
def test_several_gpus_of_one_host_name_the_host_and_several_hosts_the_rack(metric, category):
    one_gpu = score_all([_flag("gpu-001", 3, metric, category)], SCOPE, EFFECT)
    one_host = score_all([_flag("gpu-001", g, metric, category) for g in range(8)], SCOPE, EFFECT)
    two_hosts = score_all([_flag(h, g, metric, category) for h in HOSTS for g in range(8)], SCOPE, EFFECT)
    assert [(c.category, c.host, c.component) for c in one_gpu] == [(category, "gpu-001", "gpu3")]
    assert [(c.category, c.host, c.component) for c in one_host] == [(category, "gpu-001", None)]
    assert [(c.category, c.host, c.component) for c in two_hosts] == [(category, None, "rack-01")]
