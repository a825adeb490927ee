"""Clusters do not merge (issue 16, item 5): jobs are keyed CLUSTER:ID, from sacct's Cluster column or
`ingest --cluster NAME`; a bare id resolves when one cluster holds it and is an error when several do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REAL_SAMPLES

from synestra_cli.cli.main import cli
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.query.clusters import resolve_job

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
        h.startswith("b:node-") for a in json.loads(res.stdout)["attempts"] for h in a["hosts"]
    )


def test_a_bad_cluster_name_is_a_usage_error(tmp_path):
    res = CliRunner().invoke(cli, ["ingest", str(CEEMS), "--cluster", "a:b", "--db", str(tmp_path / "s.duckdb")])
    assert res.exit_code == 2 and "--cluster" in res.output
    assert not (tmp_path / "s.duckdb").exists()


# --- hosts: with --cluster, CLUSTER:host, so that two clusters' gpu-001 do not merge --------------------

SYSLOG = "Nov 29 10:00:01 gpu-001 kernel: NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, GPU has fallen off the bus.\n"


def _hosts(conn, table: str) -> list[str]:
    return [r[0] for r in conn.execute(f"SELECT DISTINCT host FROM {table} ORDER BY 1").fetchall()]


def test_two_clusters_hosts_of_one_name_do_not_merge_with_cluster(conn, tmp_path):
    for name in ("a100", "h100"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "messages").write_text(SYSLOG.replace("pid=1234", f"pid={len(name)}{name[0]}"))
        sacct = CEEMS.read_text().replace("|test|", "||")  # no Cluster column value: --cluster names it
        (tmp_path / name / "sacct.txt").write_text(sacct)
        reports = ingest_paths(conn, [tmp_path / name], IngestOptions(year=2026, cluster=name))
        assert all(r.status == "loaded" for r in reports), [r.error for r in reports]
    assert _hosts(conn, "events") == ["a100:gpu-001", "h100:gpu-001"]
    assert _jobs(conn)["a100:1481508"] == ["a100:compute-0", "a100:compute-1", "a100:compute-2"]
    assert conn.execute("SELECT list_sort(hosts) FROM sources WHERE path LIKE '%a100/messages'").fetchone() == (
        ["a100:gpu-001"],
    )


def test_without_cluster_hosts_stay_bare_even_when_sacct_names_one(conn):
    ingest_paths(conn, [CEEMS], IngestOptions())  # sacct's Cluster column keys the jobs, not the hosts
    assert _hosts(conn, "job_nodes") == ["compute-0", "compute-1", "compute-2"]


def test_a_file_whose_hosts_are_in_the_store_in_the_other_form_gets_a_note(conn, tmp_path):
    (tmp_path / "a").write_text(SYSLOG)
    (tmp_path / "b").write_text(SYSLOG.replace("10:00:01", "10:00:02"))
    [first] = ingest_paths(conn, [tmp_path / "a"], IngestOptions(year=2026, cluster="a100"))
    [second] = ingest_paths(conn, [tmp_path / "b"], IngestOptions(year=2026))
    assert not any("other form" in n for n in first.notes)
    assert any("1 host(s) of this file (gpu-001), read with no --cluster" in n for n in second.notes)


@pytest.mark.heavy
def test_sample_data_ingested_with_cluster_explains_as_without(tmp_path):
    from synestra_cli.explain.job import explain_job
    from synestra_cli.store import open_store

    causes = {}
    for cluster in (None, "a100"):
        db = tmp_path / f"{cluster}.duckdb"
        with open_store(db) as c:
            ingest_paths(c, [SAMPLE], IngestOptions(cluster=cluster))
            job = f"{cluster}:1008" if cluster else "1008"
            exp = explain_job(c, job)
            causes[cluster] = [
                (e.iteration, e.trigger, e.cause and e.cause.category, e.cause and e.cause.host)
                for e in exp.checkpoints
            ]
    bare = [(i, t, cat, f"a100:{h}" if h else h) for i, t, cat, h in causes[None]]
    assert causes["a100"] == bare and any(h for *_, h in bare)  # the same causes, on the qualified hosts
