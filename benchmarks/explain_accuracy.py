"""Score `explain` against the simulator's truth and print the matrix (issue 11's closing figures).

    python benchmarks/explain_accuracy.py --seeds 101 202 303 --nodes 8 --work /tmp/acc
    python benchmarks/explain_accuracy.py --scenarios ghost-link --seeds 5 --nodes 256 --hours 3 --campus
    python benchmarks/explain_accuracy.py --store c512.duckdb --truth c512/truth.json

Each (scenario, seed) is simulated, ingested into a fresh store and every job of its truth explained and
scored by tests/explain_truth.py, the scorer the truth tests assert with (trigger, cause category, host,
component; routine saves blamed; decoys blamed). `--campus` samples as a campus does (DCGM 1 min, node
exporter 2 min, SNMP and optics 5 min) whatever the size; `--jobs` scores only those jobs (the main job
of a big campus is `1001`). Prints one row per run and the total, and writes them as JSON (--out).
`--store DB --truth truth.json` scores a store ingested already (the 512-node campaign, whose ingest
takes minutes) instead of simulating one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the scorer's own imports (simcache)

from synestra_cli.simulate.export import Intervals  # noqa: E402
from synestra_cli.simulate.scenarios import SCENARIOS  # noqa: E402
from tests.explain_truth import Score, run_scenario  # noqa: E402

CAMPUS = Intervals(dcgm=60.0, ib=120.0, snmp=300.0, optics=300.0)
COLUMNS = ("checkpoints", "trigger", "non_routine", "category", "host", "component", "routine_blamed", "decoy_blamed")


def _row(label: str, score: Score) -> dict:
    return {"run": label, **score.rates(), "misses": score.misses}


def _print(rows: list[dict]) -> None:
    print("| run | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for r in rows:
        cells = [f"{r[c]:.1%}" if isinstance(r[c], float) else str(r[c]) for c in COLUMNS]
        print(f"| {r['run']} | " + " | ".join(cells) + " |")


def _score_store(store: Path, truth_path: Path, jobs: list[str] | None) -> None:
    """Every job of the truth (or those in `jobs`) explained from a store ingested already, scored."""
    from synestra_cli.store import open_store
    from tests.explain_truth import score_job

    truth = json.loads(truth_path.read_text())
    total = Score()
    with open_store(store, read_only=True) as conn:
        for job in truth["jobs"]:
            if jobs is None or job["job"] in jobs:
                total.add(score_job(conn, job, truth.get("decoys", []), job["job"]))
    _print([_row(f"{truth['scenario']} s{truth['seed']} n{truth['nodes']} ({store.name})", total)])
    for miss in total.misses:
        print(f"miss: {miss}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", nargs="*", default=sorted(SCENARIOS), help="default: every scenario")
    ap.add_argument("--seeds", nargs="+", type=int, default=[101, 202, 303])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--hours", type=float, default=6.0)
    ap.add_argument("--campus", action="store_true", help="campus sampling whatever the size")
    ap.add_argument("--jobs", nargs="*", help="score only these jobs (default: every job of the truth)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/synestra-accuracy"))
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--store", type=Path, help="score this store, already ingested, against --truth (no simulation): a campus"
    )
    ap.add_argument("--truth", type=Path, help="the truth.json of the simulation --store was ingested from")
    args = ap.parse_args()
    if args.store:
        if not args.truth:
            ap.error("--store needs --truth")
        _score_store(args.store, args.truth, args.jobs)
        return
    unknown = sorted(set(args.scenarios) - set(SCENARIOS))
    if unknown:
        ap.error(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(sorted(SCENARIOS))}")
    args.work.mkdir(parents=True, exist_ok=True)
    rows, total = [], Score()
    for name in args.scenarios:
        for seed in args.seeds:
            score = run_scenario(
                args.work, name, seed, args.nodes, args.hours, intervals=CAMPUS if args.campus else None, jobs=args.jobs
            )
            total.add(score)
            rows.append(_row(f"{name} s{seed} n{args.nodes}", score))
            print(f"{name} seed {seed}: {score.rates()}", file=sys.stderr, flush=True)
    rows.append(_row(f"total ({len(args.scenarios)} scenarios x seeds {' '.join(map(str, args.seeds))})", total))
    _print(rows)
    for miss in total.misses:
        print(f"miss: {miss}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
