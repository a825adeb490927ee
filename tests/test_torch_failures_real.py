"""Real PyTorch / NCCL / torchrun / Slurm failure logs: recognised without --format, and each failure an incident
with its rank, local rank, host, pid, exit code and what the code means."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file
from synestra_cli.ingest.plan import recognise

TRAINING = REAL_SAMPLES / "training"


def ingest(conn, name: str, **options):
    report = ingest_file(conn, TRAINING / name, IngestOptions(year=2025, **options))
    assert report.status == "loaded", report.error
    assert report.format == "torch_log"  # sniffed: no --format given
    assert report.rejected == 0, report.reject_samples
    return report


def incidents(conn) -> list[dict]:
    cols = ["kind", "rank", "ts", "ts_precision", "collective", "seq", "message", "fields"]
    got = conn.execute(f"SELECT {', '.join(cols)} FROM job_incidents ORDER BY line").fetchall()
    return [dict(zip(cols, r, strict=True)) | {"fields": json.loads(r[-1])} for r in got]


FAILURE_LOGS = sorted(
    p.name
    for p in TRAINING.iterdir()
    if p.name.startswith("gh-")
    and any(key in p.name for key in ("watchdog", "torchrun", "childfailed", "slurmstepd", "nccl-warn", "torchelastic"))
)


@pytest.mark.parametrize("name", FAILURE_LOGS)
def test_every_failure_log_is_recognised_without_format(name):
    assert recognise(TRAINING / name)[0].name in ("torch_log", "megatron")  # through a paste's envelope


@pytest.mark.parametrize(
    "name, rank, local_rank, pid, code, signal, when, precision",
    [
        # ChildFailedError's "Root Cause" block: global rank, host (an FQDN), its own time (no zone: --timezone)
        (
            "gh-cppo-6_childfailederror_sigkill.log",
            0,
            0,
            14750,
            -9,
            "SIGKILL",
            datetime(2025, 5, 21, 15, 43, 3),
            "exact",
        ),
        (
            "gh-llamafactory-7032_childfailederror_exitcode1.log",
            0,
            0,
            14661,
            1,
            None,
            datetime(2025, 2, 21, 20, 7, 38),
            "exact",
        ),
        # torch 1.9-2.0 python logging: no time, no global rank
        ("gh-colossalai-3514_torchrun-pylogging_exitcode-9.log", None, 3, 812917, -9, "SIGKILL", None, "none"),
        # torch 2.1-2.3 `[date] torch.distributed.elastic...: [ERROR]`
        (
            "gh-llama-856_torchrun-2.1-bracketed_exitcode-9.log",
            None,
            0,
            62498,
            -9,
            "SIGKILL",
            datetime(2023, 10, 13, 17, 40, 2, 544000),
            "exact",
        ),
        # torch 2.4+ glog `E1223 05:18:02.971000 3304089 .../api.py:882]`: no year in the line (--year 2025)
        (
            "gh-megatron-lm-1880_torchrun-glog_exitcode-11.log",
            None,
            0,
            3304209,
            -11,
            "SIGSEGV",
            datetime(2025, 12, 23, 5, 18, 2, 971000),
            "exact",
        ),
    ],
)
def test_torchrun_worker_failures_in_every_logger_generation(
    conn, name, rank, local_rank, pid, code, signal, when, precision
):
    ingest(conn, name)
    (failed,) = [i for i in incidents(conn) if i["kind"] == "worker_failed"]
    f = failed["fields"]
    assert (failed["rank"], f["local_rank"], f["pid"], f["exitcode"], f["signal"]) == (
        rank,
        local_rank,
        pid,
        code,
        signal,
    )
    assert (failed["ts"], failed["ts_precision"]) == (when, precision)


def test_exit_codes_say_what_they_mean(conn):
    ingest(conn, "gh-cppo-6_childfailederror_sigkill.log")
    (f,) = [i["fields"] for i in incidents(conn)]
    assert "OOM killer" in f["meaning"] and f["traceback"] == "Signal 9 (SIGKILL) received by PID 14750"
    assert f["root_cause"] is True and f["reported_by"] == "ChildFailedError"
    conn.execute("DELETE FROM job_incidents")
    ingest(conn, "gh-llamafactory-7032_childfailederror_exitcode1.log")
    (f,) = [i["fields"] for i in incidents(conn)]
    assert "Python exception" in f["meaning"] and f["traceback"] is None  # "To enable traceback see" is no traceback


def test_child_failed_host_is_normalised_and_the_fqdn_kept(conn):
    ingest(conn, "gh-llamafactory-7032_childfailederror_exitcode1.log")
    (f,) = [i["fields"] for i in incidents(conn)]
    assert (f["host"], f["fqdn"]) == ("iZl4v544jr5cejwaqci3xvZ", "iZl4v544jr5cejwaqci3xvZ")


def test_child_failed_time_is_read_in_the_given_zone(conn):
    ingest(conn, "gh-cppo-6_childfailederror_sigkill.log", timezone="Asia/Shanghai")
    (i,) = incidents(conn)
    assert i["ts"] == datetime(2025, 5, 21, 7, 43, 3)  # 15:43:03 +08:00


def test_the_launcher_traceback_is_not_a_worker_exception(conn):
    ingest(conn, "gh-cppo-6_childfailederror_sigkill.log")
    assert [i["kind"] for i in incidents(conn)] == ["worker_failed"]  # no python_exception for ChildFailedError


def test_slurmstepd_oom_kill_names_its_job_and_step(conn):
    ingest(conn, "gh-arjuna-52_slurmstepd-oom-kill-stepid-batch.log")
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("191",)]
    (oom,) = incidents(conn)
    assert oom["kind"] == "oom"
    assert oom["fields"] == {"source": "slurm", "oom_kill_events": 1, "job_id": "191", "step": "batch"}


def test_srun_out_of_memory_names_task_and_node(conn):
    ingest(conn, "gh-hafs-101_slurmstepd-oom-kill_srun-task-out-of-memory.log")
    assert conn.execute("SELECT job_id FROM jobs").fetchall() == [("3495064",)]
    got = incidents(conn)
    # the step's cancel after the OOM is how it ended (a job_end), not a SIGTERM of the scheduler's
    assert [(i["kind"], i["rank"]) for i in got] == [("oom", None), ("oom", 4), ("job_end", None)]
    assert (got[2]["fields"]["ended_by"], got[2]["fields"]["step"]) == ("cancelled", "0")
    assert got[0]["fields"]["step"] == "0"
    assert (got[1]["fields"]["host"], got[1]["fields"]["task"]) == ("Orion-01-01", 4)
    # the job's cancel time (Slurm prints it, with year, in the cluster's zone) dates the lines around it
    assert got[2]["ts"] == datetime(2021, 10, 27, 19, 35, 36) and got[2]["ts_precision"] == "exact"
    assert got[0]["ts_precision"] == "inferred"


@pytest.mark.parametrize(
    "name, rank, seq, op, pg, began",
    [
        # a launcher's `[PID] ` before `[rank0]:[E321 ...]`
        (
            "gh-llamafactory-7396_watchdog_pid-prefix.log",
            0,
            1580,
            "ALLREDUCE",
            "1",
            datetime(2025, 3, 21, 1, 57, 8, 348271),
        ),
        # only inside the C++ what(): `[PG 3 Rank 5] ... [Rank 5] Watchdog caught`
        ("gh-sglang-1693_what-watchdog_pg3-rank5.log", 5, 9141, "_ALLGATHER_BASE", "3", None),
        # Ray's `(RayWorkerWrapper pid=4009) [rank1]:` prefix; printed twice, one incident
        ("gh-vllm-6042_watchdog_ray-worker-prefix.log", 1, 158046, "GATHER", "1", None),
    ],
)
def test_watchdog_timeouts_behind_any_prefix(conn, name, rank, seq, op, pg, began):
    ingest(conn, name)
    first = incidents(conn)[0]
    assert (first["kind"], first["rank"], first["seq"], first["collective"], first["fields"]["pg"]) == (
        "nccl_timeout",
        rank,
        seq,
        op,
        pg,
    )
    assert first["ts"] == began


def test_watchdog_printed_again_in_the_exception_is_one_incident(conn):
    ingest(conn, "gh-vllm-6042_watchdog_ray-worker-prefix.log")
    got = incidents(conn)
    assert len(got) == 1
    assert (got[0]["fields"]["last_enqueued"], got[0]["fields"]["last_completed"]) == (158046, 158045)


def test_pid_prefixed_ranks_are_kept_apart(conn):
    ingest(conn, "gh-llamafactory-7396_watchdog_pid-prefix.log")
    got = incidents(conn)
    assert [(i["rank"], i["fields"]["last_completed"]) for i in got] == [(0, 1579), (4, None)]


def test_bare_nccl_net_ib_completion_error(conn):
    ingest(conn, "gh-nccl-902_nccl-warn-net-ib_bare-no-prefix.log")
    (i,) = incidents(conn)
    assert (i["kind"], i["fields"]["status"], i["fields"]["status_name"], i["fields"]["vendor_err"]) == (
        "nccl_error",
        12,
        "IBV_WC_RETRY_EXC_ERR",
        129,
    )


def test_nccl_socket_connect_failure_names_the_peer(conn):
    ingest(conn, "gh-nccl-tests-166_nccl-warn-socket-connect-failed.log")
    first = incidents(conn)[0]
    f = first["fields"]
    assert (f["host"], f["pid"], f["connect_to"], f["connect_port"], f["connect_error"]) == (
        "ubuntu",
        39964,
        "10.0.0.2",
        45763,
        "Software caused connection abort",
    )
