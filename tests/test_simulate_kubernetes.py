"""The Kubernetes rendering (simulate --scheduler kubernetes) read back: the scheduler's attempts, states, nodes and
queue waits are the truth's, for PyTorchJobs restarted in place and JobSets recreated; explain and the truth matrix
over it once the container logs are read (the CRI envelope: formats/envelope.py)."""

from __future__ import annotations

import importlib.util
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from explain_truth import Score, run_scenario, score_job

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.simulate.scenarios import SCENARIOS, simulate
from synestra_cli.store.connect import connect

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "kubernetes"
# The container logs are CRI files (`<time> stdout F <line>`): the job-log formats read them once the envelope
# normalisation (helper branch `paste`) strips that prefix.
CONTAINER_LOGS = importlib.util.find_spec("synestra_cli.formats.envelope") is not None
needs_container_logs = pytest.mark.skipif(not CONTAINER_LOGS, reason="container logs need formats/envelope.py")


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", ""))


def _kube_only(root: Path) -> list[Path]:
    """What the scheduler side reads: the Kubernetes objects and events (no telemetry, no logs)."""
    return sorted((root / "exports" / "kubernetes").iterdir())


pytestmark = pytest.mark.heavy  # four simulations (no telemetry) read back


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    made = {}
    for scenario, seed in (("gpu-fell-off-bus", 7), ("gpu-fell-off-bus", 8), ("preemption", 7), ("ecc-dbe", 9)):
        out = tmp_path_factory.mktemp(f"{scenario}-{seed}")
        simulate(out, scenario, seed=seed, nodes=8, hours=4.0, telemetry=False, scheduler="kubernetes")
        conn = connect(out / "store.duckdb")
        reports = ingest_paths(conn, _kube_only(out), IngestOptions())
        assert all(r.status == "loaded" for r in reports), [(r.path, r.error) for r in reports]
        made[(scenario, seed)] = (conn, json.loads((out / "truth.json").read_text()), out)
    yield made
    for conn, _, _ in made.values():
        conn.close()


def test_every_truth_attempt_is_a_scheduler_attempt_with_its_times_state_and_nodes(rendered):
    kinds = set()
    for conn, truth, out in rendered.values():
        pods = (out / "exports" / "kubernetes" / "pods.watch.json").read_text()
        kinds |= {
            kind
            for kind, label in (
                ("PyTorchJob", "training.kubeflow.org/job-name"),
                ("JobSet", "jobset.sigs.k8s.io/jobset-name"),
            )
            if f'"{label}"' in pods
        }
        for job in truth["jobs"]:
            got = conn.execute(
                "SELECT attempt, start_ts, end_ts, state, nodes FROM sacct_attempts WHERE job_id = ? ORDER BY 1",
                [job["job"]],
            ).fetchall()
            want = job["attempts"]
            assert [g[0] for g in got] == [a["attempt"] for a in want], job["job"]
            for g, a in zip(got, want, strict=True):
                assert abs(g[1] - _ts(a["start"])) < timedelta(seconds=1), (job["job"], g, a)  # whole seconds
                assert abs(g[2] - _ts(a["end"])) < timedelta(seconds=1), (job["job"], g, a)
                assert g[3] == a["state"] and g[4] == sorted(job["hosts"]), (job["job"], g, a)
    assert kinds >= {"PyTorchJob", "JobSet"}


def test_the_queue_wait_between_attempts_is_the_requeue_and_failed_scheduling_says_so(rendered):
    conn, truth, _ = rendered[("gpu-fell-off-bus", 7)]
    job = next(j for j in truth["jobs"] if len(j["attempts"]) > 1)
    a1, a2 = job["attempts"][:2]
    got = conn.execute(
        "SELECT epoch(lead(start_ts) OVER (ORDER BY attempt)) - epoch(end_ts) FROM sacct_attempts "
        "WHERE job_id = ? ORDER BY attempt LIMIT 1",
        [job["job"]],
    ).fetchone()[0]
    assert abs(got - (_ts(a2["start"]) - _ts(a1["end"])).total_seconds()) < 2.0
    assert got > 600  # the simulated requeue: 15 minutes


def test_a_preemption_is_the_schedulers_and_names_no_node(rendered):
    conn, truth, _ = rendered[("preemption", 7)]
    main = truth["main_job"]
    states = [
        r[0]
        for r in conn.execute("SELECT state FROM sacct_attempts WHERE job_id = ? ORDER BY attempt", [main]).fetchall()
    ]
    assert "PREEMPTED" in states
    preempted = conn.execute(
        "SELECT count(*) FROM events WHERE fields->>'reason' = 'Preempted' AND message LIKE '%Preempted by pod%'"
    ).fetchone()[0]
    assert preempted >= 1
    # recreated pods: a new uid for the attempt after the preemption
    uids = conn.execute(
        "SELECT count(DISTINCT pod_uid) FROM kube_runs WHERE job_id = ? AND replica = (SELECT min(replica) "
        "FROM kube_runs WHERE job_id = ?)",
        [main, main],
    ).fetchone()[0]
    assert uids == len(states)


def test_a_rebooted_node_goes_not_ready_as_the_node_controller_says(rendered):
    conn, truth, _ = rendered[("gpu-fell-off-bus", 7)]
    fault = next(f for f in truth["faults"] if f["kind"] == "gpu_fell_off_bus")
    rows = conn.execute("SELECT host, ts FROM events WHERE kind = 'node_not_ready' ORDER BY ts").fetchall()
    assert fault["hosts"][0] in {h for h, _ in rows}
    assert all(ts > _ts(fault["start"]) for h, ts in rows if h == fault["hosts"][0])


# One case per scenario, as the Slurm matrix (test_explain_truth.py), at one held-out seed and its 6 h.
@pytest.mark.truth
@needs_container_logs
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_rendered_on_kubernetes_meets_the_targets(name):
    from test_explain_truth import _assert_targets

    _assert_targets(run_scenario(None, name, 101, nodes=8, scheduler="kubernetes"))


@pytest.mark.heavy
@needs_container_logs
def test_sample_datas_kubernetes_jobs_are_explained_as_their_truth_says(tmp_path):
    truth = json.loads((SAMPLE / "truth.json").read_text())
    conn = connect(tmp_path / "k8s.duckdb")
    try:
        reports = ingest_paths(conn, [SAMPLE / "exports"], IngestOptions())
        assert all(r.status == "loaded" for r in reports), [(r.path, r.error) for r in reports if r.status != "loaded"]
        total = Score()
        for job in truth["jobs"]:
            total.add(score_job(conn, job, truth["decoys"], job["job"]))
        assert total.caused >= 4 and not total.misses, total.misses
    finally:
        conn.close()
