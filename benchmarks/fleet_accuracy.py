"""Measure `fleet` and `risks` against the simulator's truth (issue 16's closing figures).

    python benchmarks/fleet_accuracy.py lemons --seeds 11 12 --nodes 16 --hours 48 --work /tmp/fleet
    python benchmarks/fleet_accuracy.py lead-time --seeds 1 2 3 4 5 --nodes 8 --hours 4 --work /tmp/fleet

lemons: simulate a `campaign`, ingest it, run fleet over the whole store and score its lemons against
truth.json (tests/fleet_truth.py: a true lemon hurt two or more jobs). lead-time: simulate `ghost-link`,
then run `risks --at T` (no lemon history) every STEP_S from the fault's onset to the reactive save it
caused, and report the earliest T at which the link is named, in minutes before the save; and whether
it is named at the half-way point (every ghost link of the truth that provoked a reactive save). Simulations
and stores are kept under --work and reused. `--data DIR` scores an existing simulation instead (its
exports/ and truth.json; the store goes under --work), e.g. `--data sample_data`.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from synestra_cli.formats.base import IngestOptions  # noqa: E402
from synestra_cli.ingest import ingest_paths  # noqa: E402
from synestra_cli.simulate.scenarios import simulate  # noqa: E402
from synestra_cli.store.connect import connect  # noqa: E402

STEP_S = 15.0


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "")).replace(tzinfo=None)


def _store(work: Path, scenario: str, seed: int, nodes: int, hours: float, data: Path | None = None):
    out = data or work / f"{scenario}-n{nodes}-h{hours:g}-s{seed}"
    if not (out / "truth.json").exists():
        simulate(out, scenario, seed, nodes, hours, overwrite=True)
    db = work / f"{out.resolve().name}.duckdb" if data else out / "store.duckdb"
    fresh = not db.exists()
    conn = connect(db)
    if fresh:
        ingest_paths(conn, [out / "exports"], IngestOptions())
    return conn, json.loads((out / "truth.json").read_text())


def _runs(args, scenario: str):
    if args.data:
        yield None, *_store(args.work, scenario, 0, 0, 0, args.data)
        return
    for seed in args.seeds:
        yield seed, *_store(args.work, scenario, seed, args.nodes, args.hours)


def lemons(args) -> None:
    from synestra_cli.fleet.assets import Inventory
    from synestra_cli.fleet.lemons import fleet_report
    from tests.fleet_truth import score

    for seed, conn, truth in _runs(args, "campaign"):
        report = fleet_report(conn)
        sc = score(report, truth, Inventory(conn))
        print(
            json.dumps(
                {
                    "seed": seed,
                    "jobs": len(report.jobs),
                    "true_lemons": sorted(sc.truth),
                    "found": sorted(sc.found),
                    "precision": round(sc.precision, 3),
                    "recall": round(sc.recall, 3),
                    "flagged_for_repeated_errors_only": sorted(sc.repeat_only),
                }
            )
        )
        conn.close()


def lead_time(args) -> None:

    for seed, conn, truth in _runs(args, "ghost-link"):
        for fault, save in _ghost_saves(truth):
            print(json.dumps({"seed": seed, **_lead(conn, fault, save)}))
        conn.close()


def _ghost_saves(truth: dict):
    """(fault, the reactive save it caused) for every ghost link that provoked one."""
    for fault in truth["faults"]:
        if fault["kind"] != "ghost_link":
            continue
        saves = [
            c
            for j in truth["jobs"]
            if j["job"] in fault["jobs_affected"]
            for c in j["checkpoints"]
            if c["trigger"] == "reactive"
            and c["cause"]
            and c["cause"]["component"] == fault["component"]
            and fault["hosts"][0] in c["cause"]["hosts"]
            and _ts(c["start"]) > _ts(fault["start"])
        ]
        if saves:
            yield fault, min(saves, key=lambda c: c["start"])


def _lead(conn, fault: dict, save: dict) -> dict:
    from synestra_cli.fleet.risks import risks_at

    asset = f"{fault['hosts'][0]}:{fault['component']}"
    onset, saved = _ts(fault["start"]), _ts(save["start"])
    half = onset + (saved - onset) / 2
    t, first = onset, None
    while t <= saved:
        if asset in {r.asset.id for r in risks_at(conn, t, history=None).degrading}:
            first = t
            break
        t += timedelta(seconds=STEP_S)
    at_half = asset in {r.asset.id for r in risks_at(conn, half, history=None).degrading}
    return {
        "link": asset,
        "onset": fault["start"],
        "reactive_save": save["start"],
        "onset_to_save_min": round((saved - onset).total_seconds() / 60, 2),
        "named_at_half_way": at_half,
        "earliest_named": first.isoformat() if first else None,
        "lead_min": round((saved - first).total_seconds() / 60, 2) if first else None,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=["lemons", "lead-time"])
    p.add_argument("--seeds", type=int, nargs="+", default=[11])
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--hours", type=float, default=48.0)
    p.add_argument("--work", type=Path, default=Path("benchmarks/cache/fleet"))
    p.add_argument("--data", type=Path, help="an existing simulation (exports/ and truth.json) instead")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    (lemons if args.what == "lemons" else lead_time)(args)


if __name__ == "__main__":
    main()
