"""Units of work in threads (store/parallel.py): results in order, and a stop reaches the running units."""

from __future__ import annotations

import threading
import time

import duckdb

from synestra_cli.store.parallel import AHEAD, map_in_threads

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


def test_workers_run_no_further_ahead_of_a_slow_caller_than_the_window():
    # a lake ingest exports each file on the caller's thread, slower than two parsers: without a
    # window their results piled up in memory until DuckDB's pool ran out
    started: list[int] = []
    conn = duckdb.connect()

    def unit(cur: duckdb.DuckDBPyConnection, i: int) -> int:
        started.append(i)
        return i

    results = map_in_threads(conn, unit, range(40), 2)
    assert next(results) == 0
    time.sleep(0.3)  # the caller is busy: the workers finish what is in flight, and wait
    assert len(started) <= AHEAD * 2 + 1
    assert list(results) == list(range(1, 40))
    assert sorted(started) == list(range(40))
