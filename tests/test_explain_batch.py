"""A fleet's jobs explained from rows read for all of them at once (explain/inputs.py, the path of a cold
tax-report) are explained exactly as each job on its own: the same JSON, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synestra_cli.explain import memo
from synestra_cli.explain.api import explain_job, jobs_in_window
from synestra_cli.explain.inputs import inputs_for, job_inputs
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import open_store

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"


def _json(explanation) -> str:
    return json.dumps(explanation.to_json(), default=memo._iso, sort_keys=True)


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory):
    db = tmp_path_factory.mktemp("batch") / "sample.duckdb"
    with open_store(db) as conn:
        reports = ingest_paths(conn, [SAMPLE], IngestOptions())
        assert all(r.status == "loaded" for r in reports)
    return db


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


def test_the_fleet_s_rows_are_each_job_s_own_rows(sample_store):
    with open_store(sample_store, read_only=True) as conn:
        jobs = jobs_in_window(conn)
        fleet = inputs_for(conn, jobs)
        for j in jobs:
            assert fleet[j] == job_inputs(conn, j)
        assert len({len(fleet[j].checkpoints) for j in jobs}) > 1  # jobs differ: nothing mixed up


def test_a_simulated_campaign_with_syslog_and_crashes_is_explained_alike_in_a_batch(tmp_path):
    # sample_data has no syslog: a campaign's lanes meet GPU, link and storage faults in the kernel log,
    # crashes and preemptions in the job logs, on hosts whose jobs follow one another
    from synestra_cli.simulate.scenarios import simulate

    simulate(tmp_path / "c", "campaign", seed=41, nodes=4, hours=12)
    with open_store(tmp_path / "c.duckdb") as conn:
        ingest_paths(conn, [tmp_path / "c" / "exports"], IngestOptions())
    with open_store(tmp_path / "c.duckdb", read_only=True) as conn:
        jobs = jobs_in_window(conn)
        assert len(jobs) >= 4
        fleet = inputs_for(conn, jobs)
        alone = {j: _json(explain_job(conn, j)) for j in jobs}
        batched = {j: _json(explain_job(conn, j, inputs=fleet[j])) for j in jobs}
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] > 0
    assert batched == alone
    assert any(
        json.loads(d)["failures"] or any(c["cause"] for c in json.loads(d)["checkpoints"]) for d in alone.values()
    )
