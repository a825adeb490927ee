"""The log of a Hugging Face Trainer (Accelerate) job, one launch at a time.

Real wording (transformers 4.57.3 current, 4.45.2 previous, read from their wheels; docs/simulator.md):
- example scripts and LLaMA-Factory turn on `enable_explicit_format()` (utils/logging.py:289):
  `[INFO|trainer.py:4309] 2025-12-18 13:28:05,079 >> Saving model checkpoint to …/checkpoint-100`;
- a save: `Saving model checkpoint to {output_dir}` (trainer.py:4309 / 3705), `Configuration saved in
  …/config.json` (configuration_utils.py:491 / 410), the weights, then the optimizer and scheduler (no line):
  the end of a save is not logged; checkpoint-N holds N steps (global_step, counted as completed);
- a resume: `Loading model from {checkpoint}.` (trainer.py:2934 / 2637) before `***** Running training
  *****` (2519 / 2243) and its `  Num examples = …` block, then `  Continuing training from checkpoint, will
  skip to saved global_step`, `  Continuing training from epoch 0`, `  Continuing training from global step N`
  (2549-2551 / 2274-2276) once the optimizer state is loaded;
- progress: tqdm's bar redrawn with `\\r` (`  12%|█▏        | 120/1000 [12:00<1:28:00,  6.00s/it]`) and,
  every logging_steps, ProgressCallback's dict (trainer_callback.py:693) `{'loss': 2.6031, 'grad_norm':
  1.88…, 'learning_rate': 5.0e-07, 'epoch': 2.24}`: no time and no step number of its own.
The HF Trainer has no SIGTERM handler: a preemption save is told as a save like any other.
"""

from __future__ import annotations

from synestra_cli.simulate.failures import Stacks, crash_lines
from synestra_cli.simulate.joblog import grad_norm_at, loss_at, lr_at
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import LaunchSteps, Out, from_lines, launch_steps, py_asctime

TF = "/usr/local/lib/python3.11/dist-packages/transformers"
LINES = {  # where each line is logged: (current 4.57.3, previous 4.45.2)
    "save": (4309, 3705),
    "config": (491, 410),
    "load": (2934, 2637),
    "running": (2519, 2243),
    "continuing": (2549, 2274),
    "done": (2810, 2505),
}
STACKS = Stacks(
    train=[
        ("/workspace/train.py", 211, "<module>", "trainer.train(resume_from_checkpoint=last_checkpoint)"),
        (f"{TF}/trainer.py", 2328, "train", "return inner_training_loop("),
        (
            f"{TF}/trainer.py",
            2672,
            "_inner_training_loop",
            "tr_loss_step = self.training_step(model, inputs, num_items_in_batch)",
        ),
    ],
    cuda=[(f"{TF}/trainer.py", 4071, "training_step", "self.accelerator.backward(loss, **kwargs)")],
    data=[("/workspace/train.py", 96, "__getitem__", "ids = self.tokens[self.offsets[idx] : self.offsets[idx + 1]]")],
    init=[
        ("/workspace/train.py", 180, "<module>", "training_args = parser.parse_args_into_dataclasses()"),
        (f"{TF}/training_args.py", 2268, "_setup_devices", "torch.cuda.set_device(device)"),
    ],
)
BAR = " ▏▎▍▌▋▊▉"


def say(us: int, file: str, key: str, msg: str, current: bool, order: int = 0, plus: int = 0) -> Out:
    line = LINES[key][0 if current else 1] + plus
    return us, order, f"[INFO|{file}:{line}] {py_asctime(us)} >> {msg}", 0


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    ls = launch_steps(tl, x)
    current = render.trainer_version == "current"
    out: list[Out] = []
    r = ls.restore
    begin = r.end if r is not None else (x.loop_start or x.first_step)
    if r is not None:
        out.append(say(r.start, "trainer.py", "load", f"Loading model from {_dir(tl, r.iteration)}.", current))
    out += _running(tl, x, begin, current)
    if r is not None:
        out += [
            say(r.end, "trainer.py", "continuing", msg, current, 10 + k, k)
            for k, msg in enumerate(
                (
                    "  Continuing training from checkpoint, will skip to saved global_step",
                    "  Continuing training from epoch 0",
                    f"  Continuing training from global step {r.iteration}",
                )
            )
        ]
    out += _progress(tl, ls, begin)
    for c in ls.saves:
        out.append(say(c.start, "trainer.py", "save", f"Saving model checkpoint to {_dir(tl, c.iteration)}", current))
        out.append(
            say(
                c.start,
                "configuration_utils.py",
                "config",
                f"Configuration saved in {_dir(tl, c.iteration)}/config.json",
                current,
                1,
            )
        )
    if x.state == "COMPLETED":
        done = max([c.end for c in ls.saves], default=x.last_progress)
        out.append(say(done, "trainer.py", "done", "", current, 20))
        out += [
            (done, 21, "", 0),
            (done, 22, "Training completed. Do not forget to share your model on huggingface.co/models =)", 0),
        ]
    elif x.failure is not None and x.failure.incident is not None:
        out += from_lines(tl, crash_lines(tl, x, STACKS, agent_line=False), render)
    return out


def _dir(tl: JobTimeline, it: int) -> str:
    return f"/lustre/ckpt/{tl.spec.name}/checkpoint-{it}"


def _running(tl: JobTimeline, x: Launch, at: int, current: bool) -> list[Out]:
    world = len(tl.spec.hosts) * tl.spec.gpus_per_node
    block = [
        ("running", 0, "***** Running training *****"),
        ("running", 1, f"  Num examples = {tl.spec.train_iters * world * 4:,}"),
        ("running", 2, "  Num Epochs = 1"),
        ("running", 3, "  Instantaneous batch size per device = 4"),
        ("running", 6, f"  Total train batch size (w. parallel, distributed & accumulation) = {world * 4:,}"),
        ("running", 7, "  Gradient Accumulation steps = 1"),
        ("running", 8, f"  Total optimization steps = {tl.spec.train_iters:,}"),
    ]
    return [say(at, "trainer.py", key, msg, current, k, plus) for k, (key, plus, msg) in enumerate(block)]


def _clock(s: float) -> str:
    s = int(s)
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m:02d}:{s % 60:02d}"


def _bar(n: int, total: int, elapsed: float, per: float) -> str:
    """tqdm's default bar, 10 cells wide when it cannot see a terminal."""
    frac = n / total
    full, part = divmod(int(frac * 80), 8)
    cells = "█" * full + (BAR[part] if full < 10 else "")
    rate = f"{per:5.2f}s/it" if per >= 1 else f"{1 / per:5.2f}it/s"
    left = _clock(per * (total - n))
    return f"{100 * frac:3.0f}%|{cells:<10}| {n}/{total} [{_clock(elapsed)}<{left}, {rate}]"


def _progress(tl: JobTimeline, ls: LaunchSteps, begin: int) -> list[Out]:
    """The bar after every step (one physical line per logging interval, its redraws joined by \\r) and the
    logged dict after every logging_steps."""
    spec, n, out = tl.spec, tl.spec.log_interval, []
    ends, its = ls.end.tolist(), ls.iteration.tolist()
    for k in ls.every(n).tolist():
        lo = max(0, k - n + 1)
        bars = []
        for j in range(lo, k + 1):
            elapsed = (ends[j] - begin) / US
            bars.append(_bar(its[j], spec.train_iters, elapsed, elapsed / (j + 1)))
        it = its[k]
        logs = {
            "loss": round(loss_at(it, spec.train_iters), 4),
            "grad_norm": grad_norm_at(it),
            "learning_rate": lr_at(it, spec.train_iters),
            "epoch": round(it / (2 * spec.train_iters), 2),
        }
        out.append((ends[k], -3, "\r".join(bars), 0))
        out.append((ends[k], -2, str(logs), 0))
    return out
