"""The simulator's trainers, launchers and Slurm lines (issue 37): each writes its real wording, torchrun's
in-place restarts keep the truth's buckets exact, and the default rendering is today's, byte for byte.

Each wording is checked against a real line: the samples in tests/data/real_samples/training (their
PROVENANCE.md), or the source's format string where docs/simulator.md cites it. No simulation here is
larger than one job (fast tier).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from synestra_cli.errors import InputError
from synestra_cli.simulate.jobs import simulate_job
from synestra_cli.simulate.model import Cause, Disturbance, JobSpec, Rendering
from synestra_cli.simulate.sacct import sacct_lines
from synestra_cli.simulate.scenarios import simulate
from synestra_cli.simulate.timeline import US, to_us
from synestra_cli.simulate.trainers import check, job_log_lines
from synestra_cli.simulate.truth import BUCKETS, buckets_us, job_truth

REAL = Path(__file__).resolve().parent / "data" / "real_samples" / "training"
T0 = datetime(2026, 3, 1, 8, 0, 0)
XID79 = Cause("gpu.fell_off_bus", ("gpu-002",), "gpu3", T0 + timedelta(minutes=60))
SOFT = Cause("software.crash", ("gpu-001",), None, T0 + timedelta(minutes=60))
BASE = JobSpec(
    job_id="4242",
    name="gpt-8b",
    user="alice",
    hosts=tuple(f"gpu-{i:03d}" for i in range(1, 5)),
    gpus_per_node=8,
    submit=T0,
    start=T0,
    train_iters=1500,
    time_limit_s=86_400,
    step_s=4.0,
    save_every=250,
    save_s=20.0,
    restore_s=40.0,
    startup_s=90.0,
    requeue_s=120.0,
)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def lost_gpu(minutes: float = 60) -> Disturbance:
    """Xid 79: the hung collective until the watchdog, the GPU gone until the node's reboot."""
    return Disturbance(
        "crash",
        at(minutes),
        hang_s=600.0,
        incident="nccl_timeout",
        rank=11,
        cause=XID79,
        lost_until=at(minutes + 40),
        lost_error="invalid device ordinal",
    )


def exception(minutes: float = 60) -> Disturbance:
    return Disturbance("crash", at(minutes), hang_s=2.0, incident="python_exception", rank=0, cause=SOFT)


def timeline(*ds: Disturbance, **kw):
    return simulate_job(replace(BASE, disturbances=ds, **kw), np.random.default_rng(5))


def log(tl, **render) -> list[str]:
    return job_log_lines(tl, Rendering(**render))


def one(lines: list[str], pattern: str) -> str:
    hits = [ln for ln in lines if re.search(pattern, ln)]
    assert hits, f"no line matches {pattern!r}"
    return hits[0]


def shape(line: str) -> str:
    """A line with its numbers, times and paths blanked: two lines of the same wording have one shape."""
    line = re.sub(r"/\S+", "P", line)
    return re.sub(r" +", " ", re.sub(r"\d+(?:[.,:]\d+)*", "9", line))  # padding widths vary with the number


def real(name: str, pattern: str) -> str:
    return one((REAL / name).read_text(encoding="utf-8").splitlines(), pattern)


# --------------------------------------------------------------------------- trainers' wording


def test_nemo2_one_save_is_announced_by_lightning_and_nemo_with_its_zero_based_numbering():
    lines = log(timeline(exception()), trainer="nemo2")
    sample = "gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log"
    for pattern in ("Global Checkpoint Save : Rank", "Scheduled async checkpoint save for", "finalized successfully"):
        assert shape(one(lines, pattern)) == shape(real(sample, pattern))
    assert shape(one(lines, "Successfully saved checkpoint from iteration")) == shape(
        real(sample, "Successfully saved checkpoint from iteration")
    )
    # the save after 250 steps: iteration 249, global step 249, step 250, as the real run prints 9 and 10
    assert one(lines, r"Iteration: 249 :").startswith("[NeMo I 2026-03-01 ")
    assert one(lines, r"Epoch 0, global step 249: 'val_loss' reached .* as top 10")
    assert one(lines, r"Async checkpoint save for step 250 \(")
    assert one(lines, r"^Training epoch 0, iteration 249/1499 \| lr: .* \| global_step: 249 \| ")
    assert one(lines, r"^Restoring states from the checkpoint path at ")
    assert one(lines, r"Global Checkpoint Load : Rank : 0 : Start time : \d+\.\d{3}s : Time spent in load_checkpoint")
    assert one(lines, r"^Restored all states from the checkpoint at ")


def test_nemo2_previous_has_no_global_checkpoint_lines():
    lines = log(timeline(exception()), trainer="nemo2", trainer_version="previous")
    assert not [ln for ln in lines if "Global Checkpoint" in ln or "Successfully saved" in ln]
    assert one(lines, "Scheduled async checkpoint save for")


def test_torchtitan_steps_saves_and_loads_in_both_wordings():
    tl = timeline(exception())
    now = log(tl, trainer="torchtitan", launcher="torchrun")
    before = log(tl, trainer="torchtitan", trainer_version="previous")
    step_2026 = real("gh-torchtitan-pr3393_steps_with-grad_norm.log", "step: 22")
    step_2025 = real("gh-torchtitan-pr1287_steps_and_checkpoint_async.log", "step: 10 ")
    colourless = re.sub(r"\x1b\[[0-9;]*m", "", one(now, r"step: 250 "))
    assert shape(colourless) == shape(step_2026)
    assert "\x1b[31mstep: " in one(now, r"step: 250 ")  # torchtitan colours by default
    assert shape(one(before, r"step: 250 ")) == shape(step_2025.removeprefix("[rank0]:"))
    assert one(now, r"^\[rank0\]:\[titan\] 2026-03-01 \d\d:\d\d:\d\d,\d{3} - root - INFO - Saving the checkpoint\.$")
    assert one(now, r"Finished saving the checkpoint in \d+\.\d\d seconds\.$")
    assert one(now, r"Saving a full checkpoint at last step, step 1500\.$")
    assert one(now, r"Last step checkpoint completed in \d+\.\d\ds$")
    assert one(now, r"Loading the checkpoint from /lustre/ckpt/gpt-8b/checkpoint/step-\d+\.$")
    assert one(now, r"Training starts at step \d+1$")
    real_save = real("gh-torchtitan-pr1287_steps_and_checkpoint_async.log", "Finished saving")
    assert shape(one(before, "Finished saving")) == shape(real_save.removeprefix("[rank0]:"))
    assert one(before, r"Loading the checkpoint at step \d+\.$")
    assert not [ln for ln in before if "Last step checkpoint completed" in ln]


def test_deepspeed_save_ends_are_logged_by_0_14_and_not_by_current_releases():
    tl = timeline(exception())
    old, new = log(tl, trainer="deepspeed", trainer_version="previous"), log(tl, trainer="deepspeed")
    header = real("gh-mmr-2_deepspeed-log_dist-format.log", "DeepSpeed info")
    assert shape(one(old, "DeepSpeed info")) == shape(header)
    assert one(
        old, r"\[logging\.py:96:log_dist\] \[Rank 0\] \[Torch\] Checkpoint global_step250 is about to be saved!$"
    )
    assert one(old, r"Saving model checkpoint: /lustre/ckpt/gpt-8b/global_step250/mp_rank_00_model_states\.pt$")
    assert one(old, r"\[torch_checkpoint_engine\.py:33:commit\] \[Torch\] Checkpoint global_step250 is ready now!$")
    assert one(old, r"\[Torch\] Loading checkpoint from .*model_states\.pt\.\.\.$")
    assert not [ln for ln in new if "is ready now" in ln or "[Torch] Saved" in ln]
    assert one(new, r"\[logging\.py:123:log_dist\] \[Rank 0\] \[Torch\] Begin Load checkpoint from ")
    assert one(new, r"\[Rank 0\] step=250, skipped=0, lr=\[")
    assert one(new, r"\[timer\.py:264:stop\] epoch=0/micro_step=250/global_step=250, RunningAvgSamplesPerSec=")


def test_hf_trainer_explicit_format_dicts_and_resume():
    lines = log(timeline(exception()), trainer="hf_trainer")
    # transformers' enable_explicit_format(): "[%(levelname)s|%(filename)s:%(lineno)s] %(asctime)s >> %(message)s"
    save = one(lines, r"Saving model checkpoint to /lustre/ckpt/gpt-8b/checkpoint-250$")
    assert re.fullmatch(r"\[INFO\|trainer\.py:4309\] 2026-03-01 \d\d:\d\d:\d\d,\d{3} >> Saving .*", save)
    assert one(lines, r"^\{'loss': \d+\.\d+, 'grad_norm': [\d.]+, 'learning_rate': [\d.e-]+, 'epoch': [\d.]+\}$")
    assert one(lines, r">> Loading model from /lustre/ckpt/gpt-8b/checkpoint-\d+\.$")
    assert one(lines, r"\[INFO\|trainer\.py:2551\] .* >>   Continuing training from global step \d+$")
    assert one(lines, r"^ *\d+%\|[█▏▎▍▌▋▊▉ ]{10}\| \d+/1500 \[\d\d:\d\d<")


def test_orbax_absl_saves_and_maxtext_steps_are_zero_based():
    lines = log(timeline(exception()), trainer="orbax")
    sample = real("gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log", "Saving checkpoint at step")
    ours = one(lines, r"Saving checkpoint at step 249$")
    assert shape(ours) == shape(sample)
    assert one(lines, r"Finished saving checkpoint \(finalized tmp dir\) to `/lustre/ckpt/gpt-8b/checkpoints/249`\.$")
    assert one(lines, r"^completed step: 249, seconds: \d+\.\d{3}, TFLOP/s/device: ")
    assert one(lines, r"checkpointer\.py:323\] Restoring checkpoint from /lustre/ckpt/gpt-8b/checkpoints/\d+\.$")
    assert one(lines, r"jaxlib\.xla_extension\.XlaRuntimeError: |IndexError: ")
    with pytest.raises(InputError, match="not torchrun"):
        check(Rendering(trainer="orbax", launcher="torchrun"))


# --------------------------------------------------------------------------- torchrun and in-place restarts


def test_torchrun_restarts_a_lost_gpu_in_place_until_it_gives_up():
    tl = timeline(lost_gpu(), elastic_restarts=3)
    first = [x for x in tl.launches if x.attempt == 1]
    assert len(first) == 4 and [a.state for a in tl.attempts] == ["FAILED", "COMPLETED"]
    # sacct shows one attempt for the four launches
    alloc = [ln for ln in sacct_lines([tl]) if ln.startswith("4242|")]
    assert [ln.split("|")[3] for ln in alloc] == ["FAILED", "COMPLETED"]
    lines = log(tl, trainer="megatron", launcher="torchrun")
    fails = [ln for ln in lines if "Worker group FAILED" in ln]
    assert [re.search(r"(\d)/3 attempts left", ln).group(1) for ln in fails] == ["3", "2", "1"]
    assert all(ln.endswith("will restart worker group") for ln in fails)
    assert re.match(
        r"I0301 \d\d:\d\d:\d\d\.\d{3}000 \d+ torch/distributed/elastic/agent/server/api\.py:\d+\] \[default\]", fails[0]
    )
    assert one(lines, r"\[rank11\]: RuntimeError: CUDA error: invalid device ordinal$")
    block = "\n".join(lines)
    assert "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n" in block
    root = block[block.index("Root Cause (first observed failure):") :]
    assert re.search(r"  host      : gpu-002\n  rank      : 11 \(local_rank: 3\)\n  exitcode  : 1 \(pid: \d+\)", root)
    real_root = real("gh-cppo-6_childfailederror_sigkill.log", "Root Cause")
    assert real_root in block
    assert one(lines, r"Starting elastic_operator with launch configs:$")
    assert one(lines, r"\]   max_restarts     : 3$")


def test_in_place_restarts_are_one_sacct_attempt_and_the_buckets_still_partition_the_wall_time():
    tl = timeline(exception(50), exception(120), elastic_restarts=3)
    assert len(tl.attempts) == 1 and len(tl.launches) == 3
    b, _ = buckets_us(tl)
    assert sum(b.values()) == tl.attempts[-1].end - tl.attempts[0].start
    assert b["requeue"] == 0 and b["lost_work"] > 0 and b["hang"] > 0
    truth = job_truth(tl)
    assert set(truth["buckets_us"]) == set(BUCKETS)
    restarts = truth["restarts"]
    assert [r["in_place"] for r in restarts] == [True, True]
    keys = ["attempt", "in_place", "fault_at", "noticed_at", "ended_at", "restarted_at", "startup_end"]
    assert list(restarts[0]) == [*keys, "load_start", "load_end", "first_step_start"]
    r = restarts[0]
    stages = [r[k] for k in ("fault_at", "noticed_at", "ended_at", "restarted_at", "startup_end", "load_start")]
    assert stages == sorted(stages) and r["load_end"] < r["first_step_start"]
    restore = next(c for c in truth["checkpoints"] if c["kind"] == "restore")
    assert (restore["start"], restore["end"], restore["trigger"]) == (r["load_start"], r["load_end"], "restart")


def test_a_requeue_is_a_restart_with_its_stages_too():
    tl = timeline(lost_gpu())
    (r,) = job_truth(tl)["restarts"]
    assert not r["in_place"] and r["attempt"] == 2
    gap = to_us(datetime.fromisoformat(r["restarted_at"][:-1])) - to_us(datetime.fromisoformat(r["ended_at"][:-1]))
    assert gap == buckets_us(tl)[0]["requeue"] > 100 * US


# --------------------------------------------------------------------------- Slurm's own lines


def test_slurm_lines_for_a_task_failure_and_a_self_requeue():
    tl = timeline(exception(), self_requeue=True)
    assert [a.state for a in tl.attempts] == ["REQUEUED", "COMPLETED"]
    lines = log(tl, trainer="torchtitan", slurm_lines=True)
    # src/srun/launch.c _task_finish; src/slurmd/slurmstepd/req.c (TASK FAILURE since 25.05)
    assert one(lines, r"^srun: error: gpu-001: task 0: Exited with exit code 1$")
    assert one(lines, r"^srun: Terminating StepId=4242\.0$")
    assert one(
        lines,
        r"^slurmstepd: error: \*\*\* STEP 4242\.0 ON gpu-001 CANCELLED AT 2026-03-01T\S+ DUE TO TASK FAILURE \*\*\*$",
    )
    assert one(lines, r"^srun: error: gpu-002: tasks 8-15: Terminated$")
    assert one(lines, r"^slurmstepd: error: \*\*\* JOB 4242 ON gpu-001 CANCELLED AT .* DUE TO JOB REQUEUE \*\*\*$")
    old = log(tl, trainer="torchtitan", slurm_lines=True, trainer_version="previous")
    assert one(old, r"^srun: launch/slurm: _step_signal: Terminating StepId=4242\.0$")
    assert one(old, r"^slurmstepd: error: \*\*\* STEP 4242\.0 ON gpu-001 CANCELLED AT \S+ \*\*\*$")


def test_srun_label_prefixes_task_lines_not_sruns_own():
    tl = timeline(exception(), self_requeue=True)
    lines = log(tl, trainer="torchtitan", slurm_lines=True, srun_label=True)
    assert one(lines, r"^ 0: \[titan\] ")  # 32 tasks: ids padded to two places (write_labelled_message.c)
    assert one(lines, r"^ 0: slurmstepd: error: \*\*\* STEP 4242\.0 ")
    assert one(lines, r"^srun: error: gpu-001: task 0: Exited with exit code 1$")


def test_node_failure_scenario_prints_slurms_node_failure_and_sacct_node_fail(tmp_path):
    simulate(tmp_path, "gpu-fell-off-bus-reboot", seed=3, nodes=8, hours=3, telemetry=False, trainer="nemo2")
    text = (tmp_path / "exports" / "jobs" / "1001.log").read_text()
    assert re.search(r"^srun: error: Node failure on gpu-00\d$", text, re.M)
    assert re.search(
        r"^slurmstepd: error: \*\*\* JOB 1001 ON gpu-001 CANCELLED AT \S+ DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR "
        r"DETAILS \*\*\*$|^srun: error: Node failure on gpu-001$",
        text,
        re.M,
    )
    assert "Watchdog caught" not in text.split("Node failure on")[0].splitlines()[-1]
    sacct = (tmp_path / "exports" / "sacct.txt").read_text()
    assert "|NODE_FAIL|" in sacct


# --------------------------------------------------------------------------- today's rendering unchanged

# sha256 of the job logs and sacct.txt of
# `simulate(out, "gpu-fell-off-bus", seed=7, nodes=8, hours=3, telemetry=False)`, taken on main before the
# trainers and launchers were added (85d4ce6).
BEFORE = {
    "jobs/1001.log": "eaed409ac890d106aaaa51e2c052f3916049cc1284797d11f8c892458c5d0869",
    "jobs/1002.log": "a88fc132f51bcf6d3db045f51e915302bac126e067bc744335c014560046e4a2",
    "sacct.txt": "4a342feb34e59420009cf07557cc56fbbba41996a238f8d5d85011afd97eba91",
}


def digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_default_rendering_is_byte_identical_to_before(tmp_path):
    simulate(tmp_path, "gpu-fell-off-bus", seed=7, nodes=8, hours=3, telemetry=False)
    assert digests(tmp_path / "exports") == BEFORE
