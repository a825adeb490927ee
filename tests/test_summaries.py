"""Hourly telemetry summaries (store/summaries.py) and the candidates read from them (signals/candidates.py):
written at ingest, backfilled by migration 012, removed with their source, and never changing an answer:
every anomaly and explanation comes out the same as from the raw samples."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from conftest import copy_sample_store

from synestra_cli.explain.job import explain_job, jobs_in_window
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import batch as batch_module
from synestra_cli.ingest import ingest_paths
from synestra_cli.ingest import run as run_module
from synestra_cli.signals import candidates
from synestra_cli.signals.anomalies import anomalies, build_scope
from synestra_cli.signals.scope import JobScope
from synestra_cli.signals.thresholds import CLOCK_EVENT_METRIC, METRIC_RULES
from synestra_cli.store.connect import connect
from synestra_cli.store.migrations import apply_migrations
from synestra_cli.store.sources import forget, sourced_tables
from synestra_cli.store.summaries import (
    DERIVED_TABLES,
    SUMMARY_DDL,
    repeatable_sources,
    summarise_source,
    summarise_stage,
)

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
T0 = datetime(2026, 11, 2)
HOSTS = ["h1", "h2", "h3"]
# (metric, entity, kind): counters with bursts and resets, gauges with steps, a clocks-event bitmask; some
# metrics on two entities of a host, which the host summaries combine
SERIES = [
    ("ib_port_symbol_errors_total", "mlx5_0", "counter"),
    ("ib_port_symbol_errors_total", "mlx5_1", "counter"),
    ("port_fec_corrected_codewords_total", "mlx5_0", "counter"),
    ("ib_port_xmit_discards_total", "mlx5_1", "counter"),
    ("gpu_temp_celsius", "gpu0", "gauge"),
    ("gpu_temp_celsius", "gpu1", "gauge"),
    ("optics_rx_power_dbm", "mlx5_0", "dbm"),
    ("optics_rx_power_dbm", "mlx5_1", "dbm"),
    ("ib_port_state_id", "mlx5_1", "state"),
    (CLOCK_EVENT_METRIC, "gpu0", "bits"),
    (CLOCK_EVENT_METRIC, "gpu1", "bits"),
]

# Every summary has its row range, and the range holds exactly its hour's samples of its series.
ROWS_HELD_SQL = (
    "SELECT count(*) FILTER (WHERE s.row_lo IS NULL), sum(s.n) = sum((SELECT count(*) FROM metrics m "
    "WHERE m.rowid BETWEEN s.row_lo AND s.row_hi AND m.source_id = s.source_id AND m.metric = s.metric "
    "AND m.host IS NOT DISTINCT FROM s.host AND m.entity IS NOT DISTINCT FROM s.entity "
    "AND time_bucket(INTERVAL 1 HOUR, m.ts) = s.bucket AND m.value IS NOT NULL)) FROM metric_summaries s"
)


def _series(rng: np.random.Generator, kind: str, n: int) -> np.ndarray:
    if kind == "counter":
        rate = rng.choice([0.0, 0.001, 5.0, 800.0])
        steps = rng.poisson(rate * 60, n).astype(float)
        if rng.random() < 0.4:  # a fault: a burst of errors from some sample on
            steps[rng.integers(n) :] += rng.poisson(50 * (rate + 1), 1)[0]
        values = np.cumsum(steps)
        if rng.random() < 0.3:  # a counter reset (a reboot)
            k = rng.integers(1, n)
            values[k:] -= values[k - 1]
        return values
    if kind == "gauge":
        v = 60 + rng.normal(0, 2, n)
        if rng.random() < 0.5:
            v[rng.integers(n) :] += rng.choice([12.0, 30.0])
        return v
    if kind == "dbm":
        v = -1.2 + rng.normal(0, 0.1, n)
        if rng.random() < 0.5:
            v[rng.integers(n) :] -= 3.5
        return v
    if kind == "state":
        v = np.full(n, 4.0)
        if rng.random() < 0.3:
            v[rng.integers(n) :] = 1.0
        return v
    v = np.full(n, 4.0)  # SW power cap set; sometimes a power brake (0x80) or HW slowdown (0x8)
    if rng.random() < 0.5:
        v[rng.integers(n) :] = rng.choice([4.0 + 0x80, 4.0 + 0x8, 0.0])
    return v


def _fill(conn, seed: int) -> None:
    """Two sources per host (two days' files), one of them overlapping the other for some series; NaN
    and NULL samples; a 60 s scrape with jitter."""
    rng = np.random.default_rng(seed)
    sid = 100
    for host in HOSTS:
        for metric, entity, kind in SERIES:
            n = 300
            ts = [T0 + timedelta(seconds=60 * i + float(rng.integers(0, 5))) for i in range(n)]
            values = _series(rng, kind, n).tolist()
            for i in rng.integers(0, n, 3):
                values[i] = float("nan") if rng.random() < 0.5 else None
            cut = int(rng.integers(n // 3, 2 * n // 3))
            overlap = 20 if rng.random() < 0.2 else 0
            for part, rows in ((0, range(cut + overlap)), (1, range(cut, n))):
                conn.execute(
                    "INSERT INTO metrics (ts, host, entity, metric, value, source_id) "
                    "SELECT unnest(?::TIMESTAMP[]), ?, ?, ?, unnest(?::DOUBLE[]), ?",
                    [[ts[i] for i in rows], host, entity, metric, [values[i] for i in rows], sid + part],
                )
        sid += 2
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts) "
        "SELECT source_id, 'p' || source_id, 's' || source_id, 'prometheus', 0, count(*), 0, min(ts), max(ts) "
        "FROM metrics GROUP BY source_id"
    )
    conn.execute("INSERT OR IGNORE INTO metric_catalog VALUES ('gpu_clock_events_bitmask', 'bitmask', 'bitmask', NULL)")
    for (s,) in conn.execute("SELECT source_id FROM sources ORDER BY 1").fetchall():
        assert summarise_source(conn, s)


def _both_ways(conn, windows):
    scope = JobScope("j", [], HOSTS)
    observed = build_scope(conn, scope, windows)
    summarised = conn.execute("SELECT count(*) FROM _host_series").fetchone()[0]
    fast = anomalies(conn, windows=windows)
    conn.execute("CREATE TEMP TABLE keep AS SELECT * FROM summarised_sources")
    conn.execute("DELETE FROM summarised_sources")  # a source without its summary: everything is read raw
    raw_observed = build_scope(conn, scope, windows)
    raw = anomalies(conn, windows=windows)
    conn.execute("INSERT INTO summarised_sources SELECT * FROM keep")
    conn.execute("DROP TABLE keep")
    return summarised, (observed > 0, fast), (raw_observed > 0, raw)


# One read window, and two (a run of anomalous samples does not bridge the gap between them).
WINDOWS = {
    "one": [(T0 + timedelta(minutes=100), T0 + timedelta(minutes=155))],
    "two": [
        (T0 + timedelta(minutes=40), T0 + timedelta(minutes=95)),
        (T0 + timedelta(minutes=170), T0 + timedelta(minutes=260)),
    ],
}


@pytest.mark.parametrize("windows", sorted(WINDOWS))
@pytest.mark.parametrize("seed", range(8))
def test_anomalies_from_the_summaries_are_those_of_the_raw_samples(conn, seed, windows):
    _fill(conn, seed)
    summarised, fast, raw = _both_ways(conn, WINDOWS[windows])
    assert summarised > 0  # the summaries were read, not the raw path twice
    assert fast == raw


@pytest.mark.heavy
def test_the_seeds_hold_anomalies_of_every_kind(conn):
    """The comparison above is not vacuous: across its seeds, counters, gauges and decoded bits are
    anomalous, and the summaries leave out counters and (by the two-in-a-row test, in one window or
    two) gauges whose range alone would have kept them."""
    kinds = set()
    dropped: dict[str, int] = {}
    for seed in range(8):
        for name, windows in WINDOWS.items():
            conn.execute(
                "DELETE FROM metrics; DELETE FROM sources; DELETE FROM metric_summaries; DELETE FROM summarised_sources"
            )
            _fill(conn, seed)
            _, (_, fast), _ = _both_ways(conn, windows)
            kinds |= {("rate" if a.is_rate else "gauge", a.metric.startswith("gpu_clock_event")) for a in fast}
            build_scope(conn, JobScope("j", [], HOSTS), windows)
            for kind, n in conn.execute(
                "SELECT r.kind, count(*) FROM _cand_series s JOIN _rules r USING (metric) ANTI JOIN _cand c "
                "USING (host, entity, metric) WHERE r.kind = 'counter' OR (s.hi >= r.floor AND s.hi > s.lo + r.delta) "
                "GROUP BY 1"
            ).fetchall():
                dropped[f"{name} {kind}"] = dropped.get(f"{name} {kind}", 0) + n
    assert {("rate", False), ("gauge", False), ("gauge", True)} <= kinds
    assert all(dropped.get(f"{n} {kind}") for n in WINDOWS for kind in ("counter", "gauge")), dropped


def test_a_hot_pair_across_the_gap_between_two_windows_is_neither_a_candidate_nor_a_run(conn):
    """The pair test drops a gauge whose only hot samples are the last of one read window and the first
    of the next, with cool ones unread between: so the anomaly test must not count those two as in a
    row either (signals/anomalies.py cuts runs at a window's edge), or the summaries would lose it."""
    _fill(conn, 0)
    (_, end1), (start2, _) = WINDOWS["two"]
    ts = [T0 + timedelta(seconds=60 * i) for i in range(300)]
    edges = (max(t for t in ts if t <= end1), min(t for t in ts if t >= start2))
    conn.execute(
        "INSERT INTO metrics (ts, host, entity, metric, value, source_id) "
        "SELECT unnest(?::TIMESTAMP[]), 'h1', 'gpu7', 'gpu_temp_celsius', unnest(?::DOUBLE[]), 900",
        [ts, [95.0 if t in edges else 60.0 for t in ts]],
    )
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts) "
        "VALUES (900, 'p900', 's900', 'prometheus', 0, 300, 0, ?, ?)",
        [ts[0], ts[-1]],
    )
    assert summarise_source(conn, 900)
    assert ("h1", "gpu7", "gpu_temp_celsius") not in _candidates(conn, WINDOWS["two"])
    _, fast, raw = _both_ways(conn, WINDOWS["two"])
    assert fast == raw
    assert not [a for a in raw[1] if a.entity == "gpu7"]


def _candidates(conn, windows) -> set[tuple]:
    build_scope(conn, JobScope("j", [], HOSTS), windows)
    return set(conn.execute("SELECT host, entity, metric FROM _cand").fetchall())


@pytest.mark.parametrize("windows", sorted(WINDOWS))
@pytest.mark.parametrize("seed", range(12))
def test_the_host_stage_drops_only_hosts_without_a_candidate(conn, seed, windows):
    """The host summaries are a filter before the per-series test, never a change of its answer: the
    candidates with the host stage are exactly those of every host's per-series summaries (a store
    without host_summaries, as one opened read-only before migration 021)."""
    _fill(conn, seed)
    with_hosts = _candidates(conn, WINDOWS[windows])
    tested, passed = conn.execute(
        "SELECT (SELECT count(*) FROM _host_series), (SELECT count(*) FROM _host_cand)"
    ).fetchone()
    conn.execute("ALTER TABLE host_summaries RENAME TO host_summaries_off")
    try:
        assert _candidates(conn, WINDOWS[windows]) == with_hosts
    finally:
        conn.execute("ALTER TABLE host_summaries_off RENAME TO host_summaries")
    assert tested >= passed


@pytest.mark.heavy
def test_the_host_stage_is_not_vacuous(conn):
    """Across the seeds the host stage rules out (host, metric) pairs, and candidates still pass it."""
    dropped = kept = 0
    for seed in range(12):
        conn.execute(
            "DELETE FROM metrics; DELETE FROM sources; DELETE FROM metric_summaries; DELETE FROM host_summaries; "
            "DELETE FROM summarised_sources"
        )
        _fill(conn, seed)
        if _candidates(conn, WINDOWS["one"]):
            kept += 1
        tested, passed = conn.execute(
            "SELECT (SELECT count(*) FROM _host_series WHERE n > 0), (SELECT count(*) FROM _host_cand)"
        ).fetchone()
        dropped += tested - passed
    assert dropped > 0 and kept > 0, (dropped, kept)


def test_every_rule_keeps_the_host_bound_sound():
    """A host's row bounds its entities' (highest high, lowest low): the test on it is implied by an
    entity's only when the rule's ratio is not negative (signals/candidates.py HOST_SERIES_SQL)."""
    assert all(r.ratio >= 0 for r in METRIC_RULES)


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory, sample_store_template):
    path = copy_sample_store(sample_store_template, tmp_path_factory.mktemp("summaries"), "store.duckdb")
    conn = connect(path)
    yield conn
    conn.close()


def test_ingest_summarises_every_source(sample_store):
    c = sample_store
    unsummarised = c.execute("SELECT count(*) FROM sources ANTI JOIN summarised_sources USING (source_id)").fetchone()
    assert unsummarised == (0,)
    samples, summarised = c.execute(
        "SELECT (SELECT count(*) FROM metrics WHERE value IS NOT NULL), (SELECT sum(n) FROM metric_summaries)"
    ).fetchone()
    assert samples == summarised > 0


@pytest.mark.heavy
def test_sources_loaded_without_telemetry_are_listed_as_summarised(tmp_path):
    # logs ingested on their own (or a batch of logs alone, which a loaded machine closes by time:
    # ingest/run.py BATCH_SECONDS) used to stay unlisted, so every job of their hours read raw
    conn = connect(tmp_path / "store.duckdb")
    try:
        for part in (["syslog", "jobs", "sacct.txt"], ["dcgm", "node_exporter", "optics", "snmp", "topology.csv"]):
            reports = ingest_paths(conn, [SAMPLE / p for p in part], IngestOptions())
            assert reports and all(r.status == "loaded" for r in reports)
        logs = (
            "SELECT count(*) FROM sources s WHERE NOT EXISTS (SELECT 1 FROM metrics m WHERE m.source_id = s.source_id)"
        )
        unlisted = "SELECT count(*) FROM sources ANTI JOIN summarised_sources USING (source_id)"
        assert conn.execute(logs).fetchone()[0] >= 10  # not vacuous: the logs of the first ingest
        assert conn.execute(unlisted).fetchone() == (0,)
    finally:
        conn.close()


def test_migration_019_lists_the_sources_without_telemetry_a_store_left_out(sample_store):
    c = sample_store
    c.execute("CREATE TEMP TABLE was AS SELECT * FROM summarised_sources")
    try:
        logs = "SELECT source_id FROM sources ANTI JOIN (SELECT DISTINCT source_id FROM metrics) USING (source_id)"
        unsummarised = c.execute(
            "SELECT max(source_id) FROM sources WHERE source_id IN (SELECT source_id FROM metrics)"
        )
        telemetry_sid = unsummarised.fetchone()[0]
        c.execute(f"DELETE FROM summarised_sources WHERE source_id IN ({logs}) OR source_id = ?", [telemetry_sid])
        c.execute("DELETE FROM _migrations WHERE name = '019_list_sources_without_telemetry'")
        assert apply_migrations(c) == ["019_list_sources_without_telemetry"]
        unlisted = [
            r[0]
            for r in c.execute(
                "SELECT source_id FROM sources ANTI JOIN summarised_sources USING (source_id)"
            ).fetchall()
        ]
        assert unlisted == [telemetry_sid]  # a source of telemetry without its summary stays read raw
    finally:
        c.execute("DELETE FROM summarised_sources; INSERT INTO summarised_sources SELECT * FROM was; DROP TABLE was")


@pytest.mark.heavy
def test_explanations_are_the_same_with_and_without_the_summaries(sample_store):
    c = sample_store
    jobs = jobs_in_window(c)

    def explained() -> list[str]:
        return [json.dumps(explain_job(c, j).to_json(), default=str, sort_keys=True) for j in jobs]

    fast = explained()
    c.execute("CREATE TEMP TABLE keep AS SELECT * FROM summarised_sources")
    c.execute("DELETE FROM summarised_sources")
    try:
        raw = explained()
    finally:
        c.execute("INSERT INTO summarised_sources SELECT * FROM keep")
        c.execute("DROP TABLE keep")
    assert len(jobs) > 3 and fast == raw
    assert any('"cause": {' in doc for doc in fast)


def test_migration_012_backfills_a_store_written_before_it(sample_store):
    c = sample_store
    cols = "source_id, host, entity, metric, bucket, n, lo, hi, rate_lo, rate_hi, backwards, repeats, pair_hi, pair_lo"
    before = sorted(c.execute(f"SELECT {cols} FROM metric_summaries").fetchall(), key=repr)
    c.execute("DROP TABLE metric_summaries; DROP TABLE summarised_sources")
    c.execute("DELETE FROM _migrations WHERE name = '012_metric_summaries'")
    assert apply_migrations(c) == ["012_metric_summaries"]
    assert sorted(c.execute(f"SELECT {cols} FROM metric_summaries").fetchall(), key=repr) == before
    assert c.execute("SELECT count(*) FROM sources ANTI JOIN summarised_sources USING (source_id)").fetchone() == (0,)


def test_migration_018_keeps_the_summaries_in_hour_order_with_their_row_ranges(sample_store):
    """A job's read windows are an hour or two of the store's day: with the rows in hour order the
    zonemaps skip the other hours' row groups. The migration rewrites a store's summaries (here put back
    in the reverse order, without row ranges, as migration 012 wrote them) in that order, row for row
    the same, each with the rowids of its samples."""
    c = sample_store
    cols = "source_id, host, entity, metric, bucket, n, lo, hi, rate_lo, rate_hi, backwards, repeats, pair_hi, pair_lo"
    before = sorted(c.execute(f"SELECT {cols} FROM metric_summaries").fetchall(), key=repr)
    c.execute(
        "CREATE TEMP TABLE shuffled AS SELECT COLUMNS(lambda c: c NOT IN ('row_lo', 'row_hi')) FROM metric_summaries "
        "ORDER BY bucket DESC, host DESC"
    )
    c.execute("DROP TABLE metric_summaries")
    c.execute(SUMMARY_DDL.split(";")[0])  # migration 012's table
    c.execute("INSERT INTO metric_summaries SELECT * FROM shuffled; DROP TABLE shuffled")
    c.execute("DELETE FROM _migrations WHERE name = '018_summaries_by_hour'")
    assert apply_migrations(c) == ["018_summaries_by_hour"]
    order = [r[0] for r in c.execute("SELECT bucket FROM metric_summaries ORDER BY rowid").fetchall()]
    assert len(set(order)) > 3 and order == sorted(order)
    assert sorted(c.execute(f"SELECT {cols} FROM metric_summaries").fetchall(), key=repr) == before
    assert c.execute(ROWS_HELD_SQL).fetchone() == (0, True)
    not_null = c.execute(
        "SELECT count(*) FROM duckdb_constraints() "
        "WHERE table_name = 'metric_summaries' AND constraint_type = 'NOT NULL'"
    ).fetchone()[0]
    assert not_null == 8  # the table's own definition, not a copy's


def test_migration_021_backfills_the_host_summaries_ingest_writes(sample_store):
    c = sample_store
    before = sorted(c.execute("SELECT * FROM host_summaries").fetchall(), key=repr)
    assert (
        before
        and c.execute("SELECT count(*) FROM host_summaries").fetchone()[0]
        < c.execute("SELECT count(*) FROM metric_summaries").fetchone()[0]
    )
    c.execute("DROP TABLE host_summaries")
    c.execute("DELETE FROM _migrations WHERE name = '021_host_summaries'")
    assert apply_migrations(c) == ["021_host_summaries"]
    assert sorted(c.execute("SELECT * FROM host_summaries").fetchall(), key=repr) == before


@pytest.mark.parametrize("seed", range(3))
def test_row_ranges_that_no_longer_hold_their_samples_are_not_trusted(legacy_conn, seed):
    """DuckDB may renumber rows after a delete: a row range that misses some of its hour's samples is
    noticed, and the candidates are read by file instead, with the same answers (a store before the
    series layout: its summaries carry row ranges)."""
    conn = legacy_conn
    _fill(conn, seed)
    windows = WINDOWS["one"]
    conn.execute("UPDATE metric_summaries SET row_lo = row_lo + 1")
    _, fast, raw = _both_ways(conn, windows)
    assert conn.execute("SELECT count(*) FROM _cand_hours").fetchone()[0] > 0
    assert fast == raw


@pytest.mark.parametrize("gap, most", [(0, 10_000), (candidates.ROWID_MERGE_GAP, 10_000), (0, 0)])
@pytest.mark.parametrize("seed", range(3))
def test_candidates_read_by_row_ranges_merged_or_not_or_by_file_answer_alike(legacy_conn, seed, gap, most, monkeypatch):
    """Each candidate hour's rows are one constant rowid scan (near ones merged); past ROWID_MAX_RANGES
    scans the candidates' files are read instead (a store before the series layout). Every way gives the
    raw read's anomalies."""
    conn = legacy_conn
    read = candidates._read_by_rowid
    used, ranges = [], []
    monkeypatch.setattr(candidates, "ROWID_MERGE_GAP", gap)
    monkeypatch.setattr(candidates, "ROWID_MAX_RANGES", most)
    monkeypatch.setattr(candidates, "_read_by_rowid", lambda c, *a: used.append(read(c, *a)) or used[-1])
    _fill(conn, seed)
    windows = WINDOWS["two"]
    _, fast, raw = _both_ways(conn, windows)
    assert fast == raw and fast[1]  # not vacuous: anomalies found both ways
    assert used and set(used) == {most > 0}  # the rows were read by rowid, or (no scan allowed) by file
    build_scope(conn, JobScope("j", [], HOSTS), windows)
    hours = conn.execute("SELECT count(*) FROM _cand_hours").fetchone()[0]
    ranges = conn.execute(candidates.ROWID_RANGES.format(hours="_cand_hours"), {"gap": gap}).fetchall()
    assert (len(ranges) == hours) if gap == 0 else (0 < len(ranges) < hours)  # a series' hours are adjacent rows


def test_ingest_writes_a_batch_of_summaries_in_hour_order(tmp_path):
    conn = connect(tmp_path / "s.duckdb")
    ingest_paths(conn, [SAMPLE / "dcgm"], IngestOptions())
    order = [r[0] for r in conn.execute("SELECT bucket FROM metric_summaries ORDER BY rowid").fetchall()]
    conn.close()
    assert len(set(order)) > 1 and order == sorted(order)


def _summaries(path: Path) -> tuple[list, list, int]:
    """A store's summaries (every column, row ranges too), host summaries, and summarised sources."""
    conn = connect(path)
    try:
        rows = [
            sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)
            for table in ("metric_summaries", "host_summaries")
        ]
        listed = conn.execute("SELECT count(*) FROM summarised_sources").fetchone()[0]
        ranged = conn.execute("SELECT count(row_lo) + count(row_hi) FROM metric_summaries").fetchone()
        assert ranged == (0,)  # the series layout reads by series, not by row range
    finally:
        conn.close()
    return rows[0], rows[1], listed


@pytest.mark.heavy
def test_summaries_computed_in_the_stage_are_those_of_the_store(tmp_path, monkeypatch):
    """Ingest summarises a batch in its stage, outside the store's lock. Row for row they are the summaries
    computed from the store after the commit (neither with row ranges: the series layout reorders a batch's
    rows and reads them by series); a batch whose stage lost rows after they were summarised (here a copy
    of a file dropped from its batch) is summarised from the store instead, with the same result."""
    copy = tmp_path / "in" / "copy.prom.gz"
    copy.parent.mkdir()
    copy.write_bytes(sorted((SAMPLE / "dcgm").iterdir())[0].read_bytes())  # read just before its original
    inputs = [copy] + [SAMPLE / p for p in ("dcgm", "node_exporter", "optics", "snmp", "jobs")]
    used: list[bool] = []
    staged = batch_module.copy_stage_summaries

    def spy(*args):
        used.append(staged(*args))
        return used[-1]

    monkeypatch.setattr(batch_module, "copy_stage_summaries", spy)
    monkeypatch.setattr(run_module, "BATCH_FILES", 6)  # several batches: the copy and its original share the first
    monkeypatch.setattr(run_module, "BATCH_SECONDS", 1e9)  # ... on a busy machine too (not cut by parsing time)
    reports = ingest_paths(tmp_path / "staged.duckdb", inputs, IngestOptions(), workers=1)
    assert {r.status for r in reports} == {"loaded", "skipped"}
    assert True in used and False in used  # staged batches, and the one that lost its copy's rows
    monkeypatch.setattr(batch_module, "summarise_stage", lambda *a: False)
    ingest_paths(tmp_path / "from-store.duckdb", inputs, IngestOptions(), workers=1)
    staged_rows = _summaries(tmp_path / "staged.duckdb")
    assert staged_rows == _summaries(tmp_path / "from-store.duckdb")
    assert len(staged_rows[0]) > 1000 and staged_rows[1] and staged_rows[2] == len(reports) - 1
    bits = [r for r in staged_rows[0] if r[3] == CLOCK_EVENT_METRIC]
    assert bits and all(r[20] is not None for r in bits)  # bits_or: the bitmask read as one


@pytest.mark.parametrize("seed", range(12))
def test_every_source_with_a_duplicate_sample_is_checked_for_them(conn, seed):
    """Ingest checks for duplicate samples (one series, one time, twice) only the sources the stage's
    summaries cannot clear: every source that holds one is among them, whatever its values (NaN, NULL,
    infinite) and however its samples interleave; a source of finite samples at distinct times is not."""
    rng = np.random.default_rng(seed)
    rows = []
    kinds = ["clean", "repeat", "nan", "null", "inf", "clean", "repeat", "nan"]
    odd_values = {"nan": float("nan"), "null": None, "inf": float("inf")}
    for sid, kind in enumerate(kinds, 1):
        repeated = int(rng.integers(0, 2)) if kind == "repeat" else None  # the entity with a time twice
        for k, entity in enumerate(("gpu0", "gpu1")):
            times = [T0 + timedelta(seconds=30 * i) for i in range(50)]
            if k == repeated:
                times.insert(int(rng.integers(1, 50)), times[int(rng.integers(0, 50))])
            for ts in rng.permutation(np.array(times, dtype=object)):  # in no order
                rows.append((ts, "h1", entity, "gpu_temp_celsius", float(rng.normal(60, 5)), sid))
        if kind in odd_values:
            rows.append((T0 - timedelta(seconds=30), "h1", "gpu0", "gpu_temp_celsius", odd_values[kind], sid))
    columns = [list(c) for c in zip(*rows, strict=True)]
    conn.execute(
        "INSERT INTO metrics (ts, host, entity, metric, value, source_id) "
        "SELECT unnest(?::TIMESTAMP[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
        "unnest(?::VARCHAR[]), unnest(?::DOUBLE[]), unnest(?::INTEGER[])",
        columns,
    )
    stage = f"{conn.execute('SELECT current_database()').fetchone()[0]}.main"
    assert summarise_stage(conn, stage, "")
    checked = repeatable_sources(conn, stage)
    duplicated = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT source_id FROM metrics GROUP BY source_id, host, entity, metric, ts HAVING count(*) > 1"
        ).fetchall()
    }
    odd = {
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT source_id FROM metrics WHERE NOT isfinite(value) OR value IS NULL"
        ).fetchall()
    }
    assert duplicated | odd == checked  # each source that could hold one, and no other
    assert duplicated == {2, 7} and checked == {2, 3, 4, 5, 7, 8}


def test_forgetting_a_source_removes_its_summary_and_counts_only_its_rows(sample_store):
    c = sample_store
    sid = c.execute("SELECT min(source_id) FROM metrics").fetchone()[0]
    written = [t.name for t in sourced_tables(c) if t.name not in ("sources", "rejects", *DERIVED_TABLES)]
    rows = sum(c.execute(f'SELECT count(*) FROM "{t}" WHERE source_id = ?', [sid]).fetchone()[0] for t in written)
    assert c.execute("SELECT count(*) FROM metric_summaries WHERE source_id = ?", [sid]).fetchone()[0] > 0
    assert c.execute("SELECT count(*) FROM host_summaries WHERE source_id = ?", [sid]).fetchone()[0] > 0
    _, deleted = forget(c, [str(sid)])
    assert deleted == rows
    for derived in DERIVED_TABLES:
        assert c.execute(f"SELECT count(*) FROM {derived} WHERE source_id = ?", [sid]).fetchone() == (0,), derived


def test_synestra_summaries_0_reads_the_raw_samples(conn, monkeypatch):
    _fill(conn, 3)
    windows = [(T0 + timedelta(minutes=40), T0 + timedelta(minutes=95))]
    conn.execute("DROP TABLE IF EXISTS _summ")
    monkeypatch.setenv("SYNESTRA_SUMMARIES", "0")
    raw = (build_scope(conn, JobScope("j", [], HOSTS), windows), anomalies(conn, windows=windows))
    assert conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_summ'").fetchone() == (0,)
    monkeypatch.delenv("SYNESTRA_SUMMARIES")
    fast = (build_scope(conn, JobScope("j", [], HOSTS), windows), anomalies(conn, windows=windows))
    assert conn.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = '_summ'").fetchone() == (1,)
    assert (raw[0] > 0, raw[1]) == (fast[0] > 0, fast[1])
