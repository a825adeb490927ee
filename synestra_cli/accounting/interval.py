"""Checkpoint-interval advice: Young's and Daly's optimum intervals and the expected waste.

Sources (../shared/reference/anchors.md §2.3):
- Young 1974, CACM 17(9): T_opt = sqrt(2 C M).
- Daly 2006, FGCS 22(3) eq. 37, as LLNL SCR's scr_ckpt_interval.py implements it:
  tau = sqrt(2 d M) [1 + (1/3) sqrt(d / 2M) + (1/9) (d / 2M)] - d  for d < 2M, else M.
- First-order expected waste (Herault/Robert): W(T) = C/T + (R + T/2)/M, the save cost per interval
  plus, per failure, the restart and on average half an interval of lost work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from synestra_cli.shown import plural

MIN_FAILURES_FOR_MTBF = 2  # fewer unplanned failures than this: MTBF is not estimated


def young_interval(save_s: float, mtbf_s: float) -> float:
    return math.sqrt(2.0 * save_s * mtbf_s)


def daly_interval(save_s: float, mtbf_s: float) -> float:
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    r = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(r) / 3.0 + r / 9.0) - save_s


def expected_waste(interval_s: float, save_s: float, mtbf_s: float, restart_s: float) -> float:
    """Fraction of wall time lost to saves, restarts and redone work at this compute interval."""
    return save_s / (interval_s + save_s) + (restart_s + interval_s / 2.0) / mtbf_s


@dataclass(frozen=True)
class IntervalAdvice:
    save_cost_s: float | None  # delta: median blocking save
    failures: int  # unplanned failures seen
    mtbf_s: float | None  # wall / failures, None when too few to estimate
    current_interval_s: float | None  # median compute time between periodic saves
    restart_s: float | None  # mean restore + startup + requeue per failure
    young_s: float | None
    daly_s: float | None
    waste_current: float | None  # fraction of wall
    waste_recommended: float | None  # at Daly's interval
    note: str

    def waste_gpu_hours(self, wall_s: float, gpus: int) -> tuple[float | None, float | None]:
        def gh(frac: float | None) -> float | None:
            return None if frac is None else frac * wall_s * gpus / 3600.0

        return gh(self.waste_current), gh(self.waste_recommended)


def advise(
    save_cost_s: float | None, failures: int, wall_s: float, current_interval_s: float | None, restart_s: float | None
) -> IntervalAdvice:
    def without_advice(note: str) -> IntervalAdvice:
        return IntervalAdvice(save_cost_s, failures, None, current_interval_s, restart_s, None, None, None, None, note)

    if save_cost_s is None or save_cost_s <= 0:
        return without_advice("no completed blocking save: cannot estimate the save cost")
    if failures < MIN_FAILURES_FOR_MTBF:
        return without_advice(
            f"{plural(failures, 'unplanned failure')}: too few to estimate MTBF "
            f"(need {MIN_FAILURES_FOR_MTBF}); pool jobs with --all for a fleet MTBF"
        )
    mtbf = wall_s / failures
    restart = restart_s or 0.0
    young, daly = young_interval(save_cost_s, mtbf), daly_interval(save_cost_s, mtbf)
    current = expected_waste(current_interval_s, save_cost_s, mtbf, restart) if current_interval_s else None
    return IntervalAdvice(
        save_cost_s,
        failures,
        mtbf,
        current_interval_s,
        restart,
        young,
        daly,
        current,
        expected_waste(daly, save_cost_s, mtbf, restart),
        "ok",
    )


# Change the cadence when Daly's interval would save at least this share of the wall time.
CADENCE_GAIN = 0.005
DALY_SOURCE = "Young 1974 (CACM 17(9)), Daly 2006 (FGCS 22(3)): first-order waste"


def cadence_action(iv: IntervalAdvice) -> dict[str, str] | None:
    """Raise or lower the save cadence when the observed MTBF says so: `save_cadence` action (the shape
    of explain's actions), or None when MTBF or the current interval is not known."""
    if (
        iv.daly_s is None
        or iv.current_interval_s is None
        or iv.mtbf_s is None
        or iv.save_cost_s is None
        or iv.waste_current is None
        or iv.waste_recommended is None
    ):
        return None
    daly, now = iv.daly_s / 60.0, iv.current_interval_s / 60.0
    gain = iv.waste_current - iv.waste_recommended
    if gain < CADENCE_GAIN:
        text = (
            f"Keep the save cadence (every {now:.0f} min): Daly's {daly:.0f} min would save only {gain:.1%} "
            "of wall time"
        )
    elif daly > now:
        text = f"Save less often: every {daly:.0f} min of compute instead of {now:.0f} min"
    else:
        text = f"Save more often: every {daly:.0f} min of compute instead of {now:.0f} min"
    why = (
        f"observed MTBF {iv.mtbf_s / 3600:.1f} h ({iv.failures} failures) and a {iv.save_cost_s:.0f} s save put "
        f"Daly's optimum at {daly:.1f} min; expected waste {iv.waste_current:.1%} now, "
        f"{iv.waste_recommended:.1%} there"
    )
    return {"kind": "save_cadence", "text": text, "why": why, "source": DALY_SOURCE}
