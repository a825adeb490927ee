"""What each host is doing over time (from the jobs), and the fault effects on it, as numpy masks.

Telemetry is a function of the host's load (idle, computing, checkpoint I/O, hung in a collective),
the job's slowdown factor, and the fault effects; this module evaluates those on a sample grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from synestra_cli.simulate.faults import Effect

IDLE, COMPUTE, IO, HANG = 0, 1, 2, 3


@dataclass
class HostLoad:
    """Non-overlapping segments (start, end, state, slowdown factor) of one host."""

    segments: list[tuple[float, float, int, float]] = field(default_factory=list)

    def add(self, start: float, end: float, state: int, factor: float = 1.0) -> None:
        if end > start:
            self.segments.append((start, end, state, factor))

    def at(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(state, factor) at each time: later segments win where two overlap."""
        state = np.zeros(ts.shape, np.int8)
        factor = np.ones(ts.shape)
        for start, end, st, f in self.segments:
            inside = (ts >= start) & (ts < end)
            state[inside] = st
            factor[inside] = f
        return state, factor


def window(ts: np.ndarray, e: Effect) -> np.ndarray:
    end = np.inf if e.end is None else e.end
    return (ts >= e.start) & (ts < end)


def target_rows(e: Effect, n: int) -> np.ndarray:
    rows = np.zeros(n, bool)
    if e.target is None:
        rows[:] = True
    else:
        rows[e.target] = True
    return rows


def effect_mask(
    ts: np.ndarray, effects: list[Effect], kind: str, n: int, keep: Callable[[Effect], bool] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(mask (n, T), value (n, T)) of the effects of one kind (those ``keep`` accepts); where several
    overlap, the last wins."""
    mask = np.zeros((n, ts.size), bool)
    value = np.zeros((n, ts.size))
    for e in effects:
        if e.kind != kind or (keep is not None and not keep(e)):
            continue
        m = target_rows(e, n)[:, None] & window(ts, e)[None, :]
        mask |= m
        value[m] = e.value
    return mask, value


def onsets(
    ts: np.ndarray, effects: list[Effect], kind: str, n: int, weight: Callable[[Effect], float] = lambda e: 1.0
) -> np.ndarray:
    """Per-sample increments (n, T) of one-off events of one kind: each counted (`weight`, one by
    default) once, in the first sample at or after it, on its target (a DBE, a link going down)."""
    inc = np.zeros((n, ts.size))
    for e in effects:
        if e.kind == kind:
            k = np.searchsorted(ts, e.start)
            if k < ts.size:
                inc[target_rows(e, n), k] += weight(e)
    return inc


def reboots(ts: np.ndarray, effects: list[Effect]) -> tuple[np.ndarray, np.ndarray]:
    """(down (T,), reset (T,)): samples missing while the host reboots; the first sample after each."""
    down = np.zeros(ts.size, bool)
    reset = np.zeros(ts.size, bool)
    for e in effects:
        if e.kind == "reboot" and e.end is not None:
            down |= window(ts, e)
            after = np.searchsorted(ts, e.end)
            if after < ts.size:
                reset[after] = True
    return down, reset


def cumulative(increments: np.ndarray, reset: np.ndarray, offset: np.ndarray | float = 0.0) -> np.ndarray:
    """Running totals along the last axis that restart from zero at each reset (a reboot).

    ``offset`` is the counter's value at the first sample (it has counted since the last boot).
    """
    total = np.cumsum(increments, axis=-1)
    at_reset = np.where(reset, total - increments, 0.0)
    base = np.maximum.accumulate(at_reset, axis=-1)
    before_first = np.cumsum(reset) == 0
    start = np.asarray(offset)[..., None] if np.ndim(offset) else offset
    return total - base + np.where(before_first, start, 0.0)
