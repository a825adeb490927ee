"""Every real training-job log sample ingests, and its rows say what the log says."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import JOB_LOG_FORMATS, REAL_DATA, REAL_SAMPLES, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

TRAINING = REAL_SAMPLES / "training"
MLPERF = REAL_DATA / "mlperf-training-v4.0"
# (a plain Python traceback pasted from a Markdown doc is no job log: refused, tests/test_envelope.py)
NOT_JOB_LOGS = {"gh-saforem2-mmm-docs_markdown-indented-6_rank-traceback_mpiexec.log"}
JOB_LOGS = sorted(p for p in TRAINING.iterdir() if p.name.startswith("gh-") and p.name not in NOT_JOB_LOGS) + sorted(
    MLPERF.glob("*.txt")
)


@pytest.fixture(autouse=True)
def only_job_logs(monkeypatch):
    """Detection among the job-log formats alone: other parsers' bugs must not fail these tests."""
    only_formats(monkeypatch, JOB_LOG_FORMATS)


def ingest(conn, path: Path, **options):
    report = ingest_file(conn, path, IngestOptions(year=2025, **options))
    assert report.status == "loaded", report.error
    assert report.rejected == 0, report.reject_samples
    return report


def rows(conn, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def steps(conn) -> list[tuple]:
    return rows(
        conn,
        "SELECT attempt, iteration, ts, ts_precision, step_time_s, tflops_per_gpu, tokens_per_s, loss "
        "FROM steps ORDER BY line",
    )


def checkpoints(conn) -> list[tuple]:
    return rows(
        conn,
        "SELECT kind, iteration, start_ts, end_ts, is_async, phase, blocking_s, path FROM checkpoints ORDER BY line",
    )


def incidents(conn) -> list[tuple]:
    return rows(
        conn,
        "SELECT kind, rank, collective, seq, timeout_ms, ran_for_ms, ts, logged_ts, ts_precision, fields "
        "FROM job_incidents ORDER BY line",
    )


@pytest.mark.parametrize("path", JOB_LOGS, ids=lambda p: p.name[:40])
def test_every_sample_ingests_as_one_job_with_one_attempt(conn, path):
    report = ingest(conn, path)
    assert report.rows > 0
    assert rows(conn, "SELECT count(*), count(DISTINCT job_id) FROM jobs") == [(1, 1)]
    assert rows(conn, "SELECT attempt FROM attempts") == [(1,)]


def test_megatron_iteration_lines_with_launcher_seconds(conn):
    report = ingest(conn, TRAINING / "gh-megatron-lm-756_iteration-lines_ts-seconds.log")
    assert report.format == "megatron"
    assert steps(conn) == [
        (1, 43, datetime(2024, 4, 6, 2, 59, 36), "exact", pytest.approx(5.4449), 239.8, None, pytest.approx(1.825991)),
        (1, 44, datetime(2024, 4, 6, 2, 59, 41), "exact", pytest.approx(5.5338), 236.0, None, pytest.approx(1.875063)),
        (1, 45, datetime(2024, 4, 6, 2, 59, 47), "exact", pytest.approx(5.7186), 228.4, None, pytest.approx(1.834162)),
    ]
    assert rows(conn, "SELECT start_ts, end_ts FROM attempts") == [
        (datetime(2024, 4, 6, 2, 59, 36), datetime(2024, 4, 6, 2, 59, 47))
    ]


def test_megatron_local_launcher_times_are_converted_to_utc(conn):
    ingest(conn, TRAINING / "gh-megatron-lm-756_iteration-lines_ts-seconds.log", timezone="Europe/Berlin")
    assert rows(conn, "SELECT min(ts) FROM steps") == [(datetime(2024, 4, 6, 0, 59, 36),)]  # CEST = UTC+2


def test_old_megatron_without_timestamps_keeps_times_null(conn):
    ingest(conn, TRAINING / "gh-epfllm-megatron-llm-11_iteration-lines_no-timestamp.log")
    got = steps(conn)
    assert [(s[1], s[2], s[3], s[5]) for s in got] == [(i, None, "none", None) for i in (201, 202, 203, 204)]
    assert [s[4] for s in got] == pytest.approx([139.1134, 139.2214, 140.3469, 140.1979])
    assert rows(conn, "SELECT start_ts, end_ts FROM attempts") == [(None, None)]


def test_megatron_progress_txt_gives_job_id_gpus_and_the_checkpoint(conn):
    ingest(conn, TRAINING / "gh-swiss-ai-megatron-pr46_progress-txt.log")
    assert rows(conn, "SELECT job_id, gpus FROM jobs") == [("198424", 8)]
    assert checkpoints(conn) == [("save", 100, datetime(2025, 2, 24, 17, 35, 3), None, True, "scheduled", None, None)]
    assert [(s[1], s[5]) for s in steps(conn)] == [(100, 364.8)]


def test_megatron_checkpoint_load_line_is_a_restore_at_its_iteration(conn):
    ingest(conn, TRAINING / "gh-dlrover-977_megatron-loading-checkpoint.log")
    (ck,) = rows(conn, "SELECT kind, iteration, start_ts, ts_precision, path FROM checkpoints")
    # the line has no time of its own: it began after the DLRover logger line before it (its lower bound)
    assert ck == ("restore", 100, datetime(2024, 2, 1, 17, 58, 59, 451000), "bounded", "/nas/megatron_gpt/")


def test_torchtitan_steps_with_rank_prefix_and_thousands_separators(conn):
    report = ingest(conn, TRAINING / "gh-torchtitan-pr1287_steps_and_checkpoint_async.log")
    assert report.format == "torchtitan"
    got = steps(conn)
    assert [s[1] for s in got] == [10, 20, 30, 40, 800, 810, 820]
    # torchtitan prints no step time: the time since the step line before, per step (13.847 s for 10 steps)
    assert got[1][2:] == (
        datetime(2025, 6, 25, 12, 56, 9, 436000),
        "exact",
        pytest.approx(1.3847),
        342.67,
        5917.0,
        8.5802,
    )
    assert got[0][4] is None  # the first: no line before it in the log to measure from


def test_torchtitan_async_checkpoints_staged_then_saved_by_the_checkpoint_process(conn):
    ingest(conn, TRAINING / "gh-torchtitan-pr1287_steps_and_checkpoint_async.log")
    assert checkpoints(conn) == [
        # step-1: request received 12:55:37, the checkpoint process done at 12:56:46
        (
            "save",
            1,
            None,
            datetime(2025, 6, 25, 12, 56, 46, 74000),
            True,
            "finalized",
            None,
            "./outputs/checkpoint/step-1",
        ),
        # step 800: staged in 0.02 s right after the step line (the trainer's own lines: 0.021 s), handed to the
        # checkpoint process (which receives it 1.7 s later, while the trainer already trains), not yet done
        (
            "save",
            800,
            datetime(2025, 6, 25, 13, 20, 46, 458000),
            datetime(2025, 6, 25, 13, 20, 46, 479000),
            True,
            "scheduled",
            pytest.approx(0.021),
            "./outputs/checkpoint/step-800",
        ),
    ]


def test_torchtitan_2026_step_lines_with_grad_norm(conn):
    ingest(conn, TRAINING / "gh-torchtitan-pr3393_steps_with-grad_norm.log")
    assert [(s[1], s[6], s[7]) for s in steps(conn)] == [
        (22, 7094.0, 2.91027),
        (23, 7062.0, 2.92318),
        (24, 7007.0, 3.01353),
        (25, 7064.0, 2.89023),
    ]


def test_nemo_async_saves_are_stored_with_megatron_iterations(conn):
    report = ingest(conn, TRAINING / "gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log")
    assert report.format == "nemo"
    got = checkpoints(conn)
    assert [(c[0], c[1], c[4], c[5]) for c in got] == [("save", 9, True, "finalized"), ("save", 4, True, "finalized")]
    it9, it4 = got
    # "Global Checkpoint Save ... Start time: 1750309040.832s : Save duration: 2.746s" logged 21:57:23: the epoch start
    # (04:57:20.832 UTC) in the log's own clock (7 h behind: no --timezone given), to the millisecond; the training
    # was blocked until NeMo scheduled the write, 21:57:35 (the context dump follows the sharded write)
    assert it9[2] == datetime(2025, 6, 18, 21, 57, 20, 832000) and it9[6] == pytest.approx(14.168)
    # finalised six minutes later: "Async checkpoint save for step 10 ... finalized" = iteration 9
    assert it9[3] == datetime(2025, 6, 18, 22, 3, 28)
    assert it4[2] is None and it4[3] == datetime(2025, 6, 18, 22, 3, 5)


def test_nemo_save_start_matches_its_epoch_start_time_in_the_logs_zone(conn):
    ingest(conn, TRAINING / "gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log", timezone="America/Los_Angeles")
    (start,) = rows(conn, "SELECT start_ts FROM checkpoints WHERE iteration = 9")[0]
    epoch_start = datetime(1970, 1, 1) + timedelta(seconds=1750309040.832)  # "Start time: 1750309040.832s"
    assert abs((start - epoch_start).total_seconds()) < 1


def test_deepspeed_dist_format_log_is_one_attempt_without_rows_it_does_not_have(conn):
    report = ingest(conn, TRAINING / "gh-mmr-2_deepspeed-log_dist-format.log")
    assert report.format == "deepspeed"
    assert rows(conn, "SELECT start_ts, end_ts FROM attempts") == [
        (datetime(2025, 3, 25, 18, 12, 45, 948000), datetime(2025, 3, 25, 18, 13, 1, 143000))
    ]
    assert steps(conn) == [] and checkpoints(conn) == []


def test_orbax_absl_save_with_year_from_the_option(conn):
    report = ingest(conn, TRAINING / "gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log")
    assert report.format == "orbax_log"
    assert checkpoints(conn) == [
        (
            "save",
            19,
            datetime(2025, 6, 8, 20, 54, 47, 918725),
            datetime(2025, 6, 8, 20, 54, 47, 918797),
            True,
            "scheduled",
            pytest.approx(0.000072),
            "/dev/shm/goodput/SYNTHETIC_TEST/checkpoints/19",
        )
    ]


def test_watchdog_2024_glog_header_shifts_the_incident_back_by_ran_for(conn):
    report = ingest(conn, TRAINING / "gh-llamafactory-6269_nccl-watchdog-timeout_reduce-scatter.log")
    assert report.format == "torch_log"
    got = incidents(conn)
    assert [(i[0], i[1], i[2], i[3], i[4], i[5]) for i in got] == [
        ("nccl_timeout", 0, "_REDUCE_SCATTER_BASE", 7753, 600000, 600061),
        ("nccl_timeout", 4, "_REDUCE_SCATTER_BASE", 7753, 600000, 600099),
        ("nccl_timeout", 3, "_REDUCE_SCATTER_BASE", 7753, 600000, 600089),
    ]
    first = got[0]
    assert first[7] == datetime(2025, 12, 6, 18, 44, 12, 715298)
    assert first[6] == first[7] - timedelta(milliseconds=600061)
    assert json.loads(first[9])["last_completed"] == 7752  # the companion line folded in
    assert json.loads(got[2][9])["last_completed"] is None  # rank 3 printed none


def test_watchdog_2025_pg_guid_variant_without_time(conn):
    ingest(conn, TRAINING / "gh-basicsr-737_nccl-watchdog_pg-guid-variant.log")
    got = incidents(conn)
    assert [(i[1], i[3], i[5], i[8]) for i in got] == [(1, 808, 600020, "exact"), (0, 808, 600030, "exact")]
    assert got[0][7] == datetime(2025, 6, 26, 6, 24, 44, 903881)
    assert json.loads(got[0][9]) | {} == {
        "pg": "0",
        "numel_in": 9801523,
        "numel_out": 9801523,
        "last_enqueued": 811,
        "last_completed": 807,
    }


def test_watchdog_torch1_without_timestamp(conn):
    ingest(conn, TRAINING / "gh-ofa-271_nccl-watchdog_old-torch-no-timestamp.log")
    got = incidents(conn)
    assert [(i[1], i[3], i[4], i[5], i[6], i[8]) for i in got] == [
        (1, 469508, 1800000, 1802212, None, "none"),
        (3, 469508, 1800000, 1802211, None, "none"),
        (2, 469508, 1800000, 1802212, None, "none"),
    ]


def test_watchdog_glued_to_a_progress_bar_is_found(conn):
    ingest(conn, TRAINING / "gh-pytorch-118369_nemo-ptl-progressbar-then-watchdog.log")
    assert [(i[1], i[3], i[5]) for i in incidents(conn)] == [
        (0, 96120, 25624887),
        (0, 96117, 25625613),
        (7, 64088, 25625251),
    ]


@pytest.mark.parametrize(
    "name, status, name_of_status, direction",
    [
        ("gh-nccl-1405_nccl-warn-net-ib-completion-status12.log", 12, "IBV_WC_RETRY_EXC_ERR", "Recv"),
        ("gh-nccl-928_nccl-warn-net-ib_old-format-error4.log", 4, "IBV_WC_LOC_PROT_ERR", "Send"),
    ],
)
def test_nccl_warn_net_ib_completion_errors_carry_their_status(conn, name, status, name_of_status, direction):
    ingest(conn, TRAINING / name)
    got = incidents(conn)
    assert [i[0] for i in got] == ["nccl_error", "nccl_error"]  # the NCCL INFO "-> 6" trail is not an incident
    fields = json.loads(got[0][9])
    assert (fields["status"], fields["status_name"], fields["direction"]) == (status, name_of_status, direction)


def test_nccl_info_only_log_ingests_without_incidents(conn):
    ingest(conn, TRAINING / "gh-pytorch-58155_nccl-info-channel-lines.log")
    assert incidents(conn) == []


def test_torch_elastic_restart_python_logging_generation(conn):
    ingest(conn, TRAINING / "gh-mmdetection-6779_torchelastic-restart_pylogging-format.log")
    failed, inc = incidents(conn)
    # the worker's failure the agent reports first, then its restart of the group
    assert failed[0] == "worker_failed"
    assert {k: json.loads(failed[9])[k] for k in ("local_rank", "pid", "exitcode", "signal")} == {
        "local_rank": 0,
        "pid": 5534,
        "exitcode": 1,
        "signal": None,
    }
    assert inc[0] == "elastic_restart"
    assert json.loads(inc[9]) == {"role": "default", "state": "FAILED", "attempts_left": 2, "max_restarts": 3}


@pytest.mark.parametrize(
    "name, signal, logged",
    [
        (
            "gh-pytorch-114097_torchelastic-sigterm_glog-format.log",
            "Signals.SIGTERM",
            datetime(2025, 8, 23, 16, 54, 2, 337000),
        ),
        (
            "gh-nvidia-resiliency-ext-18_torchelastic-glog-format_2025.log",
            "15",
            datetime(2025, 2, 27, 17, 39, 41, 936000),
        ),
    ],
)
def test_torch_elastic_sigterm_glog_generations(conn, name, signal, logged):
    ingest(conn, TRAINING / name)
    got = incidents(conn)
    assert got and {i[0] for i in got} == {"sigterm"}
    assert {json.loads(i[9])["signal"] for i in got} == {signal}
    assert got[0][7] == logged


def test_mlperf_gpt3_restore_from_init_checkpoint_step(conn):
    report = ingest(conn, MLPERF / "NVIDIA__eos_n64_ngc24.04_nemo__gpt3__result_0.txt")
    assert report.format == "mlperf"
    assert rows(conn, "SELECT name FROM jobs") == [("gpt3",)]
    (ck,) = checkpoints(conn)
    assert ck[:2] == ("restore", 2667)
    assert 285 < ck[6] < 295  # first of 512 init_start -> init_stop: start-up incl. the load (~291 s)


def test_mlperf_maxtext_restore_and_attempt_span(conn):
    ingest(conn, MLPERF / "Google__cloud-tpu-v5p-1024-maxtext__gpt3__result_0.txt")
    assert checkpoints(conn) == [
        (
            "restore",
            3000,
            datetime(2024, 2, 29, 5, 14, 39, 41000),
            datetime(2024, 2, 29, 5, 16, 38, 92000),
            None,
            None,
            pytest.approx(119.051),
            None,
        )
    ]
    (start, end) = rows(conn, "SELECT start_ts, end_ts FROM attempts")[0]
    assert start == datetime(2024, 2, 29, 5, 14, 38, 851000) and end > start + timedelta(hours=1)


def test_mlperf_with_launcher_stdout_reads_tracked_stats_and_nemo_restore(conn):
    ingest(conn, MLPERF / "Dell__XE9680x8H100-SXM-80GB__llama2_70b_lora__result_0.txt")
    assert rows(conn, "SELECT name FROM jobs") == [("llama2_70b_lora",)]
    got = rows(conn, "SELECT iteration, ts, samples_per_s FROM steps ORDER BY line")
    assert [g[0] for g in got] == [1536, 1920, 2304, 2688, 3072]
    assert got[0][1] == datetime(2024, 4, 24, 21, 46, 32, 582000) and got[0][2] == pytest.approx(1.9597043)
    # NeMo "Loading distributed checkpoint" (no time: the line before's, 21:30:47) .. "successfully restored"
    (ck,) = rows(conn, "SELECT kind, start_ts, end_ts, ts_precision, blocking_s, path FROM checkpoints")
    assert ck == (
        "restore",
        datetime(2024, 4, 24, 21, 30, 47),
        datetime(2024, 4, 24, 21, 32, 8),
        "bounded",
        None,
        "/ckpt",
    )


@pytest.mark.parametrize("doc", [TRAINING / "PROVENANCE.md", MLPERF / "PROVENANCE.md"], ids=["training", "mlperf"])
def test_a_readme_quoting_log_lines_is_not_taken_for_a_log(conn, doc):
    report = ingest_file(conn, doc, IngestOptions())
    assert report.status == "failed" and "unknown format" in report.error
