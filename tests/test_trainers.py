"""One model of a save and a restore across trainers (issue 37 item 2, issue 35 class 3): one save however many
lines of how many frameworks announce it, the trainer's own numbering kept, loads with their durations, and the
times the lines do not print dated from those they do. Real samples where they exist, else the trainers' source
wording (each module cites it)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.explain.job import explain_job
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file

TRAINING = REAL_SAMPLES / "training"


def ingest(conn, path: Path) -> str:
    report = ingest_file(conn, path, IngestOptions())
    assert report.status == "loaded", report.error
    return report.format


def write(tmp_path: Path, lines: list[str], name: str = "4242.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def saves(conn) -> list[tuple]:
    return conn.execute(
        "SELECT kind, iteration, start_ts, end_ts, ts_precision FROM checkpoints ORDER BY line"
    ).fetchall()


@pytest.mark.parametrize(
    "name, it, start",
    [
        # the Trainer's line starts the save two minutes before DeepSpeed's own line
        ("gh-transformers-pr14946_hf-trainer-save-then-deepspeed.log", 2, datetime(2021, 12, 26, 19, 42, 0, 421000)),
        # the plain format: the Trainer's undated line, DeepSpeed's dated ones
        (
            "gh-transformers-pr27820_hf-save-plain-then-deepspeed-torch-engine.log",
            10,
            datetime(2023, 12, 12, 6, 20, 12, 261000),
        ),
    ],
)
def test_a_hugging_face_save_continued_by_deepspeed_is_one_save(conn, name, it, start):
    ingest(conn, TRAINING / name)
    ((kind, iteration, started, _end, _precision),) = saves(conn)
    assert (kind, iteration, started) == ("save", it, start)


# NeMo 2 (NVIDIA/NeMo @ 8cfedd7: io/pl.py, callbacks/model_checkpoint.py, progress_printer.py) with Lightning's
# ModelCheckpoint (verbose) and restore lines: one async save of the 150th step told by five lines in three
# numberings, and a restore whose lines but NeMo's carry no time.
NEMO = [
    "GPU available: True (cuda), used: True",
    "[NeMo I 2026-11-02 00:05:00 nemo_logging:393] Experiments will be logged at /ckpt/gpt",
    "Restoring states from the checkpoint path at "
    "/ckpt/gpt/checkpoints/gpt--val_loss=2.01-step=99-consumed_samples=3200.0-last",
    "[NeMo I 2026-11-02 00:05:41 nemo_logging:393] Global Checkpoint Load : Rank : 0 : Start time : 1793577900.500s : "
    "Time spent in load_checkpoint: 40.685s",
    "Restored all states from the checkpoint at "
    "/ckpt/gpt/checkpoints/gpt--val_loss=2.01-step=99-consumed_samples=3200.0-last",
    "Training epoch 0, iteration 109/1895 | lr: 0.0003 | global_batch_size: 32 | global_step: 109 | "
    "reduced_train_loss: 2.1 | train_step_timing in s: 6.1 | consumed_samples: 3520",
    "Training epoch 0, iteration 119/1895 | lr: 0.0003 | global_batch_size: 32 | global_step: 119 | "
    "reduced_train_loss: 2.1 | train_step_timing in s: 6.0 | consumed_samples: 3840",
    "Training epoch 0, iteration 149/1895 | lr: 0.0003 | global_batch_size: 32 | global_step: 149 | "
    "reduced_train_loss: 2.0 | train_step_timing in s: 6.0 | consumed_samples: 4800",
    "Epoch 0, global step 150: 'val_loss' reached 1.99000 (best 1.99000), saving model to "
    "'/ckpt/gpt/checkpoints/gpt--val_loss=1.99-step=149-consumed_samples=4800.0.ckpt' as top 10",
    "[NeMo I 2026-11-02 00:10:10 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 149 : "
    "Start time: 1793578205.000s : Save duration: 5.000s",
    "[NeMo I 2026-11-02 00:10:20 nemo_logging:393] Scheduled async checkpoint save for "
    "/ckpt/gpt/checkpoints/gpt--val_loss=1.99-step=149-consumed_samples=4800.0.ckpt",
    "Training epoch 0, iteration 159/1895 | lr: 0.0003 | global_batch_size: 32 | global_step: 159 | "
    "reduced_train_loss: 2.0 | train_step_timing in s: 6.0 | consumed_samples: 5120",
    "[NeMo I 2026-11-02 00:11:30 nemo_logging:393] Successfully saved checkpoint from iteration     149 to "
    "/ckpt/gpt/checkpoints/gpt--val_loss=1.99-step=149-consumed_samples=4800.0.ckpt",
    "[NeMo I 2026-11-02 00:11:30 nemo_logging:393] Async checkpoint save for step 150 "
    "(/ckpt/gpt/checkpoints/gpt--val_loss=1.99-step=149-consumed_samples=4800.0.ckpt) finalized successfully.",
]


def test_a_nemo_save_told_in_three_numberings_is_one_save_at_the_trainers_iteration(conn, tmp_path):
    assert ingest(conn, write(tmp_path, NEMO)) == "nemo"
    restore, save = saves(conn)
    epoch = datetime(1970, 1, 1)
    # the load: NeMo's epoch start, its stated duration; its step from the file name (NeMo's zero-based step)
    assert restore == (
        "restore",
        99,
        epoch + timedelta(seconds=1793577900.5),
        epoch + timedelta(seconds=1793577900.5 + 40.685),
        "exact",
    )
    # Lightning's "global step 150" and NeMo's "step 150" are Megatron-core's iteration 149: one save, blocking
    # from its start to the write scheduled, finalized later
    assert save[:3] == ("save", 149, epoch + timedelta(seconds=1793578205.0))
    blocking, phase = conn.execute("SELECT blocking_s, phase FROM checkpoints WHERE kind = 'save'").fetchone()
    assert blocking == pytest.approx(15.0) and phase == "finalized"
    # the progress lines carry no time: dated from the load's end at their printed step times
    first = conn.execute("SELECT ts, ts_precision FROM steps ORDER BY line LIMIT 1").fetchone()
    load_end = epoch + timedelta(seconds=1793577900.5 + 40.685)
    assert first == (load_end + timedelta(seconds=10 * 6.1), "estimated")


# torchtitan (pytorch/torchtitan @ b5bcd76: components/checkpointer/dcp.py, trainer.py): a load, the loop's start,
# steps without a step time, a periodic save and the final one "at last step".
TITAN = "[titan] 2026-02-01 08:{m:02d}:{s:02d},000 - root - INFO - {msg}"
TORCHTITAN = [
    TITAN.format(m=0, s=0, msg="Starting job: llama3 training"),
    TITAN.format(m=0, s=10, msg="Loading the checkpoint from ./outputs/checkpoint/step-500."),
    TITAN.format(m=0, s=40, msg="Finished loading the checkpoint in 30.00 seconds."),
    TITAN.format(m=0, s=41, msg="Training starts at step 501"),
    TITAN.format(
        m=1, s=41, msg="step: 510  loss:  3.0000  memory: 40.00GiB(50.00%)  tps: 1,000  tflops: 100.00  mfu: 10.00%"
    ),
    TITAN.format(
        m=2, s=41, msg="step: 520  loss:  3.0000  memory: 40.00GiB(50.00%)  tps: 1,000  tflops: 100.00  mfu: 10.00%"
    ),
    TITAN.format(m=2, s=41, msg="Saving the checkpoint."),
    TITAN.format(m=3, s=1, msg="Finished saving the checkpoint in 20.00 seconds."),
    TITAN.format(
        m=4, s=1, msg="step: 530  loss:  3.0000  memory: 40.00GiB(50.00%)  tps: 1,000  tflops: 100.00  mfu: 10.00%"
    ),
    TITAN.format(m=4, s=1, msg="Saving the checkpoint."),
    TITAN.format(m=4, s=1, msg="Saving a full checkpoint at last step, step 530."),
    TITAN.format(m=4, s=21, msg="Last step checkpoint completed in 20.00s"),
    TITAN.format(m=4, s=23, msg="Training completed"),
]


def test_torchtitan_final_save_is_final_and_steps_get_their_pace(conn, tmp_path):
    assert ingest(conn, write(tmp_path, TORCHTITAN)) == "torchtitan"
    got = saves(conn)
    assert [(k, i) for k, i, *_ in got] == [("restore", 500), ("save", 520), ("save", 530)]
    # the step time torchtitan does not print: 60 s per 10 steps (the first since "Training starts at step 501");
    # across the save, its 80 s less the save's 20 s
    assert conn.execute("SELECT iteration, step_time_s FROM steps ORDER BY line").fetchall() == [
        (510, pytest.approx(6.0)),
        (520, pytest.approx(6.0)),
        (530, pytest.approx(6.0)),
    ]
    triggers = {(c.kind, c.iteration): c.trigger for c in explain_job(conn, "4242").checkpoints}
    assert triggers[("save", 530)] == "final"


# DeepSpeed 0.17.1 on (deepspeedai/DeepSpeed @ edaa722: torch_checkpoint_engine.py, engine.py): a load in two files,
# a save announced at its start only.
DS = "[2025-03-25 18:{m:02d}:{s:02d},000] [INFO] [logging.py:123:log_dist] [Rank 0] {msg}"
DEEPSPEED = [
    DS.format(m=0, s=0, msg="DeepSpeed info: version=0.17.1, git-hash=unknown, git-branch=unknown"),
    DS.format(m=0, s=10, msg="[Torch] Begin Load checkpoint from /ckpt/global_step100/mp_rank_00_model_states.pt..."),
    DS.format(m=0, s=20, msg="[Torch] End Load checkpoint from /ckpt/global_step100/mp_rank_00_model_states.pt..."),
    DS.format(
        m=0,
        s=20,
        msg="[Torch] Begin Load checkpoint from /ckpt/global_step100/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt...",
    ),
    DS.format(
        m=0,
        s=50,
        msg="[Torch] End Load checkpoint from /ckpt/global_step100/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt...",
    ),
    DS.format(m=2, s=0, msg="step=110, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]"),
    DS.format(m=3, s=0, msg="step=120, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]"),
    DS.format(m=3, s=0, msg="[Torch] Checkpoint global_step120 is about to be saved!"),
    DS.format(m=3, s=0, msg="Saving model checkpoint: /ckpt/global_step120/mp_rank_00_model_states.pt"),
    DS.format(m=4, s=30, msg="step=130, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]"),
    DS.format(m=5, s=30, msg="step=140, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]"),
]


def test_deepspeed_loads_and_a_save_whose_end_no_line_prints(conn, tmp_path):
    assert ingest(conn, write(tmp_path, DEEPSPEED)) == "deepspeed"
    restore, save = saves(conn)
    assert restore == ("restore", 100, datetime(2025, 3, 25, 18, 0, 10), datetime(2025, 3, 25, 18, 0, 50), "exact")
    # the training was back by step 130's line less its 10 steps at the next line's pace (6 s): 30 s of save
    assert save == ("save", 120, datetime(2025, 3, 25, 18, 3), datetime(2025, 3, 25, 18, 3, 30), "estimated")


# MaxText with Orbax (google/orbax @ 3ff7b24: checkpoint_manager.py, checkpointer.py, path/atomicity.py): a load
# without an end line, MaxText's undated step lines with their seconds, a synchronous save.
ABSL = "I0608 20:{m:02d}:{s:02d}.000000 123567287061632 {where}] {msg}"
ORBAX = [
    ABSL.format(m=0, s=0, where="checkpointer.py:323", msg="Restoring checkpoint from /ckpt/checkpoints/749."),
    "completed step: 750, seconds: 16.000, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, "
    "total_weights: 196608, loss: 10.374",
    "completed step: 751, seconds: 6.000, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, "
    "total_weights: 196608, loss: 10.370",
    ABSL.format(m=1, s=0, where="checkpoint_manager.py:1527", msg="[process=0] Saving checkpoint at step 751"),
    ABSL.format(
        m=1,
        s=20,
        where="checkpoint_manager.py:1601",
        msg="[process=0][thread=MainThread][step=751] Finished synchronous save.",
    ),
]


def test_orbax_steps_are_dated_from_the_save_and_the_load_ends_at_the_first_step(conn, tmp_path):
    path = write(tmp_path, ["2026-06-08 20:00:00.000000: I maxtext/train.py:1] start", *ORBAX])
    assert ingest(conn, path) == "orbax_log"
    restore, save = saves(conn)
    t = datetime(2026, 6, 8, 20, 0, 0)
    assert save == ("save", 751, t + timedelta(minutes=1), t + timedelta(minutes=1, seconds=20), "exact")
    # steps back from the save's start (step 751 ended there), the load over when step 750 began
    assert conn.execute("SELECT iteration, ts FROM steps ORDER BY line").fetchall() == [
        (750, t + timedelta(seconds=54)),
        (751, t + timedelta(seconds=60)),
    ]
    assert restore == ("restore", 749, t, t + timedelta(seconds=38), "estimated")


def test_whole_records_of_one_length_are_not_taken_for_a_terminal_cut():
    from synestra_cli.formats import envelope

    fin = (
        "[NeMo I 2026-11-02 0{h}:01:24 nemo_logging:393] Async checkpoint save for step {s} "
        "(/ckpt/gpt/checkpoints/gpt--val_loss=1.94-step={i}-consumed_samples=52800.0-last.ckpt) finalized successfully."
    )
    step = "Training epoch 0, iteration {i}/1895 | lr: 4.078e-05 | global_step: {i} | train_step_timing in s: 6.114"
    lines = []
    for h, s in ((1, 1650), (2, 1800), (3, 1950), (4, 2100)):
        lines += [fin.format(h=h, s=s, i=s - 1), step.format(i=s + 9)]
    env = envelope.detect("\n".join(lines) + "\n")
    assert env is None or env.wrap_width == 0


def test_megatrons_older_save_wording_alone_is_a_megatron_save(conn, tmp_path):
    # checkpointing.py before May 2024 (and Megatron-DeepSpeed): `successfully saved checkpoint at iteration`,
    # here with no iteration line around it (a checkpoint converter's, or a log cut to its saves)
    lines = [
        " [2024-03-01 10:00:00] saving checkpoint at iteration    5000 to /workspace/model/345m",
        "  [2024-03-01 10:00:42] successfully saved checkpoint at iteration    5000 to /workspace/model/345m",
    ]
    assert ingest(conn, write(tmp_path, lines)) == "megatron"
    assert saves(conn) == [
        ("save", 5000, datetime(2024, 3, 1, 10, 0, 0), datetime(2024, 3, 1, 10, 0, 42), "exact"),
    ]
