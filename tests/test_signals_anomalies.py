"""Anomaly windows: against the entity's own history, with floors; events typed and joined to GPUs."""

from __future__ import annotations

from explain_fixtures import HOSTS, OTHER, Scenario, at, bus_id

from synestra_cli.signals.anomalies import anomalies, build_scope
from synestra_cli.signals.events import typed_events
from synestra_cli.signals.scope import load_scope


def _scoped(conn, sc: Scenario):
    sc.attempt(1, 0, 3600, "COMPLETED")
    build_scope(conn, load_scope(conn, "100"), [(at(-1800), at(3600))])
    return anomalies(conn)


def test_symbol_errors_rising_on_one_port_make_one_window_with_before_and_after(conn):
    sc = Scenario(conn).cluster()
    sc.series("gpu-002", "mlx5_0", "ib_port_symbol_errors_total", -1800, 3600, 60, 0.0, (1200, 2400, 0.5), True)
    [a] = _scoped(conn, sc)
    assert (a.host, a.entity, a.category, a.layer) == ("gpu-002", "mlx5_0", "network.link_degraded", "physical")
    # The fixture's counter counts rate x interval at the sample itself: errors show from 1200 to 2340,
    # and the first erring sample holds a whole interval's worth at the window's rate: the errors began
    # right after the last clean sample (1140).
    assert a.onset == at(1140) and a.bounds == (at(1140), at(1200)) and a.end == at(2340)
    assert a.before == 0.0 and a.after == 0.5


def test_a_sparse_counter_dates_its_onset_inside_the_scrape_interval_by_its_own_rate(conn):
    # Scraped every 5 min; errors at 1/s from t=1000, between the samples at 900 and 1200: the first
    # delta (200) is 200 s of the window's rate, so the change began at 1000, not midway (1050).
    sc = Scenario(conn).cluster()
    sid = sc.source("/metrics/ib.prom", "prometheus")
    rows = [
        [at(t), "gpu-002", "mlx5_0", "ib_port_symbol_errors_total", float(max(0, t - 1000)), sid]
        for t in range(-1800, 3601, 300)
    ]
    conn.executemany("INSERT INTO metrics (ts, host, entity, metric, value, source_id) VALUES (?, ?, ?, ?, ?, ?)", rows)
    [a] = _scoped(conn, sc)
    assert a.onset == at(1000) and a.bounds == (at(900), at(1200))


def test_steady_noise_and_single_bursts_are_not_anomalies(conn):
    sc = Scenario(conn).cluster()
    sc.series("gpu-001", "mlx5_0", "ib_port_symbol_errors_total", -1800, 3600, 60, 0.02, counter=True)
    sc.series("gpu-003", "mlx5_0", "ib_port_symbol_errors_total", -1800, 3600, 60, 0.0, (600, 660, 5.0), True)
    sc.series("gpu-004", "gpu1", "gpu_temp_celsius", -1800, 3600, 60, 62.0, (900, 960, 66.0))
    assert _scoped(conn, sc) == []


def test_gauges_against_own_history_rx_power_drop_and_temperature_rise(conn):
    sc = Scenario(conn).cluster()
    sc.series("gpu-001", "mlx5_0", "optics_rx_power_dbm", -1800, 3600, 60, -2.0, (600, 3600, -7.5))
    sc.series("gpu-004", "gpu1", "gpu_temp_celsius", -1800, 3600, 60, 62.0, (900, 3600, 88.0))
    found = {(a.metric, a.category, a.onset) for a in _scoped(conn, sc)}
    # onsets midway between the last normal sample and the first anomalous one
    assert found == {
        ("optics_rx_power_dbm", "network.link_degraded", at(570)),
        ("gpu_temp_celsius", "cooling.thermal", at(870)),
    }


def test_two_anomalous_samples_either_side_of_the_gap_between_read_windows_are_not_in_a_row(conn):
    # Hot from 1200 to 1500 every minute; the read windows end at 1200 and start again at 1500, so the
    # scope holds 1200 and 1500 side by side with four unread samples between: not two in a row.
    sc = Scenario(conn).cluster()
    sc.series("gpu-004", "gpu1", "gpu_temp_celsius", -1800, 3600, 60, 62.0, (1200, 1560, 88.0))
    sc.series("gpu-003", "gpu1", "gpu_temp_celsius", -1800, 3600, 60, 62.0, (1140, 1560, 88.0))
    sc.attempt(1, 0, 3600, "COMPLETED")
    windows = [(at(-1800), at(1200)), (at(1500), at(3600))]
    build_scope(conn, load_scope(conn, "100"), windows)
    # gpu-003's 1140 and 1200 are in a row inside its first window: its run goes on across the gap
    [a] = anomalies(conn, windows=windows)
    assert (a.host, a.first_bad, a.end, a.samples) == ("gpu-003", at(1140), at(1500), 3)


def test_only_the_jobs_hosts_and_their_switch_ports_are_in_scope(conn):
    sc = Scenario(conn).cluster()
    sc.series(OTHER, "mlx5_0", "ib_port_symbol_errors_total", -1800, 3600, 60, 0.0, (600, 3600, 1.0), True)
    sc.series("leaf-01", "Ethernet5", "port_symbol_errors_total", -1800, 3600, 60, 0.0, (600, 3600, 1.0), True)
    sc.series("leaf-01", "Ethernet3", "port_symbol_errors_total", -1800, 3600, 60, 0.0, (600, 3600, 1.0), True)
    assert [(a.host, a.entity) for a in _scoped(conn, sc)] == [("leaf-01", "Ethernet3")]


def test_events_are_typed_by_xid_and_joined_to_the_gpu_entity(conn):
    sc = Scenario(conn).cluster()
    sc.event(10, "gpu-001", "xid", bus_id(3), 79).event(20, "gpu-001", "xid", bus_id(4), 48)
    sc.event(30, "gpu-002", "xid", bus_id(0), 45).event(40, "gpu-002", "xid", bus_id(1), 13)
    sc.event(50, "gpu-003", "aer", "0000:3b:00.0", message="PCIe Bus Error: severity=Corrected")
    sc.event(60, OTHER, "xid", bus_id(0), 79)
    got = [(e.host, e.entity, e.category, e.weight) for e in typed_events(conn, HOSTS, at(0), at(100))]
    assert got == [
        ("gpu-001", "gpu3", "gpu.fell_off_bus", 1.0),
        ("gpu-001", "gpu4", "gpu.memory", 1.0),
        ("gpu-002", "gpu1", "gpu.other_xid", 0.3),
    ]
