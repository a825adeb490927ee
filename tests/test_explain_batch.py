"""A fleet's jobs explained from rows and telemetry read for all of them at once (explain/inputs.py,
signals/fleet_telemetry.py: the path of a cold tax-report) are explained exactly as each job on its
own: the same JSON, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import simcache
from conftest import LEGACY_SCHEMA, copy_sample_store

from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.explain.batch import explain_batch
from synestra_cli.explain.inputs import inputs_for, job_inputs
from synestra_cli.explain.job import event_read, explain_job, jobs_in_window, telemetry_windows
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.signals.fleet_telemetry import JobRead, fleet_telemetry
from synestra_cli.store import open_store

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"


def _json(explanation) -> str:
    return json.dumps(explanation.to_json(), default=memo._iso, sort_keys=True)


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory, sample_store_template):
    return copy_sample_store(sample_store_template, tmp_path_factory.mktemp("batch"))


@pytest.mark.heavy
def test_every_sample_job_explained_from_the_fleet_s_rows_is_the_job_explained_alone(sample_store):
    with open_store(sample_store, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        assert len(jobs) >= 8
        fleet = inputs_for(conn, jobs)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        batched = {j: _json(explain_job(conn, j, inputs=fleet[j])) for j in jobs}
        # the report's own path: the fleet's rows, two jobs at a time in threads
        explained, computed, _ = memo.explain_jobs(conn, jobs)
    assert len(computed) == len(jobs)
    assert batched == alone
    assert {j: _json(e) for j, e in explained.items()} == alone
    # not vacuous: the sample's jobs have causes, restores and failures to get wrong
    docs = [json.loads(d) for d in alone.values()]
    assert sum(c["cause"] is not None for d in docs for c in d["checkpoints"]) >= 8
    assert any(c["kind"] == "restore" for d in docs for c in d["checkpoints"])


@pytest.mark.heavy
def test_a_fleet_read_a_few_jobs_at_a_time_in_time_order_answers_as_all_at_once(sample_store, monkeypatch):
    from synestra_cli.explain import batch

    with open_store(sample_store, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        whole = [_json(e) for e in explain_batch(conn, jobs)]
        reads: list[int] = []
        fleet = batch.fleet_telemetry
        monkeypatch.setattr(batch, "BATCH_JOBS", 3)
        monkeypatch.setattr(batch, "fleet_telemetry", lambda c, r: reads.append(len(r)) or fleet(c, r))
        assert [_json(e) for e in explain_batch(conn, jobs)] == whole
    assert len(reads) == -(-len(jobs) // 3) and max(reads) <= 3


def test_the_fleet_s_rows_are_each_job_s_own_rows(sample_store):
    with open_store(sample_store, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        fleet = inputs_for(conn, jobs)
        for j in jobs:
            assert fleet[j] == job_inputs(conn, j)
        assert len({len(fleet[j].checkpoints) for j in jobs}) > 1  # jobs differ: nothing mixed up


@pytest.mark.parametrize("workers", ["1", "3"])
def test_a_job_s_inputs_read_on_several_cursors_are_those_read_on_one(sample_store, monkeypatch, workers):
    """job_inputs and inputs_for read their five parts two at a time on cursors of their own: the same
    rows, in the same order, as one after the other on the connection."""
    with open_store(sample_store, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        monkeypatch.setenv("SYNESTRA_WORKERS", "1")
        one = [job_inputs(conn, j) for j in jobs], inputs_for(conn, jobs)
        monkeypatch.setenv("SYNESTRA_WORKERS", workers)
        assert ([job_inputs(conn, j) for j in jobs], inputs_for(conn, jobs)) == one
    assert any(i.incidents for i in one[0]) and any(i.windows for i in one[0])  # not vacuous


@pytest.fixture(scope="module")
def campaign():
    # sample_data has no syslog: a campaign's lanes meet GPU, link and storage faults in the kernel log,
    # crashes and preemptions in the job logs, on hosts whose jobs follow one another
    return simcache.ingested(simcache.simulation("campaign", seed=41, nodes=4, hours=12))


@pytest.fixture(scope="module")
def legacy_campaign():
    # the same campaign in a store written before the series layout (opened read-only: read as it is, its
    # candidates by their hours' row ranges or their files)
    return simcache.ingested(simcache.simulation("campaign", seed=41, nodes=4, hours=12), upto=LEGACY_SCHEMA)


@pytest.mark.heavy
def test_a_simulated_campaign_with_syslog_and_crashes_is_explained_alike_in_a_batch(campaign):
    with open_store(campaign, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        assert len(jobs) >= 4
        fleet = inputs_for(conn, jobs)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        batched = {j: _json(explain_job(conn, j, inputs=fleet[j])) for j in jobs}
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    assert batched == alone
    assert whole == alone
    assert any(
        json.loads(d)["failures"] or any(c["cause"] for c in json.loads(d)["checkpoints"]) for d in alone.values()
    )


def _reads(conn, jobs):
    fleet = inputs_for(conn, jobs)
    windows = {j: telemetry_windows(conn, fleet[j]) for j in jobs}
    return {j: JobRead(fleet[j].scope, w, event_read(fleet[j].scope, w)) for j, w in windows.items() if w}


def test_the_fleet_s_telemetry_is_read_once_and_serves_every_job_that_reads_any(campaign):
    # not vacuous: the batch itself answers (the summaries cover every job), with anomalies and events
    # that differ between jobs on the same hosts, and explain takes them instead of reading its own
    with open_store(campaign, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        reads = _reads(conn, jobs)
        got = fleet_telemetry(conn, reads)
        assert len(reads) >= 3 and set(got) == set(reads)
        assert all(t.windows == reads[j].windows for j, t in got.items())
        assert sum(bool(t.anomalies) for t in got.values()) >= 2
        assert sum(bool(t.events) for t in got.values()) >= 2
        assert len({tuple(a.onset for a in t.anomalies) for t in got.values()}) > 1
        hosts = [set(r.scope.hosts) for r in reads.values()]
        assert any(a & b for i, a in enumerate(hosts) for b in hosts[i + 1 :])  # jobs share hosts
        # the temp tables are gone: the next statement on this connection starts clean
        temp = "SELECT count(*) FROM duckdb_tables() WHERE temporary AND starts_with(table_name, '_f')"
        assert conn.execute(temp).fetchone()[0] == 0


def test_without_summaries_the_batch_leaves_the_telemetry_to_each_job_and_answers_alike(campaign, monkeypatch):
    monkeypatch.setenv("SYNESTRA_SUMMARIES", "0")
    with open_store(campaign, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        got = fleet_telemetry(conn, _reads(conn, jobs))
        assert got and all(t.windows is None for t in got.values())  # events only: anomalies read alone
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    assert whole == alone


def test_a_job_whose_hours_hold_an_unsummarised_file_reads_alone_and_the_others_stay_batched(campaign, tmp_path):
    import shutil

    db = tmp_path / "partly.duckdb"
    shutil.copy(campaign, db)
    with open_store(db) as conn:  # a crash between a file's commit and its summary leaves it so
        # the file of the shortest time range (a job's log): the jobs that ran then overlap it
        (sid,) = conn.execute(
            "SELECT source_id FROM sources WHERE first_ts IS NOT NULL ORDER BY last_ts - first_ts, source_id"
        ).fetchone()
        conn.execute("DELETE FROM summarised_sources WHERE source_id = ?", [sid])
    with open_store(db, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        got = fleet_telemetry(conn, _reads(conn, jobs))
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    served = [j for j, t in got.items() if t.windows is not None]
    assert served and len(served) < len(got)  # some jobs overlap the file's hours, some do not
    assert whole == alone


def test_the_fleet_tests_each_job_s_hosts_before_their_series_and_answers_as_without_that_stage(
    campaign, tmp_path, monkeypatch
):
    import shutil

    from synestra_cli.signals import fleet_telemetry as ft

    monkeypatch.setattr(ft, "TEMP_TABLES", ())  # the read's tables stay, to be counted
    db = tmp_path / "before-021.duckdb"  # a store opened read-only before host_summaries existed
    shutil.copy(campaign, db)
    with open_store(db) as conn:
        conn.execute("DROP TABLE host_summaries")
    got, summaries = {}, {}
    for stage, path in (("hosts first", campaign), ("series only", db)):
        with open_store(path, read_only=True) as conn:
            jobs = jobs_in_window(conn)
            got[stage] = fleet_telemetry(conn, _reads(conn, jobs))
            summaries[stage] = conn.execute("SELECT count(*) FROM _fsumm").fetchone()[0]
            if stage == "series only":
                alone = {j: _json(explain_job(conn, j)) for j in jobs}
                whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    # the stage decides which series are read: each job's anomalies (its events, in no set order among
    # equal times, are not read by it)
    assert {j: (t.windows, t.observed, t.anomalies) for j, t in got["hosts first"].items()} == {
        j: (t.windows, t.observed, t.anomalies) for j, t in got["series only"].items()
    }
    assert sum(bool(t.anomalies) for t in got["hosts first"].values()) >= 2
    assert 0 < summaries["hosts first"] < summaries["series only"]  # quiet hosts' series were not read
    assert whole == alone


def test_the_fleet_s_read_reports_its_progress_to_whoever_listens(campaign):
    from synestra_cli import progress

    heard = []
    with open_store(campaign, read_only=True) as conn, progress.listening(lambda *p: heard.append(p)):
        explain_batch(conn, jobs_in_window(conn))
    read = [p for p in heard if p[0] == "reading the jobs' telemetry"]
    assert read[0][1:] == (0, 2) and read[-1][1:] == (2, 2)
    assert any(p[0] == "explaining jobs" for p in heard)


def test_the_fleet_reads_its_candidates_samples_by_rowid_and_answers_alike(legacy_campaign, monkeypatch):
    # read by their hours' row ranges (store/summaries.py row_lo, row_hi), never by their files' row groups
    from synestra_cli.signals import fleet_telemetry as ft

    monkeypatch.setattr(ft, "ROWID_MAX_SPAN", 1e9)

    def by_source(*_):
        raise AssertionError("read by file")

    with open_store(legacy_campaign, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        monkeypatch.setattr(ft, "_read_by_source", by_source)
        got = fleet_telemetry(conn, _reads(conn, jobs))
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    assert sum(bool(t.anomalies) for t in got.values()) >= 2
    assert whole == alone


@pytest.mark.parametrize("why", ["stale ranges", "candidates far apart"])
def test_the_fleet_reads_by_file_when_row_ranges_do_not_serve_and_answers_alike(
    legacy_campaign, tmp_path, monkeypatch, why
):
    import shutil

    from synestra_cli.signals import fleet_telemetry as ft

    db = tmp_path / "moved.duckdb"
    shutil.copy(legacy_campaign, db)
    if why == "stale ranges":  # as after a forget renumbered the rows: every range misses its hour's rows
        with duckdb.connect(str(db)) as conn:  # not open_store: that would migrate it to the series layout
            conn.execute("UPDATE metric_summaries SET row_lo = row_lo + 1, row_hi = row_hi + 1")
        monkeypatch.setattr(ft, "ROWID_MAX_SPAN", 1e9)
    else:
        monkeypatch.setattr(ft, "ROWID_MAX_SPAN", 0.0)
    read_by_source = ft._read_by_source
    calls = []
    monkeypatch.setattr(ft, "_read_by_source", lambda *a: calls.append(1) or read_by_source(*a))
    with open_store(db, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    assert calls
    assert whole == alone


@pytest.mark.heavy
@pytest.mark.parametrize("whole", [True, False], ids=["whole table", "candidates' files"])
def test_the_fleet_reads_its_candidates_files_or_the_whole_table_and_answers_alike(legacy_campaign, monkeypatch, whole):
    from synestra_cli.signals import fleet_telemetry as ft

    monkeypatch.setattr(ft, "ROWID_MAX_SPAN", 0.0)  # by file
    with open_store(legacy_campaign, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        chosen = []
        monkeypatch.setattr(ft, "scan_whole_table", lambda *a: chosen.append(whole) or whole)
        got = fleet_telemetry(conn, _reads(conn, jobs))
        whole_batch = {e.job: _json(e) for e in explain_batch(conn, jobs)}
    assert chosen and sum(bool(t.anomalies) for t in got.values()) >= 2
    assert whole_batch == alone


def test_the_whole_table_is_scanned_only_when_the_candidates_files_are_most_of_it(legacy_campaign, monkeypatch):
    from synestra_cli.signals import fleet_telemetry as ft

    with open_store(legacy_campaign, read_only=True) as conn:
        every = [s for (s,) in conn.execute("SELECT source_id FROM sources").fetchall()]
        hull = list(conn.execute("SELECT min(first_ts), max(last_ts) FROM sources").fetchone())
        assert ft.scan_whole_table(conn, every, hull)
        assert not ft.scan_whole_table(conn, every[:1], hull)
        monkeypatch.setattr(ft, "LISTS_MAX_SHARE", 1.0)
        assert not ft.scan_whole_table(conn, every, hull)


@pytest.mark.heavy
def test_clock_event_bits_that_never_change_are_not_read_and_the_batch_answers_alike(tmp_path):
    # a power brake sets one bit of the clocks-event mask on a host; the other bits (and the other hosts'
    # mask) never change, decode to constant series, and are left out of the fleet's read
    from synestra_cli.signals.thresholds import CLOCK_EVENT_SIGNALS
    from synestra_cli.simulate.scenarios import simulate

    simulate(tmp_path / "b", "power-brake", seed=3, nodes=4, hours=6)
    db = tmp_path / "b.duckdb"
    with open_store(db) as conn:
        ingest_paths(conn, [tmp_path / "b" / "exports"], IngestOptions())
    with open_store(db, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        whole = {e.job: _json(e) for e in explain_batch(conn, jobs)}
        got = fleet_telemetry(conn, _reads(conn, jobs))
    assert whole == alone
    decoded = {name for name, _, _ in CLOCK_EVENT_SIGNALS}
    assert any(a.metric in decoded for t in got.values() for a in t.anomalies)  # the brake's bit is read
    assert "gpu_clock_event_hw_power_brake" in json.dumps(list(alone.values()))
