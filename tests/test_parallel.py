"""Units of work in threads (store/parallel.py): results in order, and a stop reaches the running units."""

from __future__ import annotations

import threading
import time

import duckdb
import pytest

from synestra_cli.store.parallel import beside, map_in_threads

# A query of about half a minute on one core: long beside an interrupt, finite without one.
LONG_SQL = "SELECT sum(hash(i)) FROM range(3000000000) t(i)"


def test_results_come_in_the_items_order_from_cursors_of_their_own():
    conn = duckdb.connect()
    got = list(map_in_threads(conn, lambda cur, i: cur.execute("SELECT ? * 2", [i]).fetchone()[0], range(8), 3))
    assert got == [i * 2 for i in range(8)]


def test_a_caller_that_stops_interrupts_the_units_still_running():
    # Ctrl-C in the consumer (or an error, or an early stop) used to wait for every running unit to
    # finish its work: on a big file, minutes after the signal
    conn = duckdb.connect()
    seen: dict[int, str] = {}
    started = threading.Event()

    def unit(cur: duckdb.DuckDBPyConnection, i: int) -> int:
        if i == 0:
            return 0
        started.set()
        try:
            cur.execute(LONG_SQL).fetchone()
            seen[i] = "finished"
        except duckdb.InterruptException:
            seen[i] = "interrupted"
        return i

    results = map_in_threads(conn, unit, [0, 1], 2)
    assert next(results) == 0
    assert started.wait(60)
    time.sleep(0.5)  # unit 1 is inside its query (an interrupt between queries would be lost)
    results.close()  # the consumer stops while unit 1 runs its query
    assert seen == {1: "interrupted"}


def test_beside_runs_on_its_own_cursor_at_the_same_time_and_raises_its_error_in_the_caller(monkeypatch):
    # explain reads a job's events beside its telemetry (explain/api.py _evidence)
    monkeypatch.setenv("SYNESTRA_WORKERS", "2")
    conn = duckdb.connect()
    conn.execute("CREATE TEMP TABLE mine AS SELECT 1 AS x")  # the block's temp tables are its own
    running = threading.Event()

    def side(cur: duckdb.DuckDBPyConnection) -> int:
        assert cur is not conn
        running.set()
        return cur.execute("SELECT 41 + 1").fetchone()[0]

    with beside(conn, side) as result:
        assert running.wait(60)  # started before the block waits for it
        assert conn.execute("SELECT x FROM mine").fetchone() == (1,)
        assert result() == 42

    def fails(cur: duckdb.DuckDBPyConnection) -> int:
        return cur.execute("SELECT * FROM mine").fetchone()[0]  # not visible from another cursor

    with pytest.raises(duckdb.CatalogException), beside(conn, fails) as result:
        result()


def test_beside_with_one_worker_runs_first_on_the_connection_itself(monkeypatch):
    monkeypatch.setenv("SYNESTRA_WORKERS", "1")
    conn = duckdb.connect()
    order: list[str] = []
    with beside(conn, lambda cur: order.append("side") or cur) as result:
        order.append("block")
        assert result() is conn
    assert order == ["side", "block"]
