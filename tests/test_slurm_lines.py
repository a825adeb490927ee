"""Slurm's and srun's own lines inside a job's log (formats/training/slurm_lines.py, issue 35 class 2, issue 37 item 3):
read as how the attempt ended, the job id taken from them, and never a preemption unless Slurm says so."""

from __future__ import annotations

import json
from datetime import datetime

from conftest import REAL_SAMPLES

from synestra_cli.explain.triggers import preempted
from synestra_cli.formats import detect
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.ingest import ingest_file
from synestra_cli.signals.events import Incident
from synestra_cli.signals.scope import Attempt

TRAINING = REAL_SAMPLES / "training"


def incidents(conn) -> list[dict]:
    cols = ["kind", "rank", "ts", "ts_precision", "fields"]
    got = conn.execute(f"SELECT {', '.join(cols)} FROM job_incidents ORDER BY line").fetchall()
    return [dict(zip(cols, r, strict=True)) | {"fields": json.loads(r[-1])} for r in got]


def ingest(conn, name: str):
    report = ingest_file(conn, TRAINING / name, IngestOptions())
    assert report.status == "loaded", report.error
    assert report.rejected == 0
    return report


def test_a_node_failure_is_how_the_step_ended_and_names_the_failed_node(conn):
    name = "gh-m4-logs_srun-node-failure_step-cancelled-node-failure.log"
    assert detect(decode(read_head(TRAINING / name))).name == "torch_log"
    ingest(conn, name)
    # the file's name has no job id: the STEP line gives it
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("1943824",)]
    srun, stepd = incidents(conn)
    assert (srun["kind"], srun["fields"]["host"], srun["fields"]["ended_by"]) == (
        "job_end",
        "jean-zay-iam37",
        "node_failure",
    )
    # slurmstepd names the node it runs on (the reporter), not the one that failed
    assert (stepd["kind"], stepd["fields"]["node"], stepd["fields"]["ended_by"], stepd["fields"]["step"]) == (
        "job_end",
        "jean-zay-iam17",
        "node_failure",
        "0",
    )
    assert "host" not in stepd["fields"]
    assert stepd["ts"] == datetime(2023, 3, 6, 3, 17, 51) and stepd["ts_precision"] == "exact"
    assert srun["ts_precision"] == "inferred"  # srun's line has no time: the cancel's dates it


def test_a_requeue_is_a_job_end_not_a_sigterm(conn):
    ingest(conn, "sherlock-docs_slurmstepd-job-requeue.log")
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("31182239",)]
    (req,) = incidents(conn)
    assert (req["kind"], req["fields"]["ended_by"], req["fields"]["node"]) == ("job_end", "requeue", "sh-06-34")


def test_a_time_limit_on_the_job_and_its_step(conn):
    ingest(conn, "gh-zetta-utils-671_slurmstepd-time-limit_job-and-step.log")
    got = incidents(conn)
    assert [(i["kind"], i["fields"]["ended_by"], i["fields"]["entity"], i["fields"]["step"]) for i in got] == [
        ("job_end", "time_limit", "job", None),
        ("job_end", "time_limit", "step", "0"),
    ]
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("494583",)]


# Wordings from Slurm's source (slurmstepd/req.c, srun/launch.c, slurmstepd/mgr.c's `slurmstepd-<node>` name) and
# an old daemon's (`*** JOB N CANCELLED AT ... *** on node`), in one log without a job id in its name.
VARIANTS = [
    "slurmstepd-gpu-001: error: *** JOB 88123 ON gpu-001 CANCELLED AT 2025-03-01T10:40:00 DUE TO PREEMPTION ***",
    "slurmstepd: error: *** STEP 88123.0 ON gpu-001 CANCELLED AT 2025-03-01T11:40:01 DUE TO TASK FAILURE ***",
    "srun: error: gpu-002: task 12: Terminated",
    "srun: error: gpu-002: tasks 8-15: Exited with exit code 1",
    "srun: error: gpu-003: task 20: Segmentation fault (core dumped)",
    "slurmstepd: error: *** JOB 88123 ON gpu-001 CANCELLED AT 2025-03-01T12:40:00 DUE to SIGNAL Terminated ***",
    "slurmstepd: error: *** JOB 88123 ON gpu-001 FAILED (non-zero exit code or other failure mode) ***",
    "slurmstepd: *** JOB 88123 CANCELLED AT 2025-03-01T13:40:47 *** on gpu-004",
]


def test_every_wording_is_read_with_what_ended_it(conn, tmp_path):
    path = tmp_path / "job.out"
    path.write_text("\n".join(VARIANTS) + "\n", encoding="utf-8")
    assert ingest_file(conn, path, IngestOptions()).status == "loaded"
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("88123",)]
    got = [(i["kind"], i["fields"].get("ended_by"), i["rank"], i["fields"].get("signal")) for i in incidents(conn)]
    assert got == [
        ("sigterm", "preemption", None, None),  # the scheduler's preemption: the only SIGTERM among them
        ("job_end", "task_failure", None, None),
        ("task_exit", "task_exit", 12, "SIGTERM"),
        ("task_exit", "task_exit", 8, None),
        ("task_exit", "task_exit", 20, "SIGSEGV"),
        ("job_end", "signal", None, None),
        ("job_end", "failed", None, None),
        ("job_end", "cancelled", None, None),
    ]
    old = incidents(conn)[-1]["fields"]
    assert old["node"] == "gpu-004"


def _att(state: str | None) -> Attempt:
    return Attempt(1, datetime(2025, 3, 1), datetime(2025, 3, 1, 1), state, None, ())


def _inc(kind: str, message: str = "", ended_by: str | None = None, signal: str | None = None) -> Incident:
    return Incident(
        1,
        datetime(2025, 3, 1, 0, 30),
        None,
        kind,
        None,
        None,
        None,
        message,
        None,
        None,
        None,
        signal=signal,
        ended_by=ended_by,
    )


def test_a_preemption_only_when_the_scheduler_says_so():
    slurm = _inc("sigterm", "*** JOB 1 ON n CANCELLED AT 2025-03-01T00:30:00 DUE TO PREEMPTION ***", "preemption")
    agent = _inc("sigterm", "Received Signals.SIGTERM death signal")
    assert preempted(_att("PREEMPTED"), [])
    assert preempted(_att(None), [slurm])
    assert preempted(_att("NODE_FAIL"), [slurm])  # Slurm's own preemption line stands
    # torchrun's agent getting SIGTERM after a node failure, a requeue, or a crash is no preemption
    assert not preempted(_att(None), [agent, _inc("job_end", ended_by="node_failure")])
    assert not preempted(_att(None), [agent, _inc("job_end", ended_by="requeue")])
    assert not preempted(_att(None), [agent, _inc("cuda_error")])
    assert not preempted(_att(None), [agent, _inc("worker_failed", signal="SIGKILL")])
    assert not preempted(_att("NODE_FAIL"), [agent])
    assert not preempted(_att("REQUEUED"), [agent])
    # a SIGTERM alone (no sacct, nothing failed) is the scheduler's, as it always was
    assert preempted(_att(None), [agent])
    assert preempted(_att(None), [agent, _inc("worker_failed", signal="SIGTERM")])
