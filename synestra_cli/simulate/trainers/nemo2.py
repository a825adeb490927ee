"""The log of a NeMo 2 (PyTorch Lightning + Megatron-core) pre-training job, one launch at a time.

Real wording (NVIDIA/NeMo @ 8cfedd7, 2025-09; docs/simulator.md cites each):
- NeMo's logger `[NeMo I 2025-06-18 21:57:23 nemo_logging:393] msg` (utils/formatters/base.py: seconds only,
  every call through nemo_logging.py:393);
- the progress printer (lightning/pytorch/callbacks/progress_printer.py:140): `Training epoch 0, iteration
  {n-1}/{max_steps-1} | lr: … | global_batch_size: … | global_step: … | reduced_train_loss: … |
  train_step_timing in s: … | consumed_samples: …`, no time of its own, zero-based (iteration 9 is the
  10th step), its metrics averaged over log_interval except global_step;
- one save event is two checkpoints (save_top_k and save_last=True, ModelCheckpoint defaults) and, in
  async mode (MegatronStrategy ckpt_async_save=True, the default), each is announced by Lightning's
  `Epoch 0, global step 9: 'val_loss' reached … saving model to '….ckpt' as top 10`, NeMo's
  `Global Checkpoint Save : Rank: 0 : Iteration: 9 : Start time: …s : Save duration: …s` (io/pl.py:211,
  since 2025-02) and `Scheduled async checkpoint save for ….ckpt` (model_checkpoint.py:632), then
  finalized at a later step's end: `Successfully saved checkpoint from iteration       9 to …` (io/pl.py:222,
  since 2025-02) and `Async checkpoint save for step 10 (….ckpt) finalized successfully.`
  (model_checkpoint.py:657): the same save says iteration 9, global step 9 and step 10, as the real run in
  tests/data/real_samples/training/gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log does;
- a restore: Lightning's `Restoring states from the checkpoint path at …` / `Restored all states from the
  checkpoint at …` and NeMo's `Global Checkpoint Load : Rank : 0 : Start time : …s : Time spent in
  load_checkpoint: …s` (io/pl.py:298, since 2025-02);
- around the load, NeMo's own dated lines (both versions; the real NeMo-Run demo log in
  tests/data/real_samples/training/nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log):
  `Setting up optimizer with config OptimizerConfig(...)` (utils:302) as start-up ends, and, as the loops are
  restored mid-epoch, Lightning's warning through NeMo's logger `[NeMo W … nemo_logging:361]
  …/training_epoch_loop.py:161: You're resuming from a checkpoint that ended before the epoch ended and your
  dataloader is not resumable. …`;
- SIGTERM: PreemptionCallback `Received signal 15, initiating graceful stop` then, at the batch end,
  `Preemption detected, saving checkpoint and exiting` and a -last save (callbacks/preemption.py:67,87).
`trainer_version="previous"`: NeMo 2.0/2.1 (2024), before the Global Checkpoint and finalization lines.
"""

from __future__ import annotations

from synestra_cli.simulate.failures import Stacks, crash_lines
from synestra_cli.simulate.joblog import loss_at, lr_at
from synestra_cli.simulate.logfmt import parallelism
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, Checkpoint, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import (
    LaunchSteps,
    Out,
    from_lines,
    launch_steps,
    rank0,
    when,
)

NEMO = "/opt/NeMo"
STACKS = Stacks(
    train=[
        (
            "/workspace/pretrain.py",
            88,
            "<module>",
            "llm.pretrain(model, data, trainer, log=nemo_logger, resume=resume)",
        ),
        (f"{NEMO}/nemo/collections/llm/api.py", 150, "pretrain", "return train("),
        (f"{NEMO}/nemo/collections/llm/api.py", 107, "train", "trainer.fit(model, data)"),
        ("/usr/local/lib/python3.12/dist-packages/lightning/pytorch/loops/fit_loop.py", 216, "run", "self.advance()"),
        (f"{NEMO}/nemo/lightning/pytorch/strategies/megatron_strategy.py", 698, "training_step", "out = self.model("),
    ],
    cuda=[(f"{NEMO}/nemo/lightning/megatron_parallel.py", 330, "forward", "microbatch_outputs = step()")],
    data=[(f"{NEMO}/nemo/collections/llm/gpt/data/pre_training.py", 412, "__getitem__", "return self._dataset[idx]")],
    init=[
        (
            "/workspace/pretrain.py",
            88,
            "<module>",
            "llm.pretrain(model, data, trainer, log=nemo_logger, resume=resume)",
        ),
        (f"{NEMO}/nemo/lightning/_strategy_lib.py", 96, "init_parallel_ranks", "torch.cuda.set_device(local_rank)"),
    ],
)
GBS_PER_DP = 16


def nemo(us: int, msg: str, order: int = 0, level: str = "I", where: str = "nemo_logging:393") -> Out:
    return rank0(us, f"[NeMo {level} {when(us):%Y-%m-%d %H:%M:%S} {where}] {msg}", order)


RESUMING_MID_EPOCH = (
    "/usr/local/lib/python3.12/dist-packages/lightning/pytorch/loops/training_epoch_loop.py:161: You're resuming "
    "from a checkpoint that ended before the epoch ended and your dataloader is not resumable. This can cause "
    "unreliable results if further training is done. Consider using an end-of-epoch checkpoint or make your "
    "dataloader resumable by implementing the `state_dict` / `load_state_dict` interface."
)


def ckpt_name(tl: JobTimeline, it: int) -> str:
    """NeMo 2 recipes' filename `{model_name}--{val_loss:.2f}-{step}-{consumed_samples}` (step zero-based)."""
    gbs = parallelism(tl.spec)[2] * GBS_PER_DP
    return (
        f"/lustre/ckpt/{tl.spec.name}/checkpoints/megatron_gpt--val_loss={_val(it, tl):.2f}-step={it - 1}"
        f"-consumed_samples={it * gbs}.0"
    )


def _val(it: int, tl: JobTimeline) -> float:
    return loss_at(it, tl.spec.train_iters) + 0.05


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    ls = launch_steps(tl, x)
    current = render.trainer_version == "current"
    out = _startup(tl, x)
    if ls.restore is not None:
        out += _restore(tl, ls.restore, current)
    out += _steps(tl, ls)
    for c in ls.saves:
        out += _save(tl, ls, c, current, preempted=c.trigger == "preemption")
    out += _ending(tl, x, ls, render)
    return out


def _startup(tl: JobTimeline, x: Launch) -> list[Out]:
    world = len(tl.spec.hosts) * tl.spec.gpus_per_node
    return [
        rank0(x.start, "GPU available: True (cuda), used: True"),
        rank0(x.start, "TPU available: False, using: 0 TPU cores", 1),
        nemo(x.start, f"Experiments will be logged at /lustre/ckpt/{tl.spec.name}", 2),
        rank0(x.start, f"Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/{world}", 3),
    ] + (
        [
            nemo(
                x.init_end,
                "Setting up optimizer with config OptimizerConfig(optimizer='adam', lr=0.0003, min_lr=None, "
                "weight_decay=0.1, fp16=False, bf16=True, params_dtype=torch.bfloat16, use_distributed_optimizer=True)",
                -1,
            )
        ]
        if x.init_end is not None
        else []
    )


def _restore(tl: JobTimeline, r: Checkpoint, current: bool) -> list[Out]:
    path = ckpt_name(tl, r.iteration) + "-last"
    out = [rank0(r.start, f"Restoring states from the checkpoint path at {path}")]
    if current:
        d = (r.end - r.start) / US * 0.97  # the dist-checkpoint load; Lightning restores the loops after it
        out.append(
            nemo(
                r.end,
                f"Global Checkpoint Load : Rank : 0 : Start time : {r.start / US:.3f}s : "
                f"Time spent in load_checkpoint: {d:.3f}s",
            )
        )
    out.append(rank0(r.end, f"Restored all states from the checkpoint at {path}", 1))
    out.append(nemo(r.end, RESUMING_MID_EPOCH, 2, level="W", where="nemo_logging:361"))
    return out


def _steps(tl: JobTimeline, ls: LaunchSteps) -> list[Out]:
    """One progress line per log_interval steps, each metric averaged over the interval but global_step."""
    spec, n = tl.spec, tl.spec.log_interval
    gbs = parallelism(spec)[2] * GBS_PER_DP
    out = []
    for k in ls.every(n).tolist():
        lo = max(0, k - n + 1)
        its = ls.iteration[lo : k + 1].tolist()
        secs = float((ls.end[lo : k + 1] - ls.start[lo : k + 1]).sum()) / US / n
        it = its[-1]
        metrics = {
            "lr": sum(lr_at(i, spec.train_iters) for i in its) / n,
            "global_batch_size": float(gbs),
            "global_step": float(it - 1),
            "reduced_train_loss": sum(loss_at(i, spec.train_iters) for i in its) / n,
            "train_step_timing in s": secs,
            "consumed_samples": sum(i * gbs for i in its) / n,
        }
        text = f"Training epoch 0, iteration {it - 1}/{spec.train_iters - 1}" + "".join(
            f" | {key}: {int(v)}" if float(v).is_integer() else f" | {key}: {v:.4}" for key, v in metrics.items()
        )
        out.append((int(ls.end[k]), -2, text, 0))
    return out


def _save(tl: JobTimeline, ls: LaunchSteps, c: Checkpoint, current: bool, preempted: bool) -> list[Out]:
    """A save event: the top-k checkpoint then the -last one (a preemption saves -last only)."""
    it, path = c.iteration, ckpt_name(tl, c.iteration)
    parts = [path + "-last"] if preempted else [path, path + "-last"]
    span = (c.end - c.start) // len(parts)
    out: list[Out] = []
    if preempted:
        out.append(nemo(c.start, "Preemption detected, saving checkpoint and exiting"))
    else:
        v = _val(it, tl)
        out.append(
            rank0(
                c.start,
                f"Epoch 0, global step {it - 1}: 'val_loss' reached {v:.5f} (best {v:.5f}), saving model to "
                f"'{path}.ckpt' as top 10",
            )
        )
    for k, p in enumerate(parts):
        t0 = c.start + k * span
        t1 = c.end if k == len(parts) - 1 else t0 + span
        blocking = (t1 - t0) * 7 // 10  # the sharded write; then the context dump before it is scheduled
        if current:
            out.append(
                nemo(
                    t0 + blocking,
                    f"Global Checkpoint Save : Rank: 0 : Iteration: {it - 1} : Start time: {t0 / US:.3f}s : "
                    f"Save duration: {blocking / US:.3f}s",
                    1 + 2 * k,
                )
            )
        out.append(nemo(t1, f"Scheduled async checkpoint save for {p}.ckpt", 2 + 2 * k))
    if preempted:
        out.append(nemo(c.end, "Async checkpointing detected, waiting for it to complete", 5))
    return out + _finalized(ls, c, parts, current, at_once=preempted)


def _finalized(ls: LaunchSteps, c: Checkpoint, parts: list[str], current: bool, at_once: bool) -> list[Out]:
    """The background write is done by the end of the next step (or at once when waited for)."""
    later = ls.end[ls.start >= c.end]
    at = c.end if at_once or not len(later) else int(later[0])
    out: list[Out] = []
    for k, p in enumerate(parts):
        if current:
            out.append(
                nemo(at, f"Successfully saved checkpoint from iteration {c.iteration - 1:7d} to {p}.ckpt", 10 + 2 * k)
            )
        out.append(
            nemo(at, f"Async checkpoint save for step {c.iteration} ({p}.ckpt) finalized successfully.", 11 + 2 * k)
        )
    if current:
        out.append(nemo(at, f"Async finalization time took {(at - c.end) / US:.3f} s", 15))
    return out


def _ending(tl: JobTimeline, x: Launch, ls: LaunchSteps, render: Rendering) -> list[Out]:
    if x.state == "COMPLETED":
        end = max([c.end for c in ls.saves], default=x.last_progress)
        return [rank0(end, f"`Trainer.fit` stopped: `max_steps={tl.spec.train_iters}` reached.", 20)]
    if x.state == "PREEMPTED" and x.sigterm is not None:
        return [nemo(x.sigterm, "Received signal 15, initiating graceful stop")]
    if x.failure is None or x.failure.incident is None:
        return []
    return from_lines(tl, crash_lines(tl, x, STACKS, agent_line=False), render)
