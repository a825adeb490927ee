"""Megatron-LM, through the writer that renders it today (simulate/joblog.py): its Slurm notices and
torchrun line are left to simulate/slurmlines.py and simulate/launchers.py when another launcher or Slurm's
own lines are asked for."""

from __future__ import annotations

from synestra_cli.simulate.joblog import launch_lines
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import JobTimeline, Launch
from synestra_cli.simulate.trainers.common import Out, from_lines


def lines(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    legacy = render.launcher == "srun" and not render.slurm_lines
    return from_lines(tl, launch_lines(tl, x, render, legacy=legacy), render)
