"""What every trainer's log writer needs: the output line, the logging headers, the launch's steps and
checkpoints, and the values the trainers print (loss, learning rate) as functions of the iteration.

The job model counts iterations as steps completed (Megatron's numbering). Trainers that print a
zero-based step (NeMo 2, MaxText/Orbax) print ``iteration - 1`` for the same moment; each writer says so.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np

from synestra_cli.simulate.logfmt import EPOCH, Line
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import US, Checkpoint, JobTimeline, Launch

# (time µs, order within the same µs, text, srun task that printed it; NO_TASK: srun or slurmstepd itself)
Out = tuple[int, int, str, int]
NO_TASK = -1
RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")


def when(us: int) -> datetime:
    return EPOCH + timedelta(microseconds=us)


def py_asctime(us: int) -> str:
    """Python logging's default asctime: `2025-06-25 12:55:55,589`."""
    t = when(us)
    return f"{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}"


def absl_header(us: int, level: str, thread: int, where: str) -> str:
    """absl/glog header as JAX and Orbax print it: `I0608 20:54:47.917440 123567287061632 file.py:1007]`."""
    t = when(us)
    return f"{level}{t:%m%d %H:%M:%S}.{t.microsecond:06d} {thread} {where}]"


def seed_of(tl: JobTimeline) -> int:
    return zlib.crc32(tl.spec.job_id.encode())


def task_of_rank(tl: JobTimeline, rank: int, render: Rendering) -> int:
    """srun's task for a rank: one task per GPU under plain srun, one torchrun per node under torchrun."""
    return rank if render.launcher == "srun" else rank // tl.spec.gpus_per_node


def from_lines(tl: JobTimeline, lines: list[Line], render: Rendering) -> list[Out]:
    """Lines of the training processes: a `[rankN]:` line is that rank's, any other rank 0's."""
    out: list[Out] = []
    for us, order, text in lines:
        m = RANK_PREFIX.match(text)
        out.append((us, order, text, task_of_rank(tl, int(m.group(1)) if m else 0, render)))
    return out


def rank0(us: int, text: str, order: int = 0) -> Out:
    return us, order, text, 0


@dataclass(frozen=True)
class LaunchSteps:
    """The completed steps of one launch (numpy arrays) and its checkpoints."""

    iteration: np.ndarray
    start: np.ndarray
    end: np.ndarray
    saves: list[Checkpoint]
    restore: Checkpoint | None

    def every(self, n: int) -> np.ndarray:
        """Indices of the steps a trainer logging every n steps prints."""
        return np.nonzero(self.iteration % n == 0)[0]


def launch_steps(tl: JobTimeline, x: Launch) -> LaunchSteps:
    sel = tl.steps.launch == x.number
    mine = [c for c in tl.checkpoints if c.launch == x.number]
    return LaunchSteps(
        tl.steps.iteration[sel],
        tl.steps.start[sel],
        tl.steps.end[sel],
        [c for c in mine if c.kind == "save"],
        next((c for c in mine if c.kind == "restore"), None),
    )


def step_seconds(ls: LaunchSteps, idx: np.ndarray) -> np.ndarray:
    return (ls.end[idx] - ls.start[idx]) / US


def mean_seconds(ls: LaunchSteps, idx: np.ndarray, first_from: int) -> np.ndarray:
    """Mean step time over each logging interval (saves excluded), the first from `first_from` on."""
    busy = np.cumsum(ls.end - ls.start)[idx]
    count = np.diff(np.concatenate(([0], idx + 1)))
    per = np.diff(np.concatenate(([0], busy))).astype(float)
    if len(idx):
        per[0] += max(0, int(ls.start[0]) - first_from)
    return per / np.maximum(count, 1) / US


def done_line(x: Launch, ls: LaunchSteps) -> int:
    """When a completed launch prints its last words: after its final save."""
    return max([c.end for c in ls.saves], default=x.last_progress)
