"""Job logs built line by line from real wording: appended attempts, missing times, year rollover,
job ids, failures, bad input."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import JOB_LOG_FORMATS, only_formats

from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.training import torch_failures
from synestra_cli.ingest import ingest_file


@pytest.fixture(autouse=True)
def only_job_logs(monkeypatch):
    only_formats(monkeypatch, JOB_LOG_FORMATS)


def it_line(ts: str | None, it: int, ms: float, tflops: float = 400.0) -> str:
    stamp = f"[{ts}] " if ts else ""
    return (
        f" {stamp}iteration {it:8d}/    1000 | consumed samples: {it * 128:12d} | elapsed time per iteration (ms): "
        f"{ms:.1f} | throughput per GPU (TFLOP/s/GPU): {tflops:.1f} | learning rate: 1.000000E-05 | "
        "global batch size:   128 | lm loss: 5.000000E+00 | loss scale: 1.0 | grad norm: 1.000 | "
        "number of skipped iterations:   0 | number of nan iterations:   0 |"
    )


def banner(ts: str) -> list[str]:
    return [
        "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8, "
        "pipeline-model-parallel size: 1",
        "time to initialize megatron (seconds): 41.250",
        f"[after megatron is initialized] datetime: {ts} ",
    ]


WATCHDOG = (
    "[rank{r}]:[E{md} {hms}.123456789 ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=5521, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, "
    "Timeout(ms)=600000) ran for {ran} milliseconds before timing out."
)

# Two attempts appended to one file (sbatch --open-mode=append): the first saves at 20, logs 30 and
# dies in a watchdog timeout; the second loads iteration 20 and logs 30 again.
APPENDED = [
    "SLURM_JOB_ID=4242",
    "SLURM_JOB_NAME=pretrain-7b",
    *banner("2025-03-01 10:00:45"),
    it_line("2025-03-01 10:02:00.000000", 10, 9500.0),
    it_line("2025-03-01 10:03:00.000000", 20, 6000.0),
    " [2025-03-01 10:03:01.000000] saving checkpoint at iteration      20 to /ckpt/gpt in torch_dist format",
    "  [2025-03-01 10:03:09.500000] successfully saved checkpoint from iteration      20 to /ckpt/gpt [ t 1/8, p 1/1 ]",
    "(min, max) time across ranks (ms):",
    "    save-checkpoint ................................: (8123.45, 8450.00)",
    it_line("2025-03-01 10:04:10.000000", 30, 6000.0),
    WATCHDOG.format(r=3, md="301", hms="10:15:10", ran=600500),
    "SLURM_JOB_ID=4242",
    "SLURM_JOB_NAME=pretrain-7b",
    *banner("2025-03-01 10:30:40"),
    " loading distributed checkpoint from /ckpt/gpt at iteration 20",
    "  successfully loaded checkpoint from /ckpt/gpt [ t 1/8, p 1/1 ] at iteration 20",
    it_line("2025-03-01 10:32:00.000000", 30, 9000.0),
    it_line("2025-03-01 10:33:00.000000", 40, 6000.0),
    " [2025-03-01 10:33:01.000000] saving checkpoint at iteration      40 to /ckpt/gpt in torch_dist format",
    "  [2025-03-01 10:33:02.000000] scheduled an async checkpoint save at iteration      40 to /ckpt/gpt",
    it_line("2025-03-01 10:34:00.000000", 50, 6000.0),
    "  [2025-03-01 10:34:30.000000] successfully saved checkpoint from iteration      40 to /ckpt/gpt [ t 1/8, p 1/1 ]",
    "slurmstepd: error: *** JOB 4242 ON gpu-001 CANCELLED AT 2025-03-01T10:40:00 DUE TO PREEMPTION ***",
    " [2025-03-01 10:40:20.000000] saving checkpoint at iteration      57 to /ckpt/gpt in torch_dist format",
    "[exiting program after receiving SIGTERM.] datetime: 2025-03-01 10:40:31 ",
]


def write(tmp_path: Path, lines: list[str], name: str = "4242.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def ingest(conn, path: Path, **options):
    report = ingest_file(conn, path, IngestOptions(**options))
    assert report.status == "loaded", report.error
    return report


def rows(conn, sql: str) -> list[tuple]:
    return conn.execute(sql).fetchall()


def test_appended_attempts_are_split_and_repeated_iterations_kept_per_attempt(conn, tmp_path):
    ingest(conn, write(tmp_path, APPENDED))
    assert rows(conn, "SELECT job_id, name, gpus FROM jobs") == [("4242", "pretrain-7b", 16)]  # world size
    assert rows(conn, "SELECT attempt, start_ts, end_ts, state FROM attempts ORDER BY attempt") == [
        (1, datetime(2025, 3, 1, 10, 0, 45), datetime(2025, 3, 1, 10, 15, 10, 123456), None),
        (2, datetime(2025, 3, 1, 10, 30, 40), datetime(2025, 3, 1, 10, 40, 31), None),
    ]
    assert rows(conn, "SELECT attempt, iteration, step_time_s FROM steps ORDER BY line") == [
        (1, 10, 9.5),
        (1, 20, 6.0),
        (1, 30, 6.0),
        (2, 30, 9.0),
        (2, 40, 6.0),
        (2, 50, 6.0),
    ]


def test_appended_attempts_checkpoints_with_timer_block_and_async_phases(conn, tmp_path):
    ingest(conn, write(tmp_path, APPENDED))
    got = rows(
        conn,
        "SELECT attempt, kind, iteration, start_ts, end_ts, is_async, phase, blocking_s, path "
        "FROM checkpoints ORDER BY line",
    )
    assert got == [
        (
            1,
            "save",
            20,
            datetime(2025, 3, 1, 10, 3, 1),
            datetime(2025, 3, 1, 10, 3, 9, 500000),
            False,
            None,
            8.45,
            "/ckpt/gpt",
        ),
        (
            2,
            "restore",
            20,
            datetime(2025, 3, 1, 10, 30, 40),
            datetime(2025, 3, 1, 10, 32),
            None,
            None,
            None,
            "/ckpt/gpt",
        ),
        (
            2,
            "save",
            40,
            datetime(2025, 3, 1, 10, 33, 1),
            datetime(2025, 3, 1, 10, 34, 30),
            True,
            "finalized",
            1.0,
            "/ckpt/gpt",
        ),
        # the exit-signal handler's save prints no end: the next later line dates it, its exit line (printed once
        # the save is done)
        (
            2,
            "save",
            57,
            datetime(2025, 3, 1, 10, 40, 20),
            datetime(2025, 3, 1, 10, 40, 31),
            False,
            None,
            11.0,
            "/ckpt/gpt",
        ),
    ]
    # the load lines have no time of their own: the restore is bounded by the timed lines around them
    # (the banner just before "loading", the step line just after "successfully loaded")
    assert rows(conn, "SELECT ts_precision FROM checkpoints ORDER BY line") == [
        ("exact",),
        ("bounded",),
        ("exact",),
        ("estimated",),
    ]


def test_appended_attempts_incidents_belong_to_their_attempt(conn, tmp_path):
    ingest(conn, write(tmp_path, APPENDED))
    got = rows(
        conn,
        "SELECT attempt, kind, rank, ts, logged_ts, json_extract_string(fields, '$.reason') "
        "FROM job_incidents ORDER BY line",
    )
    assert got == [
        (1, "nccl_timeout", 3, datetime(2025, 3, 1, 10, 5, 9, 623456), datetime(2025, 3, 1, 10, 15, 10, 123456), None),
        (2, "sigterm", None, datetime(2025, 3, 1, 10, 40), datetime(2025, 3, 1, 10, 40), "PREEMPTION"),
        (2, "sigterm", None, datetime(2025, 3, 1, 10, 40, 31), datetime(2025, 3, 1, 10, 40, 31), None),
    ]


def test_restart_without_banner_is_found_from_the_iteration_going_back(conn, tmp_path):
    lines = [
        it_line("2025-03-01 10:00:00", 10, 5000.0),
        it_line("2025-03-01 10:01:00", 20, 5000.0),
        it_line("2025-03-01 11:00:00", 10, 9000.0),
        it_line("2025-03-01 11:01:00", 20, 5000.0),
    ]
    ingest(conn, write(tmp_path, lines))
    assert rows(conn, "SELECT attempt, iteration FROM steps ORDER BY line") == [(1, 10), (1, 20), (2, 10), (2, 20)]
    assert rows(conn, "SELECT count(*) FROM attempts") == [(2,)]


def test_log_without_any_time_keeps_null_times_for_sacct_to_fill(conn, tmp_path):
    lines = [
        *banner("x")[:2],
        " loading distributed checkpoint from /ckpt at iteration 100",
        "  successfully loaded checkpoint from /ckpt [ t 1/1, p 1/1 ] at iteration 100",
        it_line(None, 110, 5000.0),
        " saving checkpoint at iteration     120 to /ckpt in torch_dist format",
        "  successfully saved checkpoint from iteration     120 to /ckpt [ t 1/1, p 1/1 ]",
        *banner("x")[:2],
        it_line(None, 110, 7000.0),
    ]
    ingest(conn, write(tmp_path, lines, "slurm-777.out"))
    assert rows(conn, "SELECT DISTINCT ts, ts_precision FROM steps") == [(None, "none")]
    assert rows(conn, "SELECT kind, iteration, start_ts, end_ts, ts_precision FROM checkpoints ORDER BY line") == [
        ("restore", 100, None, None, "none"),
        ("save", 120, None, None, "none"),
    ]
    assert rows(conn, "SELECT job_id, attempt, start_ts, end_ts FROM attempts ORDER BY attempt") == [
        ("777", 1, None, None),
        ("777", 2, None, None),
    ]


# Megatron as it prints itself (no launcher stamp): the load lines are undated; around them only
# `[after megatron is initialized]`, `[after model, optimizer, ... are built]` and the iteration lines
# carry a time, and model building lines sit between the first of them and "loading".
RAW_RESTORE = [
    "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8, "
    "pipeline-model-parallel size: 1",
    "[after megatron is initialized] datetime: 2025-03-01 10:31:10 ",
    "building GPT model ...",
    " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1379659776",
    " loading distributed checkpoint from /ckpt/gpt at iteration 20",
    "  successfully loaded checkpoint from /ckpt/gpt [ t 1/8, p 1/1 ] at iteration 20",
    "[after model, optimizer, and learning rate scheduler are built] datetime: 2025-03-01 10:32:05 ",
    "> building train, validation, and test datasets ...",
    "[before the start of training step] datetime: 2025-03-01 10:32:20 ",
    it_line("2025-03-01 10:33:20", 30, 6000.0),
]
SACCT = (
    "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES\n"
    "4242|pretrain|alice|COMPLETED|0:0|2025-03-01T10:30:00|2025-03-01T11:00:00|00:30:00|gpu-001|"
    "billing=1,cpu=1,gres/gpu=8,mem=1G,node=1\n"
)


def test_undated_restore_is_bounded_by_the_dated_lines_around_it(conn, tmp_path):
    ingest(conn, write(tmp_path, RAW_RESTORE))
    # began after [after megatron is initialized], ended by [after model ... are built]: 55 s, not 0
    assert rows(conn, "SELECT start_ts, end_ts, ts_precision FROM checkpoints_reconciled") == [
        (datetime(2025, 3, 1, 10, 31, 10), datetime(2025, 3, 1, 10, 32, 5), "bounded")
    ]


def test_undated_restore_without_a_dated_line_before_it_is_bounded_by_the_sacct_start(conn, tmp_path, monkeypatch):
    ingest(conn, write(tmp_path, [RAW_RESTORE[0], *RAW_RESTORE[2:]]))
    assert rows(conn, "SELECT ts_precision FROM checkpoints") == [("inferred",)]
    only_formats(monkeypatch, [*JOB_LOG_FORMATS, "sacct"])
    ingest(conn, write(tmp_path, SACCT.splitlines(), "sacct.txt"), format="sacct")
    assert rows(conn, "SELECT attempt, start_ts, end_ts, ts_precision FROM checkpoints_reconciled") == [
        (1, datetime(2025, 3, 1, 10, 30), datetime(2025, 3, 1, 10, 32, 5), "bounded")
    ]


def test_watchdog_glog_without_year_rolls_over_new_year(conn, tmp_path):
    lines = [
        it_line("2025-12-31 23:58:00.000000", 100, 5000.0),
        WATCHDOG.format(r=1, md="1231", hms="23:59:50", ran=600000),
        WATCHDOG.format(r=2, md="101", hms="00:00:10", ran=620000),
        it_line("2026-01-01 00:20:00.000000", 90, 9000.0),
    ]
    ingest(conn, write(tmp_path, lines), year=2031)  # the log's own dates win over --year
    assert rows(conn, "SELECT rank, logged_ts, ts FROM job_incidents ORDER BY line") == [
        (1, datetime(2025, 12, 31, 23, 59, 50, 123456), datetime(2025, 12, 31, 23, 49, 50, 123456)),
        (2, datetime(2026, 1, 1, 0, 0, 10, 123456), datetime(2025, 12, 31, 23, 49, 50, 123456)),
    ]


def test_rank_prefixed_tracebacks_are_one_incident_each_with_the_exception_line(conn, tmp_path):
    lines = [
        it_line("2025-03-01 10:00:00", 10, 5000.0),
        "[rank1]: Traceback (most recent call last):",
        "[rank5]: Traceback (most recent call last):",
        '[rank1]:   File "/workspace/pretrain_gpt.py", line 248, in <module>',
        '[rank5]:   File "/workspace/pretrain_gpt.py", line 248, in <module>',
        "[rank1]:     loss.backward()",
        "[rank1]: RuntimeError: CUDA error: uncorrectable ECC error encountered",
        "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "Traceback (most recent call last):",
        '  File "train.py", line 3, in <module>',
        "KeyError: 'tokens'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "train.py", line 5, in <module>',
        "ValueError: bad batch",
        "terminate called after throwing an instance of 'c10::Error'",
        "  what():  CUDA error: uncorrectable ECC error encountered",
    ]
    ingest(conn, write(tmp_path, lines))
    got = rows(conn, "SELECT kind, rank, message, ts_precision FROM job_incidents ORDER BY line")
    assert got == [
        ("cuda_error", 1, "RuntimeError: CUDA error: uncorrectable ECC error encountered", "inferred"),
        ("oom", 5, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "inferred"),
        ("python_exception", None, "ValueError: bad batch", "inferred"),
        ("cuda_error", None, "CUDA error: uncorrectable ECC error encountered", "inferred"),
    ]


@pytest.mark.parametrize(
    "name, content, option, expected",
    [
        ("slurm-123456_7.out", "", None, "123456_7"),
        ("slurm-123456.out", "", None, "123456"),
        ("98765.log", "", None, "98765"),
        ("98765.log", "SLURM_JOB_ID=55555\n", "11", "55555"),
        ("train.log", "", "4711", "4711"),
        ("train.log", "", None, "train"),
    ],
)
def test_job_id_from_content_option_or_file_name(conn, tmp_path, name, content, option, expected):
    path = tmp_path / name
    path.write_text(content + it_line("2025-03-01 10:00:00", 10, 5000.0) + "\n")
    ingest(conn, path, job_id=option)
    assert rows(conn, "SELECT DISTINCT job_id FROM steps") == [(expected,)]


def test_broken_framework_lines_are_rejects_and_unrelated_lines_are_not(conn, tmp_path):
    lines = [
        it_line("2025-03-01 10:00:00", 10, 5000.0),
        "hello from the launcher script",
        "%%%%%%%% ???",
        "Epoch 0: 100%|##########| 10/10",
        " [2025-03-01 10:01:00] iteration       20/    1000 | consumed samples:         2560 |",
        ':::MLLOG {"namespace": "", "time_ms": 1709183678851, "event_type": "POINT_IN',
        it_line("2025-03-01 10:02:00", 30, 5000.0),
    ]
    report = ingest(conn, write(tmp_path, lines))
    assert report.rejected == 2
    assert [(line, reason.split()[0]) for line, reason, _ in report.reject_samples] == [(5, "Megatron"), (6, "MLLOG")]
    assert rows(conn, "SELECT line FROM rejects ORDER BY line") == [(5,), (6,)]
    assert rows(conn, "SELECT iteration FROM steps ORDER BY line") == [(10,), (30,)]


def test_strict_mode_fails_the_file_and_writes_nothing(conn, tmp_path):
    lines = [
        it_line("2025-03-01 10:00:00", 10, 5000.0),
        " [2025-03-01 10:01:00] iteration       20/    1000 | consumed samples:         2560 |",
    ]
    report = ingest_file(conn, write(tmp_path, lines), IngestOptions(strict=True))
    assert report.status == "failed" and ":2:" in report.error
    assert rows(
        conn, "SELECT (SELECT count(*) FROM steps) + (SELECT count(*) FROM jobs) + (SELECT count(*) FROM sources)"
    ) == [(0,)]


def test_torchtitan_ansi_colours_and_current_checkpoint_wording(conn, tmp_path):
    esc = "\x1b"
    lines = [
        f"[rank0]:[titan] 2026-02-01 08:00:00,000 - root - INFO - {esc}[31mstep: 100  {esc}[32mloss:  3.2100"
        f"  {esc}[33mmemory: 40.00GiB(50.00%)  {esc}[34mtps: 12,345  {esc}[36mtflops: 400.10  "
        f"{esc}[35mmfu: 40.45%{esc}[39m",
        "[rank0]:[titan] 2026-02-01 08:00:00,100 - root - INFO - Staging the checkpoint.",
        "[rank0]:[titan] 2026-02-01 08:00:01,600 - root - INFO - Finished staging the checkpoint in 1.50 seconds.",
        "[rank0]:[titan] 2026-02-01 09:00:00,000 - root - INFO - Loading the checkpoint from "
        "./outputs/checkpoint/step-100.",
        "[rank0]:[titan] 2026-02-01 09:00:12,000 - root - INFO - Finished loading the checkpoint in 12.00 seconds.",
    ]
    ingest(conn, write(tmp_path, lines))
    assert rows(conn, "SELECT iteration, tokens_per_s, tflops_per_gpu, loss FROM steps") == [
        (100, 12345.0, 400.1, 3.21)
    ]
    got = rows(conn, "SELECT attempt, kind, iteration, is_async, phase, blocking_s FROM checkpoints ORDER BY line")
    assert got == [(1, "save", 100, True, "scheduled", 1.5), (2, "restore", 100, None, None, 12.0)]


def test_syslog_files_with_nccl_lines_are_not_claimed():
    head = (
        "Mar  1 10:00:00 gpu-001 kernel: [12345.678] NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus\n"
        "Mar  1 10:00:01 gpu-001 python[4242]: gpu-001:4242:4300 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : "
        "Got completion from peer 10.0.0.2<4000> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
    )
    assert torch_failures.sniff(head) == 0.0
    assert torch_failures.sniff(head.split("python[4242]: ")[1]) > 0


def test_deepspeed_steps_and_checkpoint_sequence(conn, tmp_path):
    pre = "[2025-03-25 18:20:{s},000] [INFO] "
    lines = [
        pre.format(s="00") + "[logging.py:96:log_dist] [Rank -1] DeepSpeed info: version=0.14.0, git-hash=unknown",
        pre.format(s="10") + "[logging.py:96:log_dist] [Rank 0] step=1000, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]",
        pre.format(s="11") + "[torch_checkpoint_engine.py:21:save] [Torch] Checkpoint global_step1000 is about to "
        "be saved!",
        pre.format(s="12") + "[engine.py:3488:_save_zero_checkpoint] Saving model checkpoint: "
        "/ckpt/global_step1000/zero_pp_rank_0_mp_rank_00_model_states.pt",
        pre.format(s="40") + "[torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step1000 is ready now!",
    ]
    report = ingest(conn, write(tmp_path, lines))
    assert report.format == "deepspeed"
    assert rows(conn, "SELECT iteration, ts FROM steps") == [(1000, datetime(2025, 3, 25, 18, 20, 10))]
    assert rows(conn, "SELECT kind, iteration, start_ts, end_ts, is_async, blocking_s, path FROM checkpoints") == [
        (
            "save",
            1000,
            datetime(2025, 3, 25, 18, 20, 11),
            datetime(2025, 3, 25, 18, 20, 40),
            False,
            29.0,
            "/ckpt/global_step1000/zero_pp_rank_0_mp_rank_00_model_states.pt",
        )
    ]


def test_ptl_verbose_save_is_stored_at_the_megatron_iteration_and_slurm_oom_is_an_incident(conn, tmp_path):
    lines = [
        "[NeMo I 2025-05-01 08:00:00 nemo_logging:393] Setting up trainer",
        "Epoch 0, global step 500: 'val_loss' reached 1.23456 (best 1.23456), saving model to "
        "'/ckpt/model-step=500.ckpt' as top 3",
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.0. Some of the step tasks have been OOM Killed.",
    ]
    ingest(conn, write(tmp_path, lines))
    # Lightning's global step as printed: no NeMo line of the same save to take another numbering from
    assert rows(conn, "SELECT kind, iteration, path FROM checkpoints") == [("save", 500, "/ckpt/model-step=500.ckpt")]
    assert rows(conn, "SELECT kind, json_extract_string(fields, '$.source') FROM job_incidents") == [("oom", "slurm")]


def test_every_reject_is_counted_but_only_the_first_twenty_are_sampled(conn, tmp_path):
    broken = " [2025-03-01 10:01:00] iteration       20/    1000 | consumed samples:         2560 |"
    report = ingest(conn, write(tmp_path, [it_line("2025-03-01 10:00:00", 10, 5000.0)] + [broken] * 25))
    assert report.rejected == 25 and len(report.reject_samples) == 20
    assert rows(conn, "SELECT rejected FROM sources") == [(25,)]


def test_every_rank_printing_steps_gives_one_rank_s_steps_and_no_false_restarts(conn, tmp_path):
    line = (
        "[rank{r}]:[titan] 2026-02-01 08:00:{s:02d},000 - root - INFO - step: {it}  loss:  3.0000  "
        "memory: 40.00GiB(50.00%)  tps: 1,000  tflops: 100.00  mfu: 10.00%"
    )
    lines = [line.format(r=r, s=it // 10, it=it) for it in (10, 20, 30) for r in (1, 0, 2)]
    ingest(conn, write(tmp_path, lines))
    assert rows(conn, "SELECT iteration FROM steps ORDER BY line") == [(10,), (20,), (30,)]
    assert rows(conn, "SELECT count(*) FROM attempts") == [(1,)]


def test_nemo2_progress_printer_steps_share_the_checkpoint_iteration_numbering(conn, tmp_path):
    # as in the Evo2 run whose checkpoint lines are in real_samples (max_steps=10)
    step = (
        "Training epoch 0, iteration {it}/9 | lr: 2e-05 | global_batch_size: 1 | global_step: {it} | "
        "reduced_train_loss: 1.37 | train_step_timing in s: {t}"
    )
    lines = [
        "[NeMo W 2025-06-18 21:57:03 rerun_state_machine:239] RerunStateMachine initialized in mode RerunMode.DISABLED",
        step.format(it=0, t=2.193),
        step.format(it=1, t=0.3513) + " | consumed_samples: 2",
        step.format(it=9, t=0.35) + " | consumed_samples: 10",
        "[NeMo I 2025-06-18 21:57:23 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 9 : "
        "Start time: 1750309040.832s : Save duration: 2.746s",
    ]
    report = ingest(conn, write(tmp_path, lines))
    assert report.format == "nemo"
    # undated progress lines: dated back from the save that follows (training stood at iteration 9 when it began,
    # 21:57:20.832 from its epoch start) at the printed step times
    save = datetime(2025, 6, 18, 21, 57, 20, 832000)
    assert rows(conn, "SELECT iteration, step_time_s, loss, ts_precision, ts FROM steps ORDER BY line") == [
        (0, 2.193, 1.37, "estimated", save - timedelta(seconds=8 * 0.35 + 0.3513)),
        (1, 0.3513, 1.37, "estimated", save - timedelta(seconds=8 * 0.35)),
        (9, 0.35, 1.37, "estimated", save),
    ]
    assert rows(conn, "SELECT iteration FROM checkpoints") == [(9,)]


def test_a_megatron_log_that_ended_before_its_first_iteration_is_still_megatron(conn, tmp_path):
    path = tmp_path / "4242.log"
    path.write_text(
        "[2026-11-02 00:05:00.000000] using world size: 16, data-parallel size: 2, context-parallel size: 1\n"
        "[2026-11-02 00:05:32.610048] [after megatron is initialized] datetime: 2026-11-02 00:05:32 \n"
        "[2026-11-02 00:06:51.902628] [after training is done] datetime: 2026-11-02 00:06:51 \n"
    )
    report = ingest_file(conn, path, IngestOptions())
    assert (report.status, report.format) == ("loaded", "megatron")
    assert conn.execute("SELECT job_id, attempt, start_ts FROM attempts").fetchall() == [
        ("4242", 1, datetime(2026, 11, 2, 0, 5))
    ]
