"""Score explain and tax-report on the same faults told by every trainer and launcher (issue 37).

A covering set of cells: every scenario under every trainer once, each scenario under both launchers,
Slurm's own job-end lines and the trainers' previous wording on some cells. The cluster's telemetry does
not depend on who writes the job's log, so each (scenario, launcher) is simulated in full once and its
telemetry ingested once; every trainer's cell then adds only its job logs and sacct to a copy of that
store. Per cell: explain's checkpoints against truth.json (tests/explain_truth.py's score_job, plus the
same checkpoint reported twice), tax-report's buckets within 5% or 60 s (as tests/test_tax_truth.py),
and each restore's duration within 5% or 60 s.

Run: `python tests/trainer_truth.py [--nodes 8] [--hours 4] [--seed 101]` prints the table by trainer and
by launcher (the figures of issue 37); tests/test_trainer_truth.py holds the targets.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from explain_truth import Score, score_job  # noqa: E402

from synestra_cli.accounting.report import tax_report  # noqa: E402
from synestra_cli.explain.job import explain_job  # noqa: E402
from synestra_cli.formats.base import IngestOptions  # noqa: E402
from synestra_cli.ingest import ingest_paths  # noqa: E402
from synestra_cli.simulate.model import TRAINERS  # noqa: E402
from synestra_cli.simulate.scenarios import SCENARIOS, simulate  # noqa: E402
from synestra_cli.store.connect import connect  # noqa: E402

TOLERANCE_S, TOLERANCE_REL = 60.0, 0.05
MATCH_WINDOW_S = 1800.0  # a reported checkpoint is the truth's when it starts within this of it


@dataclass(frozen=True)
class Cell:
    scenario: str
    trainer: str
    launcher: str
    slurm_lines: bool
    version: str

    @property
    def label(self) -> str:
        extra = ("+slurm" if self.slurm_lines else "") + ("+prev" if self.version == "previous" else "")
        return f"{self.scenario}/{self.trainer}/{self.launcher}{extra}"


def cells(scenarios: list[str] | None = None, trainers: tuple[str, ...] = TRAINERS) -> list[Cell]:
    """Every scenario under every trainer; within a scenario the launchers alternate (JAX never under
    torchrun), a third of the cells print Slurm's lines, a quarter the previous wording."""
    names = scenarios or sorted(s for s in SCENARIOS if s != "campaign")
    out = []
    for i, sc in enumerate(names):
        for j, tr in enumerate(trainers):
            launcher = "torchrun" if (i + j) % 2 and tr != "orbax" else "srun"
            slurm = (i + 2 * j) % 3 == 0 or sc == "gpu-fell-off-bus-reboot"
            version = "previous" if (i + j) % 4 == 3 else "current"
            out.append(Cell(sc, tr, launcher, slurm, version))
    return out


def _ts(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", ""))


def _close(ours: float, truth: float) -> bool:
    return abs(ours - truth) <= max(TOLERANCE_S, TOLERANCE_REL * abs(truth))


def _match(truth_job: dict, mine: list) -> tuple[dict, int, int, list[tuple[dict, object]]]:
    """Pair each reported checkpoint with the truth's (same kind, the iteration as counted or printed
    zero-based, the nearest start): the truth renumbered as reported, duplicates, extras, and pairs."""
    taken: dict[int, object] = {}
    dup = extra = 0
    truth = [dict(c) for c in truth_job["checkpoints"]]
    for c in mine:
        if c.start is None or c.iteration is None:
            extra += 1
            continue
        near = [
            (abs((c.start - _ts(t["start"])).total_seconds()), k)
            for k, t in enumerate(truth)
            if t["kind"] == c.kind and c.iteration in (t["iteration"], t["iteration"] - 1)
        ]
        near = [x for x in near if x[0] <= MATCH_WINDOW_S]
        if not near:
            extra += 1
            continue
        k = min(near)[1]
        if k in taken:
            dup += 1
        else:
            taken[k] = c
    for k, c in taken.items():
        truth[k]["iteration"] = c.iteration  # as the reader numbers it: the trainer's own numbering is kept
    pairs = [(truth[k], c) for k, c in taken.items()]
    return {**truth_job, "checkpoints": truth}, dup, extra, pairs


def score_cell(conn, truth: dict, label: str) -> Score:
    total = Score()
    reports = {j.buckets.job_id: j for j in tax_report(conn).jobs}
    for job in truth["jobs"]:
        mine = explain_job(conn, job["job"]).checkpoints
        renumbered, dup, extra, pairs = _match(job, mine)
        sc = score_job(conn, renumbered, truth.get("decoys", []), f"{label}/{job['job']}", mine=mine)
        sc.duplicates += dup
        sc.misses += [f"{label}/{job['job']}: {dup} duplicate(s), {extra} extra"] if dup or extra else []
        for t, c in pairs:
            if t["kind"] != "restore":
                continue
            sc.restores_scored += 1  # a restore found without its end is not within 5% either
            ours = (c.end - c.start).total_seconds() if c.end is not None else float("nan")
            ok = c.end is not None and _close(ours, t["duration_s"])
            sc.restores_ok += ok
            if not ok:
                sc.misses.append(
                    f"{label}/{job['job']} restore@{t['iteration']}: {ours:.0f} s != {t['duration_s']:.0f} s"
                )
        sc.jobs_scored += 1
        rep = reports.get(job["job"])
        wrong = (
            list(job["buckets_s"])
            if rep is None
            else [k for k, v in job["buckets_s"].items() if not _close(rep.buckets.buckets_s.get(k, 0.0), v)]
        )
        sc.buckets_scored += len(job["buckets_s"])
        sc.buckets_ok += len(job["buckets_s"]) - len(wrong)
        sc.jobs_buckets_ok += not wrong
        if wrong:
            got = {k: round(rep.buckets.buckets_s.get(k, 0.0)) for k in wrong} if rep else "no report"
            sc.misses.append(
                f"{label}/{job['job']} buckets {wrong}: ours {got}, truth "
                + str({k: round(job["buckets_s"][k]) for k in wrong})
            )
        total.add(sc)
    return total


@dataclass
class Matrix:
    scores: dict[Cell, Score] = field(default_factory=dict)
    seconds: float = 0.0

    def by(self, key: str) -> dict[str, Score]:
        out: dict[str, Score] = {}
        for cell, sc in self.scores.items():
            out.setdefault(getattr(cell, key), Score()).add(sc)
        return out


def run_matrix(
    workdir: Path, nodes: int = 8, hours: float = 4.0, seed: int = 101, chosen: list[Cell] | None = None, log=None
) -> Matrix:
    """Simulate and score every cell; telemetry shared per (scenario, launcher)."""
    t0, m = time.time(), Matrix()
    todo = chosen or cells()
    groups: dict[tuple[str, str], list[Cell]] = {}
    for c in todo:
        groups.setdefault((c.scenario, c.launcher), []).append(c)
    for (scenario, launcher), group in groups.items():
        base = workdir / f"{scenario}-{launcher}"
        simulate(base, scenario, seed=seed, nodes=nodes, hours=hours, overwrite=True, launcher=launcher)
        telemetry = base / "telemetry.duckdb"
        with _store(telemetry) as conn:
            ingest_paths(
                conn, [p for p in (base / "exports").iterdir() if p.name not in ("jobs", "sacct.txt")], IngestOptions()
            )
        for cell in group:
            out = workdir / cell.label.replace("/", "-").replace("+", "_")
            simulate(
                out,
                scenario,
                seed=seed,
                nodes=nodes,
                hours=hours,
                overwrite=True,
                telemetry=False,
                trainer=cell.trainer,
                launcher=launcher,
                slurm_lines=cell.slurm_lines,
                trainer_version=cell.version,
            )
            db = out / "store.duckdb"
            shutil.copyfile(telemetry, db)
            with _store(db) as conn:
                ingest_paths(conn, [out / "exports" / "jobs", out / "exports" / "sacct.txt"], IngestOptions())
                m.scores[cell] = score_cell(conn, json.loads((out / "truth.json").read_text()), cell.label)
            shutil.rmtree(out, ignore_errors=True)
            if log:
                log(f"{cell.label}: {m.scores[cell].rates()['checkpoints']} checkpoints, {time.time() - t0:.0f} s")
        shutil.rmtree(base, ignore_errors=True)
    m.seconds = time.time() - t0
    return m


class _store:
    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.conn = connect(self.path)
        return self.conn

    def __exit__(self, *exc):
        self.conn.close()


def _pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}%" if d else "    -"


def table(m: Matrix) -> str:
    head = (
        f"{'':<12} {'cells':>5} {'found':>11} {'dup':>4} {'trigger':>7} {'category':>8} {'host':>6} "
        f"{'comp':>6} {'blamed':>6} {'buckets':>7} {'jobs ok':>9} {'restore':>9}"
    )
    rows = [head]
    for key in ("trainer", "launcher"):
        for name, sc in sorted(m.by(key).items()):
            n = sum(1 for c in m.scores if getattr(c, key) == name)
            rows.append(
                f"{name:<12} {n:>5} {sc.found:>5}/{sc.checkpoints:<5} {sc.duplicates:>4} "
                f"{_pct(sc.trigger_ok, sc.checkpoints):>7} {_pct(sc.category_ok, sc.caused):>8} "
                f"{_pct(sc.host_ok, sc.host_scored):>6} {_pct(sc.component_ok, sc.caused):>6} "
                f"{sc.routine_blamed + sc.decoy_blamed:>6} "
                f"{_pct(sc.buckets_ok, sc.buckets_scored):>7} {sc.jobs_buckets_ok:>4}/{sc.jobs_scored:<4} "
                f"{sc.restores_ok:>4}/{sc.restores_scored:<4}"
            )
        rows.append("")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--hours", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--misses", type=int, default=0, help="print this many misses per trainer")
    ap.add_argument("--scenario", action="append", help="only this scenario (repeatable; default: all)")
    ap.add_argument("--trainer", action="append", choices=TRAINERS, help="only this trainer (repeatable)")
    args = ap.parse_args(argv)
    chosen = cells(args.scenario, tuple(args.trainer or TRAINERS))
    with tempfile.TemporaryDirectory(prefix="trainer-truth-") as tmp:
        log = lambda s: print(s, file=sys.stderr)  # noqa: E731
        m = run_matrix(Path(tmp), args.nodes, args.hours, args.seed, chosen, log=log)
    print(
        f"trainer x launcher truth: {len(m.scores)} cells, {args.nodes} nodes, {args.hours} h, seed {args.seed}, "
        f"{m.seconds:.0f} s"
    )
    print(table(m))
    if args.misses:
        for name, sc in sorted(m.by("trainer").items()):
            print(f"--- {name}")
            print("\n".join(sc.misses[: args.misses]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
