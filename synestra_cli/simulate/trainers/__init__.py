"""A job's output (`<jobid>.log`): the trainer's own lines for each launch, the launcher's (torchrun's
agent) and Slurm's, merged in time order, every attempt appended.

One module per trainer writes what that trainer really prints (docs/simulator.md, "Trainers and
launchers"); simulate/launchers.py and simulate/slurmlines.py add the rest. Megatron under plain srun
without Slurm's extra lines is today's rendering, byte for byte (simulate/joblog.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from synestra_cli.errors import InputError
from synestra_cli.simulate import launchers, slurmlines
from synestra_cli.simulate.joblog import megatron_log_lines
from synestra_cli.simulate.model import AS_USUAL, LAUNCHERS, TRAINERS, Rendering
from synestra_cli.simulate.timeline import JobTimeline, Launch
from synestra_cli.simulate.trainers import deepspeed, hf_trainer, megatron, nemo2, orbax, torchtitan
from synestra_cli.simulate.trainers.common import Out

WRITERS: dict[str, Callable[[JobTimeline, Launch, Rendering], list[Out]]] = {
    "megatron": megatron.lines,
    "nemo2": nemo2.lines,
    "torchtitan": torchtitan.lines,
    "deepspeed": deepspeed.lines,
    "hf_trainer": hf_trainer.lines,
    "orbax": orbax.lines,
}


def check(render: Rendering) -> None:
    """A clear error for a combination no site runs."""
    if render.trainer not in TRAINERS:
        raise InputError(f"unknown trainer {render.trainer!r}; known: {', '.join(TRAINERS)}")
    if render.launcher not in LAUNCHERS:
        raise InputError(f"unknown launcher {render.launcher!r}; known: {', '.join(LAUNCHERS)}")
    if render.trainer == "orbax" and render.launcher == "torchrun":
        raise InputError(
            "a JAX/Orbax job is started by srun itself (jax.distributed reads Slurm's environment), not torchrun"
        )
    if render.trainer_version not in ("current", "previous"):
        raise InputError(f"unknown trainer version {render.trainer_version!r}; known: current, previous")


def legacy(render: Rendering) -> bool:
    return (
        render.trainer == "megatron" and render.launcher == "srun" and not render.slurm_lines and not render.srun_label
    )


def job_log_lines(tl: JobTimeline, render: Rendering = AS_USUAL) -> list[str]:
    if legacy(render):
        return megatron_log_lines(tl, render)
    write = WRITERS[render.trainer]
    out: list[str] = []
    launches = list(tl.launches)
    for a in tl.attempts:
        events = launchers.attempt_start(tl, a, render)
        for x in tl.launches_of(a.number):
            nxt = next((y for y in launches if y.number == x.number + 1), None)
            events += write(tl, x, render) + launchers.launch_end(tl, x, nxt, render)
        events += slurmlines.attempt_end(tl, a, render)
        out += launchers.label(sorted(events, key=lambda e: (e[0], e[1])), tl, render)
    return out


def write_job_log(outdir: Path, tl: JobTimeline, render: Rendering = AS_USUAL) -> Path:
    path = Path(outdir) / f"{tl.spec.job_id}.log"
    path.write_text("\n".join(job_log_lines(tl, render)) + "\n", encoding="utf-8")
    return path
