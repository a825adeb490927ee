"""The Megatron-LM log of a simulated job: every attempt appended to one `<jobid>.log`.

Wording from Megatron-LM's training.py / checkpointing.py and the real samples (log-formats.md D.1,
D.2, D.6, D.7): rank-0 stdout lines carry a launcher timestamp `[YYYY-MM-DD HH:MM:SS.ffffff]` after
their own leading spaces; torch C++ (ProcessGroupNCCL) lines carry their glog header (no year, month
not zero-padded, nanoseconds); torchrun lines their Python-logging glog header; tracebacks carry
`[rankN]:` and no time. Iteration lines come every log_interval iterations, averaged over the interval
(the timer stops during saves, as save_checkpoint_and_time does); the first after a (re)start also
counts the start-up time.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from synestra_cli.simulate.failures import ending_lines
from synestra_cli.simulate.logfmt import Line, ckpt_dir, mega, parallelism, stamp, stamps
from synestra_cli.simulate.model import AS_USUAL, Rendering
from synestra_cli.simulate.timeline import US, JobTimeline, Launch

NOMINAL_TFLOPS = 380.0  # per GPU at the healthy step time
MODEL_BUILD_US = 4 * US  # building the model and optimizer, between initialisation and the load


def megatron_log_lines(tl: JobTimeline, render: Rendering = AS_USUAL) -> list[str]:
    """All lines of the job's log, attempt after attempt. Without launcher stamps only the lines that
    carry Megatron's own time (iteration lines, `[...] datetime:` lines) are dated."""
    lines: list[str] = []
    for a in tl.launches:
        events = launch_lines(tl, a, render)
        lines.extend(text for _, _, text in sorted(events, key=lambda e: (e[0], e[1])))
    return lines


def launch_lines(tl: JobTimeline, a: Launch, render: Rendering = AS_USUAL, legacy: bool = True) -> list[Line]:
    """The lines of one launch of Megatron (start-up, loads and saves, iterations, how it ended).

    `legacy`: today's rendering, Slurm's notices and torchrun's `failed (exitcode: 1)` line included; else
    those are left to simulate/slurmlines.py and simulate/launchers.py."""
    say = mega if render.launcher_stamps else _undated
    notice = render.slurm_notice and legacy
    return (
        _startup(tl, a, say)
        + _checkpoints(tl, a, say, timers=not render.launcher_stamps)
        + _iterations(tl, a)
        + ending_lines(tl, a, say, notice, agent_line=legacy, timeout_notice=legacy)
    )


def write_megatron_log(outdir: Path, tl: JobTimeline, render: Rendering = AS_USUAL) -> Path:
    path = Path(outdir) / f"{tl.spec.job_id}.log"
    path.write_text("\n".join(megatron_log_lines(tl, render)) + "\n", encoding="utf-8")
    return path


def _undated(us: int, text: str, order: int = 0) -> Line:
    """A rank-0 line as Megatron prints it, without a launcher stamp."""
    return us, order, text


def _startup(tl: JobTimeline, a: Launch, say) -> list[Line]:
    """Initialisation, model and optimizer building (then the load, _checkpoints), the training loop.
    `[after megatron is initialized]` precedes model building; `[after model, optimizer, ... are built]`
    follows the load (megatron/training/training.py setup_model_and_optimizer)."""
    spec = tl.spec
    tp, pp, dp = parallelism(spec)
    world = len(spec.hosts) * spec.gpus_per_node
    restore = next((c for c in tl.checkpoints if c.launch == a.number and c.kind == "restore"), None)
    built = restore.end if restore else (a.loop_start or a.first_step)
    init_us = max(a.start, (restore.start if restore else built) - MODEL_BUILD_US)
    lines = [
        say(
            a.start,
            f"using world size: {world}, data-parallel size: {dp}, context-parallel size: 1, "
            f"tensor-model-parallel size: {tp}, pipeline-model-parallel size: {pp}",
        ),
        say(a.start, "> initializing torch distributed ...", 1),
        say(init_us, f"time to initialize megatron (seconds): {(init_us - a.start) / US:.3f}"),
        say(init_us, f"[after megatron is initialized] datetime: {stamp(init_us)[:19]} ", 1),
        say(init_us, "building GPT model ...", 2),
        say(
            init_us,
            f" > number of parameters on (tensor, pipeline) model parallel rank (0, 0): {175_000_000_000 // (tp * pp)}",
            3,
        ),
    ]
    if a.resume_iteration == 0:
        lines.append(
            say(
                init_us,
                f"WARNING: could not find the metadata file {ckpt_dir(spec)}/latest_checkpointed_iteration.txt ",
                4,
            )
        )
        lines.append(say(init_us, "    will not load any checkpoints and will start from random", 5))
    if a.loop_start is not None:
        lines.append(
            say(
                built,
                f"[after model, optimizer, and learning rate scheduler are built] datetime: {stamp(built)[:19]} ",
                3,
            )
        )
        when = stamp(a.loop_start)[:19]
        lines.append(say(a.loop_start, f"[before the start of training step] datetime: {when} ", 5))
    return lines


def _checkpoints(tl: JobTimeline, a: Launch, say, timers: bool = False) -> list[Line]:
    """Loads and saves; `timers`: the save-checkpoint timer block Megatron prints after each save."""
    spec, lines = tl.spec, []
    tp, pp, _ = parallelism(spec)
    where = f"{ckpt_dir(spec)} [ t 1/{tp}, p 1/{pp} ]"
    for c in (c for c in tl.checkpoints if c.launch == a.number):
        if c.kind == "restore":
            lines.append(
                say(c.start, f" loading distributed checkpoint from {ckpt_dir(spec)} at iteration {c.iteration}")
            )
            lines.append(say(c.end, f"  successfully loaded checkpoint from {where} at iteration {c.iteration}"))
        else:
            lines.append(
                say(
                    c.start,
                    f"saving checkpoint at iteration {c.iteration:7d} to {ckpt_dir(spec)} in torch_dist format",
                    1,
                )
            )
            lines.append(say(c.end, f"  successfully saved checkpoint from iteration {c.iteration:7d} to {where}"))
            if timers:
                ms = (c.end - c.start) / 1000
                lines.append(say(c.end, "(min, max) time across ranks (ms):", 1))
                lines.append(
                    say(c.end, f"    save-checkpoint ................................: ({ms * 0.998:.2f}, {ms:.2f})", 2)
                )
    return lines


def interval_seconds(tl: JobTimeline, a: Launch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(iteration, end µs, averaged seconds per iteration) of the logged iterations of one launch."""
    s = tl.steps
    sel = s.launch == a.number
    its, ends = s.iteration[sel], s.end[sel]
    idx = np.nonzero(its % tl.spec.log_interval == 0)[0]
    if len(idx) == 0:
        return its[:0], ends[:0], np.zeros(0)
    busy = np.cumsum(s.end[sel] - s.start[sel])[idx]
    interval = np.diff(np.concatenate(([0], busy))).astype(float)
    if a.loop_start is not None:  # the interval timer starts with the loop: the first line counts warm-up
        interval[0] += a.first_step - a.loop_start
    count = np.diff(np.concatenate(([a.resume_iteration], its[idx])))
    return its[idx], ends[idx], interval / count / US


def _iterations(tl: JobTimeline, a: Launch) -> list[Line]:
    spec = tl.spec
    its, ends, secs = interval_seconds(tl, a)
    gbs = parallelism(spec)[2] * 16
    tflops = NOMINAL_TFLOPS * spec.step_s / secs
    ts = stamps(ends)
    return [
        (
            int(t),
            -2,
            f" [{st}] iteration {it:8d}/{spec.train_iters:8d} | consumed samples: {it * gbs:12d} | "
            f"elapsed time per iteration (ms): {sec * 1000:.1f} | throughput per GPU (TFLOP/s/GPU): {tf:.1f} | "
            f"learning rate: {lr_at(it, spec.train_iters):.6E} | global batch size: {gbs:5d} | "
            f"lm loss: {loss_at(it, spec.train_iters):.6E} | loss scale: 1.0 | grad norm: {grad_norm_at(it):.3f} | "
            "number of skipped iterations:   0 | number of nan iterations:   0 |",
        )
        for t, st, it, sec, tf in zip(
            ends.tolist(), ts.tolist(), its.tolist(), secs.tolist(), tflops.tolist(), strict=True
        )
    ]


def lr_at(it: int, total: int) -> float:
    """Linear warm-up over 1% of training, then cosine decay from 3e-4 to 3e-5."""
    warm = max(1, total // 100)
    if it < warm:
        return 3e-4 * it / warm
    return 3e-5 + 0.5 * (3e-4 - 3e-5) * (1 + math.cos(math.pi * (it - warm) / max(1, total - warm)))


def loss_at(it: int, total: int) -> float:
    """A function of the iteration only, so redone iterations print the same loss (deterministic data)."""
    return 1.9 + 8.5 * math.exp(-it / max(1.0, 0.04 * total)) + 0.03 * math.sin(0.7 * it) + 0.02 * math.sin(1.3 * it)


def grad_norm_at(it: int) -> float:
    return 0.9 + 0.15 * math.sin(0.37 * it) + 0.05 * math.cos(1.7 * it)
