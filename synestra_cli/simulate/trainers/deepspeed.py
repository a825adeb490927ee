"""The log of a DeepSpeed (ZeRO, bf16) job, one launch at a time.

Real wording (deepspeedai/DeepSpeed; docs/simulator.md cites each). The logger format is `[%(asctime)s]
[%(levelname)s] [%(filename)s:%(lineno)d:%(funcName)s] %(message)s` (utils/logging.py:39); log_dist adds
`[Rank 0] ` and is reported from its own line (`logging.py:96:log_dist` in 0.14, `logging.py:123:log_dist`
now), the real sample gh-mmr-2_deepspeed-log_dist-format.log shows the header. Steps are counted as
completed (`global_step1000` holds 1000 steps).
- previous (v0.14.0, 2024): a save is `[Torch] Checkpoint global_stepN is about to be saved!`,
  `Saving model checkpoint: …/global_stepN/mp_rank_00_model_states.pt` (engine.py:3336), `[Torch] Saving
  ….pt...` / `[Torch] Saved ….pt.` (torch_checkpoint_engine.py:21,23) for the model then the ZeRO
  optimizer states, `bf16_zero checkpoint saved …` (engine.py:3488) and `[Torch] Checkpoint global_stepN is
  ready now!` (torch_checkpoint_engine.py:33); a load `[Torch] Loading checkpoint from ….pt...` / `[Torch]
  Loaded checkpoint from ….pt.` (:27,29) and `loading 8 zero partition checkpoints for rank 0`
  (engine.py:2963);
- current (0.17.1 on: the ready and per-file lines are commented out, DeepNVMe update #7215): a save is only
  `… is about to be saved!` and `Saving model checkpoint: …` (engine.py:5263) when it starts, nothing when it
  ends; a load `[Torch] Begin Load checkpoint from ….pt...` / `[Torch] End Load checkpoint from ….pt...`.
- progress every steps_per_print: `step=10, skipped=0, lr=[…], mom=[(0.9, 0.95)]` (engine.py
  _report_progress) and the throughput timer's `epoch=0/micro_step=10/global_step=10,
  RunningAvgSamplesPerSec=…, CurrSamplesPerSec=…, MemAllocated=…GB, MaxMemAllocated=…GB` (timer.py:260).
"""

from __future__ import annotations

from synestra_cli.simulate.failures import Stacks, crash_lines
from synestra_cli.simulate.joblog import lr_at
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import Checkpoint, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import LaunchSteps, Out, from_lines, launch_steps, py_asctime, step_seconds

MDS = "/workspace/Megatron-DeepSpeed"
STACKS = Stacks(
    train=[
        (f"{MDS}/pretrain_gpt.py", 356, "<module>", "pretrain("),
        (f"{MDS}/megatron/training.py", 190, "pretrain", "iteration = train(forward_step_func,"),
        (f"{MDS}/megatron/training.py", 1237, "train", "train_step(forward_step_func,"),
        (f"{MDS}/megatron/training.py", 674, "train_step", "loss = model[0].train_batch(data_iter=data_iterator)"),
    ],
    cuda=[
        (
            "/usr/local/lib/python3.10/dist-packages/deepspeed/runtime/pipe/engine.py",
            388,
            "train_batch",
            "self._exec_schedule(sched)",
        )
    ],
    data=[(f"{MDS}/megatron/data/gpt_dataset.py", 386, "__getitem__", "sample = self.indexed_dataset.get(")],
    init=[
        (f"{MDS}/pretrain_gpt.py", 356, "<module>", "pretrain("),
        (f"{MDS}/megatron/initialize.py", 223, "_initialize_distributed", "get_accelerator().set_device(device)"),
    ],
)


def _where(current: bool) -> str:
    return "logging.py:123:log_dist" if current else "logging.py:96:log_dist"


def say(us: int, where: str, msg: str, order: int = 0, rank: str = "") -> Out:
    return us, order, f"[{py_asctime(us)}] [INFO] [{where}] {rank}{msg}", 0


def dist(us: int, msg: str, current: bool, order: int = 0, rank: int = 0) -> Out:
    return say(us, _where(current), msg, order, f"[Rank {rank}] ")


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    ls = launch_steps(tl, x)
    current = render.trainer_version == "current"
    version = "0.19.6" if current else "0.14.0"
    out = [
        dist(x.start, f"DeepSpeed info: version={version}, git-hash=unknown, git-branch=unknown", current, 0, -1),
        say(x.start, "comm.py:637:init_distributed", "cdb=None", 1),
        say(x.start, "comm.py:668:init_distributed", "Initializing TorchBackend in DeepSpeed with backend nccl", 2),
    ]
    if ls.restore is not None:
        out += _load(tl, ls.restore, current)
    out += _steps(tl, ls, current)
    for c in ls.saves:
        out += _save(tl, c, current)
    if x.failure is not None and x.failure.incident is not None:
        out += from_lines(tl, crash_lines(tl, x, STACKS, agent_line=False), render)
    return out


def _files(tl: JobTimeline, it: int) -> tuple[str, str]:
    d = f"/lustre/ckpt/{tl.spec.name}/global_step{it}"
    return f"{d}/mp_rank_00_model_states.pt", f"{d}/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"


def _save(tl: JobTimeline, c: Checkpoint, current: bool) -> list[Out]:
    model, optim = _files(tl, c.iteration)
    out = [
        dist(c.start, f"[Torch] Checkpoint global_step{c.iteration} is about to be saved!", current),
        dist(c.start, f"Saving model checkpoint: {model}", current, 1),
    ]
    if current:
        return out
    mid = c.start + (c.end - c.start) // 4
    return out + [
        say(c.start, "torch_checkpoint_engine.py:21:save", f"[Torch] Saving {model}...", 2),
        say(mid, "torch_checkpoint_engine.py:23:save", f"[Torch] Saved {model}."),
        say(mid, "torch_checkpoint_engine.py:21:save", f"[Torch] Saving {optim}...", 1),
        say(c.end, "torch_checkpoint_engine.py:23:save", f"[Torch] Saved {optim}."),
        say(c.end, "engine.py:3488:_save_zero_checkpoint", f"bf16_zero checkpoint saved {optim}", 1),
        say(
            c.end,
            "torch_checkpoint_engine.py:33:commit",
            f"[Torch] Checkpoint global_step{c.iteration} is ready now!",
            2,
        ),
    ]


def _load(tl: JobTimeline, r: Checkpoint, current: bool) -> list[Out]:
    model, optim = _files(tl, r.iteration)
    mid = r.start + (r.end - r.start) // 4
    zero = "loading 8 zero partition checkpoints for rank 0"
    if current:
        return [
            dist(r.start, f"[Torch] Begin Load checkpoint from {model}...", current),
            dist(mid, f"[Torch] End Load checkpoint from {model}...", current),
            say(mid, "engine.py:4650:_load_zero_checkpoint", zero, 1),
            dist(mid, f"[Torch] Begin Load checkpoint from {optim}...", current, 2),
            dist(r.end, f"[Torch] End Load checkpoint from {optim}...", current),
        ]
    return [
        say(r.start, "torch_checkpoint_engine.py:27:load", f"[Torch] Loading checkpoint from {model}..."),
        say(mid, "torch_checkpoint_engine.py:29:load", f"[Torch] Loaded checkpoint from {model}."),
        say(mid, "engine.py:2963:_load_zero_checkpoint", zero, 1),
        say(mid, "torch_checkpoint_engine.py:27:load", f"[Torch] Loading checkpoint from {optim}...", 2),
        say(r.end, "torch_checkpoint_engine.py:29:load", f"[Torch] Loaded checkpoint from {optim}."),
    ]


def _steps(tl: JobTimeline, ls: LaunchSteps, current: bool) -> list[Out]:
    idx = ls.every(tl.spec.log_interval)
    secs = step_seconds(ls, idx)
    batch = len(tl.spec.hosts) * tl.spec.gpus_per_node * 2  # train_batch_size
    timer = "timer.py:264:stop" if current else "timer.py:260:stop"
    out = []
    for k, sec in zip(idx.tolist(), secs.tolist(), strict=True):
        it, at = int(ls.iteration[k]), int(ls.end[k])
        lr = lr_at(it, tl.spec.train_iters)
        out.append(dist(at, f"step={it}, skipped=0, lr=[{lr}], mom=[(0.9, 0.95)]", current, -3))
        out.append(
            say(
                at,
                timer,
                f"epoch=0/micro_step={it}/global_step={it}, RunningAvgSamplesPerSec={batch / sec * 0.998}, "
                f"CurrSamplesPerSec={batch / sec}, MemAllocated=30.51GB, MaxMemAllocated=45.12GB",
                -2,
            )
        )
    return out
