"""Score `synestra fleet`'s lemons against the simulator's truth.json (tests and benchmarks/fleet_accuracy.py).

A true lemon is a component that the truth's faults hurt two or more jobs through (`jobs_affected`,
unioned over every fault on the same asset: one rack event that hit two jobs, or a GPU that fell off the
bus in one job and threw a DBE in another). Faults that are never a component's (preemption, software
crash, straggler) are left out. Names are resolved with the store's own inventory, as fleet resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass

from synestra_cli.fleet.assets import Inventory
from synestra_cli.fleet.lemons import LEMON_JOBS, NOT_A_COMPONENT, FleetReport


def true_lemons(truth: dict, inv: Inventory) -> dict[str, set[str]]:
    """asset id -> jobs its faults hurt, for the assets that hurt LEMON_JOBS or more."""
    hurt: dict[str, set[str]] = {}
    for f in truth["faults"]:
        if f["category"] in NOT_A_COMPONENT:
            continue
        asset = inv.of(f["category"], f["hosts"][0] if f["hosts"] else None, f["component"])
        if asset is not None:
            hurt.setdefault(asset.id, set()).update(f["jobs_affected"])
    return {a: jobs for a, jobs in hurt.items() if len(jobs) >= LEMON_JOBS}


@dataclass
class LemonScore:
    truth: set[str]
    found: set[str]  # flagged because they hurt >= 2 jobs
    repeat_only: set[str]  # flagged only for repeated error episodes (no truth to score them against)

    @property
    def precision(self) -> float:
        return len(self.found & self.truth) / len(self.found) if self.found else 1.0

    @property
    def recall(self) -> float:
        return len(self.found & self.truth) / len(self.truth) if self.truth else 1.0


def score(report: FleetReport, truth: dict, inv: Inventory) -> LemonScore:
    lemons = true_lemons(truth, inv)
    found = {r.asset.id for r in report.rows if len(r.jobs) >= LEMON_JOBS}
    repeat = {r.asset.id for r in report.lemons} - found
    return LemonScore(set(lemons), found, repeat)
