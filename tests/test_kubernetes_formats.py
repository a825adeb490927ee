"""Kubernetes inputs (formats/scheduler/kubernetes.py, kube_events_table.py): real kubectl outputs load with
their facts."""

from __future__ import annotations

import copy
import json
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import yaml
from conftest import REAL_SAMPLES

from synestra_cli import formats
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths

K8S = REAL_SAMPLES / "kubernetes"
T0 = datetime(2026, 3, 1, 12, 0, 0)


def _ingest(conn, *paths: Path, **opts):
    reports = ingest_paths(conn, list(paths), IngestOptions(**opts))
    assert all(r.status == "loaded" for r in reports), [(r.path, r.error) for r in reports]
    return reports


def _events(conn, where: str = "TRUE"):
    return conn.execute(
        f"SELECT ts, host, kind, fields->>'reason', TRY_CAST(fields->>'count' AS INTEGER), fields->>'last_ts' "
        f"FROM events WHERE {where} ORDER BY ts, line"
    ).fetchall()


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        (p.name, "kube_events_table" if p.suffix == ".txt" else "kubernetes")
        for p in sorted(K8S.iterdir())
        if p.suffix != ".md"
    ],
)
def test_every_real_sample_is_recognised_as_its_format(name, fmt):
    assert formats.detect((K8S / name).read_text()[:65536]).name == fmt


def test_cluster_info_dump_events_keep_counts_first_and_last_times_and_the_kubelets_node(conn):
    _ingest(conn, K8S / "minikube-cluster-info-dump.json")
    rows = _events(conn, "kind = 'k8s_event'")
    assert len(rows) == 40
    unhealthy = [r for r in rows if r[3] == "Unhealthy" and r[4] == 4]
    assert unhealthy == [(datetime(2024, 11, 17, 10, 19, 52), "minikube", "k8s_event", "Unhealthy", 4, unhealthy[0][5])]
    assert unhealthy[0][5].startswith("2024-11-17 10:20:12") or unhealthy[0][5].startswith("2024-11-17T10:20:12")
    scheduled = [r for r in rows if r[3] == "Scheduled"]
    assert {r[1] for r in scheduled} == {"minikube"}  # from "Successfully assigned ... to minikube"
    # the NodeList: kubelet's four conditions, Ready since 10:19:39, none a problem
    conds = _events(conn, "kind IN ('k8s_condition', 'node_not_ready', 'node_problem')")
    assert len(conds) == 4 and {r[2] for r in conds} == {"k8s_condition"}
    assert (datetime(2024, 11, 17, 10, 19, 39), "minikube") in {(r[0], r[1]) for r in conds}
    # kube-system pods are no training job
    assert conn.execute("SELECT count(*) FROM jobs").fetchone() == (0,)


def test_events_k8s_io_v1_reads_eventTime_deprecated_fields_and_regarding(conn):
    _ingest(conn, K8S / "k8s-openapi_events.k8s.io-v1_scheduled.json")
    assert _events(conn) == [
        (datetime(2023, 2, 16, 18, 25, 7), "test-pgd-control-plane", "k8s_event", "Scheduled", 1, "2023-02-16 18:25:07")
    ]
    ns = conn.execute("SELECT fields->>'namespace', fields->>'object_kind', fields->>'source' FROM events").fetchone()
    assert ns == ("test-530513", "Pod", "default-scheduler")


def test_gke_node_conditions_of_node_problem_detector_are_kept_healthy(conn):
    _ingest(conn, K8S / "gke-node_npd-conditions_get-node-o-yaml.yaml")
    conds = conn.execute(
        "SELECT fields->>'condition', fields->>'status', kind, ts FROM events ORDER BY fields->>'condition'"
    ).fetchall()
    assert len(conds) == 12
    by = {c[0]: c for c in conds}
    assert by["ReadonlyFilesystem"][1:] == ("False", "k8s_condition", datetime(2022, 3, 28, 11, 32, 15))
    assert by["KernelDeadlock"][2] == "k8s_condition"  # NPD says "no deadlock": not a problem
    assert {c[2] for c in conds} == {"k8s_condition"}


def test_training_operator_label_names_the_job_not_the_launchers_batch_job(conn):
    _ingest(conn, K8S / "kueue-8471_mpijob-pods.yaml")
    assert conn.execute("SELECT job_id, name FROM jobs").fetchall() == [("default/pi", "pi")]


def test_pytorchjob_object_gives_the_jobs_state(conn):
    _ingest(conn, K8S / "trainer_pytorch-md_get-pytorchjob-o-yaml.yaml")
    row = conn.execute("SELECT job_id, name, state FROM jobs").fetchone()
    assert row == ("default/pytorch-tcp-dist-mnist", "pytorch-tcp-dist-mnist", "COMPLETED")


def test_a_deployments_pod_is_no_job_and_says_so(conn):
    (report,) = _ingest(conn, K8S / "website_debug-running-pod_get-pod-o-yaml.yaml")
    assert conn.execute("SELECT count(*) FROM kube_runs").fetchone() == (0,)
    assert any("1 pod(s) of no training job" in n for n in report.notes)


def _copy_with_mtime(src: Path, dst: Path, at: datetime) -> Path:
    dst.write_bytes(src.read_bytes())
    stamp = at.timestamp() - (datetime(1970, 1, 1) - datetime.utcfromtimestamp(0)).total_seconds()
    os.utime(dst, (stamp, stamp))
    return dst


def test_events_tables_count_ages_back_from_the_files_mtime(conn, tmp_path):
    a = _copy_with_mtime(K8S / "events-table-A_deckhouse_preempted.txt", tmp_path / "a.txt", T0)
    b = _copy_with_mtime(K8S / "events-table-A_killer-sh_scheduled-started.txt", tmp_path / "b.txt", T0)
    _ingest(conn, a, b)
    pre = conn.execute(
        "SELECT ts, host, fields->>'namespace', TRY_CAST(fields->>'approx_s' AS INTEGER) FROM events "
        "WHERE fields->>'reason' = 'Preempted'"
    ).fetchall()
    assert pre == [(T0 - timedelta(seconds=68), "worker-0", "default", 1)]
    sched = conn.execute("SELECT ts, host FROM events WHERE fields->>'reason' = 'Scheduled'").fetchall()
    assert sched == [(T0 - timedelta(minutes=21), "minikube")]


def test_old_kubectl_table_has_absolute_times_and_the_kubelets_host(conn):
    _ingest(conn, K8S / "events-table-old_k8s-6665_firstseen.txt")
    rows = conn.execute("SELECT ts, host, fields->>'reason', fields->>'object' FROM events ORDER BY line").fetchall()
    assert rows == [
        (datetime(2015, 4, 9, 22, 1, 40), "e2e-test-quinton-master", r, "etcd-server-e2e-test-quinton-master")
        for r in ("pulled", "started")
    ]


# ------------------------------------------------------------------ the job model, on a real pod's shape
POD = yaml.safe_load((K8S / "website_debug-running-pod_get-pod-o-yaml.yaml").read_text())


def _pod(name: str, node: str, replica: str, runs: list[dict], uid: str, **extra) -> dict:
    """The real pod (kubernetes.io docs) as a PyTorchJob's replica: its labels, node, runs and GPUs."""
    p = copy.deepcopy(POD)
    p["metadata"].update(name=name, uid=uid, namespace="team-a")
    p["metadata"]["labels"] = {
        "training.kubeflow.org/job-name": "llama",
        "training.kubeflow.org/replica-type": replica.split("/")[0],
        "training.kubeflow.org/replica-index": replica.split("/")[1],
    }
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llama", "controller": True, "uid": "x"}
    ]
    p["spec"]["nodeName"] = node
    p["spec"]["containers"][0]["name"] = "pytorch"
    p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "8"
    cs = p["status"]["containerStatuses"][0]
    cs["name"] = "pytorch"
    cs["restartCount"] = len(runs) - 1
    cs["state"] = runs[-1]
    cs["lastState"] = runs[-2] if len(runs) > 1 else {}
    p["status"]["conditions"][-1]["lastTransitionTime"] = "2026-03-01T10:00:00Z"  # PodScheduled
    p["status"].update(extra)
    return p


def _term(start: str, end: str, code: int, reason: str) -> dict:
    return {"terminated": {"startedAt": start, "finishedAt": end, "exitCode": code, "reason": reason}}


def test_restarts_are_attempts_oom_is_the_workloads_and_the_queue_wait_is_requeue(conn, tmp_path):
    running = {"running": {"startedAt": "2026-03-01T11:20:00Z"}}
    first = _term("2026-03-01T10:01:00Z", "2026-03-01T11:00:00Z", 137, "OOMKilled")
    other = _term("2026-03-01T10:01:05Z", "2026-03-01T11:00:30Z", 143, "Error")
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            _pod("llama-master-0", "gpu-001.cluster.local", "Master/0", [first, running], "u1"),
            _pod("llama-worker-0", "gpu-002.cluster.local", "Worker/0", [other, running], "u2"),
        ],
    }
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(doc, indent=4))
    _ingest(conn, path)
    att = conn.execute(
        "SELECT attempt, start_ts, end_ts, state, exit_code, nodes FROM sacct_attempts ORDER BY attempt"
    ).fetchall()
    assert att == [
        (1, datetime(2026, 3, 1, 10), datetime(2026, 3, 1, 11, 0, 30), "OUT_OF_MEMORY", "0:9", ["gpu-001", "gpu-002"]),
        (2, datetime(2026, 3, 1, 11, 20), None, "RUNNING", None, ["gpu-001", "gpu-002"]),
    ]
    assert conn.execute("SELECT job_id, gpus FROM jobs_reconciled").fetchall() == [("team-a/llama", 16)]
    assert conn.execute("SELECT name FROM host_names ORDER BY 1").fetchall()[:2] == [
        ("gpu-001.cluster.local",),
        ("gpu-002.cluster.local",),
    ]


def test_a_preempted_pod_group_is_the_schedulers_and_its_recreated_pods_are_the_next_attempt(conn, tmp_path):
    gone = _term("2026-03-01T10:01:00Z", "2026-03-01T11:00:00Z", 143, "Error")
    disrupted = {
        "conditions": [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "PreemptionByScheduler",
                "lastTransitionTime": "2026-03-01T10:59:50Z",
            }
        ]
    }
    old = _pod("llama-master-0", "gpu-001", "Master/0", [gone], "u1")
    old["status"]["conditions"].append(disrupted["conditions"][0])
    new = _pod(
        "llama-master-0",
        "gpu-003",
        "Master/0",
        [_term("2026-03-01T11:40:00Z", "2026-03-01T13:00:00Z", 0, "Completed")],
        "u9",
    )
    new["status"]["conditions"][-1]["lastTransitionTime"] = "2026-03-01T11:39:00Z"
    # a watch stream: each object as it changed, one JSON document after another
    path = tmp_path / "watch.json"
    path.write_text("\n".join(json.dumps(p, indent=4) for p in (old, new)))
    _ingest(conn, path)
    att = conn.execute(
        "SELECT attempt, start_ts, end_ts, state, exit_code, nodes FROM sacct_attempts ORDER BY 1"
    ).fetchall()
    assert att == [
        (1, datetime(2026, 3, 1, 10), datetime(2026, 3, 1, 11), "PREEMPTED", "0:15", ["gpu-001"]),
        (2, datetime(2026, 3, 1, 11, 39), datetime(2026, 3, 1, 13), "COMPLETED", "0:0", ["gpu-003"]),
    ]


def test_the_same_runs_in_two_snapshots_are_read_once(conn, tmp_path):
    done = _term("2026-03-01T10:01:00Z", "2026-03-01T11:00:00Z", 1, "Error")
    running = {"running": {"startedAt": "2026-03-01T11:20:00Z"}}
    early = _pod("llama-master-0", "gpu-001", "Master/0", [{"running": {"startedAt": "2026-03-01T10:01:00Z"}}], "u1")
    late = _pod("llama-master-0", "gpu-001", "Master/0", [done, running], "u1")
    (tmp_path / "a.json").write_text(json.dumps(early))
    (tmp_path / "b.json").write_text(json.dumps(late))
    _ingest(conn, tmp_path / "b.json")
    _ingest(conn, tmp_path / "a.json")  # an older snapshot ingested later: the terminated reading stands
    att = conn.execute("SELECT attempt, end_ts, state, exit_code FROM sacct_attempts ORDER BY 1").fetchall()
    assert att == [(1, datetime(2026, 3, 1, 11), "FAILED", "1:0"), (2, None, "RUNNING", None)]
    # each file's own reading stays a scheduler's: no log attempt segments
    assert conn.execute("SELECT count(*) FROM log_attempts").fetchone() == (0,)


@pytest.mark.parametrize(
    ("path", "job"),
    [
        ("var/log/pods/team-a_llama-master-0_5e518659-4437-8b62-7881-1f11eba6a53e/pytorch/3.log", "team-a/llama"),
        ("pods/training_gpt-1001-worker-12_5e518659-4437-8b62-7881-1f11eba6a53e/pytorch/0.log", "training/gpt-1001"),
        # JobSet: <jobset>-<replicatedjob>-<job index>-<pod index>-<generated>
        (
            "p/default_example-jobset-workers-0-0-x2277_2e9d0d20-18a2-4877-b03a-ddf0266e4528/c/0.log",
            "default/example-jobset",
        ),
        # the MPI launcher's batch Job (kueue#8471's pod name)
        ("p/default_pi-launcher-tntsp_2e9d0d20-18a2-4877-b03a-ddf0266e4528/mpi-launcher/1.log", "default/pi"),
        ("var/log/containers/llama-worker-0_team-a_pytorch-" + "ab" * 32 + ".log", "team-a/llama"),
        ("logs/1001.log", "1001"),
    ],
)
def test_a_container_logs_path_names_its_kubernetes_job(path, job):
    from synestra_cli.formats.training.joblog import job_id_from_name

    assert job_id_from_name(Path(path)) == job


def test_a_namespace_slash_name_job_id_works_in_every_command_and_with_a_cluster(tmp_path):
    from click.testing import CliRunner

    from synestra_cli.cli.main import cli

    first = _term("2026-03-01T10:01:00Z", "2026-03-01T11:00:00Z", 137, "OOMKilled")
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            _pod(
                "llama-master-0",
                "gpu-001",
                "Master/0",
                [first, {"running": {"startedAt": "2026-03-01T11:20:00Z"}}],
                "u1",
            )
        ],
    }
    path = tmp_path / "pods.json"
    path.write_text(json.dumps(doc))
    db = str(tmp_path / "s.duckdb")
    runner = CliRunner()
    assert runner.invoke(cli, ["ingest", str(path), "--db", db, "--cluster", "a100"]).exit_code == 0
    jobs = runner.invoke(cli, ["jobs", "--job", "team-a/llama", "--db", db, "--format", "json"])
    assert jobs.exit_code == 0, jobs.output
    attempts = json.loads(jobs.stdout)["attempts"]
    assert [a["job"] for a in attempts] == ["a100:team-a/llama"] * 2 and attempts[0]["state"] == "OUT_OF_MEMORY"
    for command in (["explain", "--format", "json"], ["tax-report", "--format", "json"], ["annotations"]):
        res = runner.invoke(cli, [command[0], "--job", "team-a/llama", "--db", db, *command[1:]])
        assert res.exit_code in (0, 6), (command, res.output)  # 6: a job with no log yet has nothing to explain
        assert "unknown job" not in res.output
