"""Clusters do not merge (issue 16, item 5): jobs are keyed CLUSTER:ID, from sacct's Cluster column or
`ingest --cluster NAME`; a bare id resolves when one cluster holds it and is an error when several do."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from conftest import REAL_SAMPLES

from synestra_cli.cli.main import cli
from synestra_cli.clusters import resolve_job
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths

CEEMS = REAL_SAMPLES / "training" / "ceems-jobstats_sacct-P_cluster-column.txt"
SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"


def _jobs(conn) -> dict[str, list[str]]:
    rows = conn.execute("SELECT job_id, list_sort(list(DISTINCT host)) FROM job_nodes GROUP BY job_id").fetchall()
    return dict(rows)


def test_sacct_cluster_column_keys_the_jobs(conn):
    [r] = ingest_paths(conn, [CEEMS], IngestOptions())
    assert r.status == "loaded" and r.rejected == 0
    assert _jobs(conn) == {"test:1479763": ["compute-0"], "test:1481508": ["compute-0", "compute-1", "compute-2"]}
    assert conn.execute("SELECT cluster, slurm_job_id FROM job_clusters WHERE job_id = 'test:1479763'").fetchall() == [
        ("test", "1479763")
    ]
    assert resolve_job(conn, "1479763") == "test:1479763" and resolve_job(conn, "test:1479763") == "test:1479763"


def test_two_clusters_same_job_id_do_not_merge(conn, tmp_path):
    # the same export as another cluster would print it: its own cluster name and nodes
    other = tmp_path / "sacct-other.txt"
    other.write_text(CEEMS.read_text().replace("|test|", "|h100|").replace("compute-", "h100-"))
    ingest_paths(conn, [CEEMS, other], IngestOptions())
    jobs = _jobs(conn)
    assert jobs["test:1481508"] == ["compute-0", "compute-1", "compute-2"]
    assert jobs["h100:1481508"] == ["h100-0", "h100-1", "h100-2"]
    assert conn.execute("SELECT count(*) FROM attempts_reconciled WHERE job_id LIKE '%1481508'").fetchone()[0] == 2


def test_ingest_cluster_option_names_sacct_and_logs_alike(tmp_path):
    db = tmp_path / "s.duckdb"
    run = CliRunner()
    res = run.invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), "--cluster", "a100", "--db", str(db)])
    assert res.exit_code == 0, res.output
    # the job log names bare 1001: one cluster holds it, so it is that cluster's job
    res = run.invoke(cli, ["ingest", str(SAMPLE / "jobs" / "1001.log"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    res = run.invoke(cli, ["jobs", "--job", "1001", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0, res.output
    attempts = json.loads(res.stdout)["attempts"]
    assert attempts and all(a["origin"] == "sacct" and a["log_start_ts"] for a in attempts)
    res = run.invoke(cli, ["explain", "--job", "1001", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["job"] == "a100:1001"


def test_a_bare_id_two_clusters_hold_is_an_error_that_lists_them(tmp_path):
    db = tmp_path / "s.duckdb"
    other = tmp_path / "sacct-b.txt"
    other.write_text((SAMPLE / "sacct.txt").read_text().replace("gpu-", "node-"))
    run = CliRunner()
    assert run.invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), "--cluster", "a", "--db", str(db)]).exit_code == 0
    assert run.invoke(cli, ["ingest", str(other), "--cluster", "b", "--db", str(db)]).exit_code == 0
    res = run.invoke(cli, ["jobs", "--job", "1001", "--db", str(db)])
    assert res.exit_code == 5 and "a:1001" in res.output and "b:1001" in res.output
    res = run.invoke(cli, ["tax-report", "--job", "1001", "--db", str(db)])
    assert res.exit_code == 5 and "2 clusters" in res.output
    res = run.invoke(cli, ["jobs", "--job", "b:1001", "--db", str(db), "--format", "json"])
    assert res.exit_code == 0 and all(
        h.startswith("node-") for a in json.loads(res.stdout)["attempts"] for h in a["hosts"]
    )


def test_a_bad_cluster_name_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(cli, ["ingest", str(CEEMS), "--cluster", "a:b", "--db", str(tmp_path / "s.duckdb")])
    assert res.exit_code == 2 and "--cluster" in res.output
    assert not (tmp_path / "s.duckdb").exists()
