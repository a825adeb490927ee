"""Small text helpers shared by the simulator's job-log writers."""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from synestra_cli.simulate.model import JobSpec

EPOCH = datetime(1970, 1, 1)
Line = tuple[int, int, str]  # (time µs, order within the same µs, text)


def ckpt_dir(spec: JobSpec) -> str:
    return f"/lustre/ckpt/{spec.name}"


def parallelism(spec: JobSpec) -> tuple[int, int, int]:
    """(tensor, pipeline, data) parallel sizes: TP within a node, PP grows with the job."""
    nodes = len(spec.hosts)
    tp = spec.gpus_per_node
    pp = 4 if nodes >= 32 else 2 if nodes >= 4 else 1
    return tp, pp, max(1, nodes * spec.gpus_per_node // (tp * pp))


def stamp(us: int) -> str:
    return (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%d %H:%M:%S.%f")


def stamps(us: np.ndarray) -> np.ndarray:
    """Vectorised stamp()."""
    if us.size == 0:  # an attempt that died before its first logged iteration
        return np.array([], dtype=str)
    return np.char.replace(np.datetime_as_string(us.astype("datetime64[us]"), unit="us"), "T", " ")


def mega(us: int, text: str, order: int = 0) -> Line:
    """A rank-0 stdout line with the launcher timestamp placed after the message's own indent."""
    body = text.lstrip(" ")
    return us, order, f"{text[: len(text) - len(body)]}[{stamp(us)}] {body}"
