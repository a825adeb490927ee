"""Counter rates: deltas over time with window functions; a reset (negative delta) counts the new value."""

from __future__ import annotations

from explain_fixtures import Scenario, at

from synestra_cli.signals.counters import counter_rates


def test_rates_from_a_cumulative_counter(conn):
    Scenario(conn).series("gpu-001", "mlx5_0", "ib_port_rcv_errors_total", 0, 300, 60, 2.0, counter=True)
    rates = counter_rates(conn, "ib_port_rcv_errors_total", ["gpu-001"], at(0), at(300))
    assert [r.rate for r in rates] == [2.0] * 5 and [r.delta for r in rates] == [120.0] * 5


def test_reset_takes_the_new_value_not_a_negative_rate(conn):
    sc = Scenario(conn)
    sc.series("gpu-001", "mlx5_0", "ib_port_rcv_errors_total", 0, 300, 60, 1.0, counter=True, reset_at=150)
    rates = counter_rates(conn, "ib_port_rcv_errors_total", ["gpu-001"], at(0), at(300))
    assert all(r.delta >= 0 for r in rates)
    assert [r.delta for r in rates] == [60.0, 60.0, 60.0, 60.0, 60.0]


def test_rates_are_per_entity_and_filtered_by_host_and_time(conn):
    sc = Scenario(conn)
    sc.series("gpu-001", "mlx5_0", "ib_port_rcv_errors_total", 0, 600, 60, 1.0, counter=True)
    sc.series("gpu-001", "mlx5_1", "ib_port_rcv_errors_total", 0, 600, 60, 5.0, counter=True)
    sc.series("gpu-002", "mlx5_0", "ib_port_rcv_errors_total", 0, 600, 60, 9.0, counter=True)
    rates = counter_rates(conn, "ib_port_rcv_errors_total", ["gpu-001"], at(120), at(300))
    assert {(r.entity, r.rate) for r in rates} == {("mlx5_0", 1.0), ("mlx5_1", 5.0)}
    assert len(rates) == 6  # 4 samples per entity in the window; the first has no predecessor


def test_a_sample_read_twice_is_one_sample_in_the_scope_s_rates(conn):
    """Two overlapping exports of one counter put each shared sample in the scope twice; its copy must
    not become a zero-second step whose place (and so the runs of anomalous samples) varies by thread."""
    from synestra_cli.signals.counters import SCOPE_RATES_SQL

    conn.execute("CREATE TEMP TABLE _scope (ts TIMESTAMP, host VARCHAR, entity VARCHAR, metric VARCHAR, value DOUBLE)")
    rows = [(at(60 * k), "h1", "mlx5_0", "ib_port_symbol_errors_total", float(v)) for k, v in enumerate([0, 6, 18, 18])]
    conn.executemany("INSERT INTO _scope VALUES (?, ?, ?, ?, ?)", rows + rows[1:3])  # the middle two read twice
    rates = conn.execute(f"SELECT ts, rate FROM ({SCOPE_RATES_SQL}) ORDER BY ts").fetchall()
    assert [r for _, r in rates] == [None, 0.1, 0.2, 0.0]
