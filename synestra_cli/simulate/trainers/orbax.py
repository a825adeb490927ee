"""The log of a JAX job (MaxText's training loop) checkpointing with Orbax's CheckpointManager.

Real wording (docs/simulator.md cites each):
- absl headers `I0608 20:54:47.918725 123567287061632 checkpoint_manager.py:1512] msg` (the real sample
  gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log);
- a synchronous save (google/orbax @ 3ff7b24, 2026; previous @ 32f2c03, 2024-12): `[process=0] Saving
  checkpoint at step 749` (checkpoint_manager.py:1527 / 1230; `… due to preemption.` at 1433 / 1127 when the
  preemption sync point triggered it), `[process=0][thread=MainThread] Finished saving checkpoint (finalized
  tmp dir) to `…/749`.` (_src/path/atomicity.py:845 / 477), `[process=0][thread=MainThread][step=749]
  Finished synchronous save.` (checkpoint_manager.py:1600 / 1288);
- a restore: `Restoring checkpoint from …/749.` (_src/checkpointers/checkpointer.py:323 / 236); the previous
  version also closes it with `Finished restoring checkpoint from …/749.` (:239), the current one does not;
- MaxText's step line (docs/guides/monitoring_and_debugging/understand_logs_and_metrics.md): `completed step:
  749, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, total_weights: 196608, loss:
  10.374`, every step, no time of its own. MaxText and Orbax count steps from 0: the checkpoint of step 749
  holds 750 completed steps, so every step number printed here is the job model's iteration - 1;
- a failure: XLA's `E … pjrt_stream_executor_client.cc:2732] Execution of replica 0 failed: INTERNAL: Failed to
  execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' failed: …nccl_utils.cc:305:
  NCCL operation ncclGroupEnd() failed: unhandled cuda error` and the `jaxlib.xla_extension.XlaRuntimeError`
  it raises (jax-ml/jax#15628, #22747).
JAX jobs are started by srun itself (jax.distributed.initialize reads Slurm's environment), never torchrun.
"""

from __future__ import annotations

from synestra_cli.simulate.joblog import NOMINAL_TFLOPS, loss_at
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, Checkpoint, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import Out, absl_header, launch_steps, rank0, seed_of, when

WHERE = {  # (current, previous)
    "save": ("checkpoint_manager.py:1527", "checkpoint_manager.py:1230"),
    "preempt": ("checkpoint_manager.py:1433", "checkpoint_manager.py:1127"),
    "tmp": ("atomicity.py:845", "atomicity.py:477"),
    "sync": ("checkpoint_manager.py:1600", "checkpoint_manager.py:1288"),
    "restore": ("checkpointer.py:323", "checkpointer.py:236"),
    "restored": ("checkpointer.py:239", "checkpointer.py:239"),
}
TOKENS = 8192.0
MAXTEXT = "/deps/src/MaxText"
THREAD = "[process=0][thread=MainThread]"


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    ls = launch_steps(tl, x)
    v = 0 if render.trainer_version == "current" else 1
    tid = 139_000_000_000_000 + seed_of(tl) % 1_000_000_000

    def absl(us: int, key: str, msg: str, order: int = 0) -> Out:
        return rank0(us, f"{absl_header(us, 'I', tid, WHERE[key][v])} {msg}", order)

    world = len(tl.spec.hosts) * tl.spec.gpus_per_node
    out = [
        rank0(x.start, "System Information: Jax Version: 0.7.2"),
        rank0(x.start, f"Num_devices: {world}, shape (1, 1, {world}, 1, 1, 1, 1, 1, 1, 1, 1, 1)", 1),
    ]
    r = ls.restore
    if r is not None:
        out.append(absl(r.start, "restore", f"Restoring checkpoint from {_dir(tl, r.iteration)}."))
        if v == 1:
            out.append(absl(r.end, "restored", f"Finished restoring checkpoint from {_dir(tl, r.iteration)}."))
    for k in range(len(ls.iteration)):
        it, sec = int(ls.iteration[k]), (int(ls.end[k]) - int(ls.start[k])) / US
        tf = NOMINAL_TFLOPS * tl.spec.step_s / sec
        out.append(
            rank0(
                int(ls.end[k]),
                f"completed step: {it - 1}, seconds: {sec:.3f}, TFLOP/s/device: {tf:.3f}, "
                f"Tokens/s/device: {TOKENS / sec:.3f}, total_weights: {int(TOKENS) * world}, "
                f"loss: {loss_at(it, tl.spec.train_iters):.3f}",
                -2,
            )
        )
    for c in ls.saves:
        out += _save(tl, c, absl)
    if x.failure is not None and x.failure.incident is not None:
        out += _failure(tl, x)
    return out


def _dir(tl: JobTimeline, it: int) -> str:
    return f"/lustre/ckpt/{tl.spec.name}/checkpoints/{it - 1}"


def _save(tl: JobTimeline, c: Checkpoint, absl) -> list[Out]:
    step = c.iteration - 1
    first = (
        absl(c.start, "preempt", f"[process=0] Saving checkpoint at step {step} due to preemption.")
        if c.trigger == "preemption"
        else absl(c.start, "save", f"[process=0] Saving checkpoint at step {step}")
    )
    return [
        first,
        absl(
            c.end,
            "tmp",
            f"{THREAD} Finished saving checkpoint (finalized tmp dir) to `{_dir(tl, c.iteration)}`.",
        ),
        absl(c.end, "sync", f"{THREAD}[step={step}] Finished synchronous save.", 1),
    ]


def _failure(tl: JobTimeline, x: Launch) -> list[Out]:
    """XLA's error line and the Python traceback it raises (a hang surfaces when NCCL gives up)."""
    f = x.failure
    assert f is not None
    at = x.noticed if x.noticed is not None else f.at
    if f.incident == "node_failure":
        return []
    t = when(at)
    if f.incident == "python_exception":
        size = seed_of(tl) % 90_000_000 + 10_000_000
        tail = f"IndexError: index {size} is out of bounds for axis 0 with size {size}"
        frames = [(f"{MAXTEXT}/input_pipeline/_grain_data_processing.py", 218, "__getitem__", "return self._data[idx]")]
        return _traceback(at, frames, tail)
    why = "unhandled cuda error" if f.incident == "cuda_error" else "unhandled system error"
    err = (
        "INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce' "
        f"failed: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclGroupEnd() failed: {why}"
    )
    head = f"{t:%Y-%m-%d %H:%M:%S}.{t.microsecond:06d}: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732]"
    frames = [
        (f"{MAXTEXT}/train.py", 1013, "train_loop", "state, metrics = p_train_step(state, example_batch, nextrng)")
    ]
    return [rank0(at, f"{head} Execution of replica 0 failed: {err}")] + _traceback(
        at + 1000, frames, f"jaxlib.xla_extension.XlaRuntimeError: {err}"
    )


def _traceback(at: int, frames: list[tuple[str, int, str, str]], tail: str) -> list[Out]:
    stack = [
        (f"{MAXTEXT}/train.py", 1109, "<module>", "app.run(main)"),
        ("/usr/local/lib/python3.12/site-packages/absl/app.py", 254, "_run_main", "sys.exit(main(argv))"),
        (f"{MAXTEXT}/train.py", 1104, "main", "train_loop(config, recorder)"),
        *frames,
    ]
    body = ["Traceback (most recent call last):"]
    for path, line, func, code in stack:
        body += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return [(at, 1 + i, text, 0) for i, text in enumerate([*body, tail])]
