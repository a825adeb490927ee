"""The log of a torchtitan job, one launch at a time.

Real wording (pytorch/torchtitan; docs/simulator.md cites each):
- the logger `[titan] %(asctime)s - %(name)s - %(levelname)s - %(message)s` (tools/logging.py:20), milliseconds
  after a comma; torchrun's `--local-ranks-filter 0 --role rank --tee 3` (run_train.sh) puts `[rank0]:` in
  front, plain srun does not;
- the step line every log_freq steps (components/metrics.py:528), steps counted from 1 as completed: current
  `step: 20  loss:  8.58020  grad_norm:  0.5926  memory: …GiB(…%)  tps: 5,917  tflops: 342.67  mfu: 34.65%`
  with its ANSI colours (metrics.disable_color_printing defaults to False); previous (2025, the real sample
  gh-torchtitan-pr1287) `step: 20  loss:  8.5802  memory: …  tps: …  tflops: …  mfu: …`, no grad_norm;
- saves: current `Saving the checkpoint.` / `Finished saving the checkpoint in 12.34 seconds.`
  (checkpointer/dcp.py:433,490), at the last step `Saving a full checkpoint at last step, step N.` and `Last
  step checkpoint completed in 12.34s` (dcp.py:808,437); previous `Saving the checkpoint (or staging if async
  is enabled).` / `Finished saving the checkpoint (or staging if async is enabled)in 0.02 seconds.` (sic) and
  at the last step no closing line (checkpoint.py @ 5d8e2d5, 2025-09);
- loads: current `Loading the checkpoint from ./outputs/checkpoint/step-500.` (the step only in the path),
  previous (before 2025-06-13, cddd7dc) `Loading the checkpoint at step 500.`; both close with `Finished
  loading the checkpoint in 3.21 seconds.`; then `Training starts at step 501` (trainer.py:1022).
torchtitan has no SIGTERM handler of its own: a preemption save is told as a save like any other.
"""

from __future__ import annotations

from synestra_cli.simulate.failures import Stacks, crash_lines
from synestra_cli.simulate.joblog import NOMINAL_TFLOPS, grad_norm_at, loss_at
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, Checkpoint, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import LaunchSteps, Out, from_lines, launch_steps, py_asctime, step_seconds

TITAN = "/opt/torchtitan/torchtitan"
STACKS = Stacks(
    train=[
        (f"{TITAN}/train.py", 702, "<module>", "trainer.train()"),
        (
            "/usr/local/lib/python3.12/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py",
            357,
            "wrapper",
            "return f(*args, **kwargs)",
        ),
        (f"{TITAN}/train.py", 610, "train", "self.train_step(data_iterator)"),
        (f"{TITAN}/train.py", 519, "train_step", "loss = self.forward_backward_step(input_dict, labels)"),
    ],
    cuda=[(f"{TITAN}/train.py", 478, "forward_backward_step", "loss.backward()")],
    data=[(f"{TITAN}/datasets/hf_datasets.py", 164, "__iter__", "sample_tokens = self._tokenizer.encode(sample_text)")],
    init=[
        (f"{TITAN}/train.py", 698, "<module>", "trainer = Trainer(config)"),
        (f"{TITAN}/train.py", 88, "__init__", "device_module.set_device(self.device)"),
    ],
)
COLOR = {"red": "\033[31m", "green": "\033[32m", "orange": "\033[38;2;180;60;0m", "turquoise": "\033[38;2;54;234;195m"}
COLOR |= {"blue": "\033[34m", "cyan": "\033[36m", "magenta": "\033[35m", "reset": "\033[39m"}
TOKENS_PER_STEP = 8192  # per device: local batch 1 x seq_len 8192
PEAK_TFLOPS = 989.0  # H100 SXM bf16 dense, as torchtitan's get_peak_flops


def say(us: int, msg: str, render: Rendering, order: int = 0) -> Out:
    prefix = "[rank0]:" if render.launcher == "torchrun" else ""
    return us, order, f"{prefix}[titan] {py_asctime(us)} - root - INFO - {msg}", 0


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    ls = launch_steps(tl, x)
    current = render.trainer_version == "current"
    out = [
        say(x.start, f"Starting job: {tl.spec.name} training", render),
        say(x.start, f"Checkpointing active. Checkpoints will be loaded from and saved to {_folder(tl)}", render, 1),
    ]
    r = ls.restore
    if r is not None:
        where = f"from {_folder(tl)}/step-{r.iteration}." if current else f"at step {r.iteration}."
        out.append(say(r.start, f"Loading the checkpoint {where}", render))
        out.append(say(r.end, f"Finished loading the checkpoint in {(r.end - r.start) / US:.2f} seconds.", render))
    if x.loop_start is not None:
        out.append(say(x.loop_start, f"Training starts at step {x.resume_iteration + 1}", render, 2))
    out += _steps(tl, ls, render, current)
    for c in ls.saves:
        out += _save(c, render, current)
    if x.state == "COMPLETED":
        out.append(say(max([c.end for c in ls.saves], default=x.last_progress), "Training completed", render, 9))
    elif x.failure is not None and x.failure.incident is not None:
        out += from_lines(tl, crash_lines(tl, x, STACKS, agent_line=False), render)
    return out


def _folder(tl: JobTimeline) -> str:
    return f"/lustre/ckpt/{tl.spec.name}/checkpoint"


def _steps(tl: JobTimeline, ls: LaunchSteps, render: Rendering, current: bool) -> list[Out]:
    idx = ls.every(tl.spec.log_interval)
    secs = step_seconds(ls, idx)
    c = COLOR if current else {k: "" for k in COLOR}
    out = []
    for k, sec in zip(idx.tolist(), secs.tolist(), strict=True):
        it = int(ls.iteration[k])
        tflops = NOMINAL_TFLOPS * tl.spec.step_s / sec
        loss = loss_at(it, tl.spec.train_iters)
        head = (
            f"{c['red']}step: {it:2}  {c['green']}loss: {loss:8.5f}  "
            if current
            else f"step: {it:2}  loss: {loss:7.4f}  "
        )
        norm = f"{c['orange']}grad_norm: {grad_norm_at(it):7.4f}  " if current else ""
        text = (
            f"{head}{norm}{c['turquoise']}memory: 62.31GiB(78.62%)  {c['blue']}tps: {round(TOKENS_PER_STEP / sec):,}  "
            f"{c['cyan']}tflops: {tflops:,.2f}  {c['magenta']}mfu: {100 * tflops / PEAK_TFLOPS:.2f}%{c['reset']}"
        )
        out.append(say(int(ls.end[k]), text, render, -2))
    return out


def _save(c: Checkpoint, render: Rendering, current: bool) -> list[Out]:
    secs = (c.end - c.start) / US
    if current:
        out = [say(c.start, "Saving the checkpoint.", render)]
        if c.trigger == "final":
            out.append(say(c.start, f"Saving a full checkpoint at last step, step {c.iteration}.", render, 1))
            return [*out, say(c.end, f"Last step checkpoint completed in {secs:.2f}s", render)]
        return [*out, say(c.end, f"Finished saving the checkpoint in {secs:.2f} seconds.", render)]
    out = [say(c.start, "Saving the checkpoint (or staging if async is enabled).", render)]
    if c.trigger == "final":
        return [*out, say(c.start, f"Saving a full checkpoint at last step, step {c.iteration}.", render, 1)]
    return [
        *out,
        say(c.end, f"Finished saving the checkpoint (or staging if async is enabled)in {secs:.2f} seconds.", render),
    ]
