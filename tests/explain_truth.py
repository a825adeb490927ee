"""Score `explain` against the simulator's truth.json (used by tests and benchmarks/explain_accuracy.py).

A checkpoint is matched by (kind, iteration) and, among equals, the nearest start. Per checkpoint:
trigger right; for a truth cause, category right, host among the truth's hosts, component right;
for a routine truth checkpoint, no cause given; and no cause ever named on a decoy's component.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import simcache

from synestra_cli.explain.job import explain_job
from synestra_cli.explain.rules import RACK_CATEGORIES
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.simulate.export import Intervals
from synestra_cli.simulate.scenarios import simulate
from synestra_cli.store import open_store
from synestra_cli.store.connect import connect

# Categories whose host the exports cannot show (explain says host null rather than guess): "host" is
# scored where the exports can show it, "host_all" counts these too. None today: a straggler's host is
# the one whose GPUs stay busy while its peers wait (signals/activity.py). A truth without hosts (a
# preemption: no faulty host) is right only with host null.
UNOBSERVABLE_HOST: tuple[str, ...] = ()


@dataclass
class Score:
    checkpoints: int = 0
    trigger_ok: int = 0
    caused: int = 0
    category_ok: int = 0
    host_ok: int = 0
    host_scored: int = 0
    host_unobservable: int = 0
    component_ok: int = 0
    routine_blamed: int = 0
    decoy_blamed: int = 0
    misses: list[str] = field(default_factory=list)
    right_confidences: list[float] = field(default_factory=list)  # of the causes named fully right
    # tests/trainer_truth.py: the same save reported more than once, tax buckets and restores checked
    found: int = 0
    duplicates: int = 0
    buckets_ok: int = 0
    buckets_scored: int = 0
    jobs_buckets_ok: int = 0
    jobs_scored: int = 0
    restores_ok: int = 0
    restores_scored: int = 0

    def add(self, other: Score) -> None:
        for k in (
            "checkpoints",
            "trigger_ok",
            "caused",
            "category_ok",
            "host_ok",
            "host_scored",
            "host_unobservable",
            "component_ok",
            "routine_blamed",
            "decoy_blamed",
            "found",
            "duplicates",
            "buckets_ok",
            "buckets_scored",
            "jobs_buckets_ok",
            "jobs_scored",
            "restores_ok",
            "restores_scored",
        ):
            setattr(self, k, getattr(self, k) + getattr(other, k))
        self.misses += other.misses
        self.right_confidences += other.right_confidences

    def rates(self) -> dict[str, float]:
        def r(n: int, d: int) -> float:
            return round(n / d, 4) if d else 1.0

        return {
            "trigger": r(self.trigger_ok, self.checkpoints),
            "category": r(self.category_ok, self.caused),
            "host": r(self.host_ok, self.host_scored),
            "host_all": r(self.host_ok, self.caused),
            "component": r(self.component_ok, self.caused),
            "routine_blamed": self.routine_blamed,
            "decoy_blamed": self.decoy_blamed,
            "checkpoints": self.checkpoints,
            "non_routine": self.caused,
        }


def _ts(s: str | None) -> datetime | None:
    return datetime.fromisoformat(s.replace("Z", "")) if s else None


def _on_decoy(cause, decoy: dict, truth: dict | None) -> bool:
    """Blamed on the decoy: its component, and either not the real cause's or seen in the decoy's time."""
    if cause is None or cause.component != decoy["component"] or cause.host not in decoy["hosts"]:
        return False
    same_as_truth = truth is not None and cause.component == truth["component"] and cause.host in truth["hosts"]
    lo, hi = _ts(decoy["start"]), _ts(decoy["end"])
    in_decoy_time = bool(cause.first_signal and lo and hi and lo - timedelta(seconds=120) <= cause.first_signal <= hi)
    # A decoy on the very component of the real fault, overlapping it in time, cannot be told apart by what
    # is named: the answer is the truth's when its first signal is the real fault's (within two scrapes).
    real = _ts(truth["first_signal"]) if truth else None
    near_truth = bool(
        same_as_truth and real and cause.first_signal and abs((cause.first_signal - real).total_seconds()) <= 120
    )
    return not same_as_truth or (in_decoy_time and not near_truth)


def _rack_named(cause, truth: dict) -> bool:
    """A rack event is named by its rack, not by one of its hosts (issue 15): its hosts are the truth's."""
    return cause.host is None and cause.category in RACK_CATEGORIES and cause.component == truth["component"]


def score_job(conn, truth_job: dict, decoys: list[dict], label: str, mine: list | None = None) -> Score:
    """`mine`: explain's checkpoints when the caller already has them (tests/trainer_truth.py)."""
    sc = Score()
    mine = explain_job(conn, truth_job["job"]).checkpoints if mine is None else mine
    for t in truth_job["checkpoints"]:
        start = _ts(t["start"])
        same = [c for c in mine if c.kind == t["kind"] and c.iteration == t["iteration"]]
        got = min(same, key=lambda c: abs((c.start - start).total_seconds()) if c.start else 1e12, default=None)
        sc.checkpoints += 1
        where = f"{label} {t['kind']}@{t['iteration']}"
        if got is None:
            sc.misses.append(f"{where}: not found")
            continue
        sc.found += 1
        sc.trigger_ok += got.trigger == t["trigger"]
        if got.trigger != t["trigger"]:
            sc.misses.append(f"{where}: trigger {got.trigger} != {t['trigger']}")
        cause = got.cause
        for d in decoys:
            if truth_job["job"] in d.get("jobs_affected", []):
                continue  # a fault outside the main job may be the real cause for this one
            if _on_decoy(cause, d, t["cause"]):
                sc.decoy_blamed += 1
                sc.misses.append(f"{where}: blamed decoy {d['kind']} {cause.host} {cause.component}")
        if t["cause"] is None:
            if cause is not None:
                sc.routine_blamed += 1
                sc.misses.append(f"{where}: routine given {cause.category}")
            continue
        tc = t["cause"]
        sc.caused += 1
        ok = cause is not None and cause.category == tc["category"]
        sc.category_ok += ok
        host_right = cause is not None and (
            (cause.host in tc["hosts"] or _rack_named(cause, tc)) if tc["hosts"] else cause.host is None
        )
        sc.host_ok += host_right
        if tc["category"] in UNOBSERVABLE_HOST and not host_right:
            sc.host_unobservable += 1
        else:
            sc.host_scored += 1
        sc.component_ok += cause is not None and cause.component == tc["component"]
        if ok and host_right and cause.component == tc["component"]:
            sc.right_confidences.append(cause.confidence)
        if not ok or not host_right or cause.component != tc["component"]:
            got_s = f"{cause.category} {cause.host} {cause.component}" if cause else "no cause"
            sc.misses.append(f"{where}: {got_s} != {tc['category']} {tc['hosts'][:2]} {tc['component']}")
    return sc


def run_scenario(
    workdir: Path | None,
    scenario: str,
    seed: int,
    nodes: int,
    hours: float = 6.0,
    keep: bool = False,
    intervals: Intervals | None = None,
    jobs: list[str] | None = None,
    scheduler: str = "slurm",
) -> Score:
    """Simulate, ingest into a fresh store, explain every job of the truth (or those in `jobs`) and score
    it. `intervals` sets the exporters' sampling (default: what the cluster's size implies); `scheduler` how the
    jobs are told (slurm, or kubernetes: pods, events and container logs).

    workdir None: the simulation and its store come from the tests' shared cache (tests/simcache.py),
    built once per code version for every module and worker. Otherwise they are made under workdir and
    deleted afterwards unless `keep` (campus-sized runs: hundreds of MB, not worth keeping)."""
    if workdir is None:
        on = {"scheduler": scheduler} if scheduler != "slurm" else {}  # Slurm's runs keep their cache key
        sim = simcache.simulation(scenario, seed=seed, nodes=nodes, hours=hours, intervals=intervals, **on)
        with open_store(simcache.ingested(sim), read_only=True) as conn:
            return _score_all(conn, simcache.truth(sim), f"{scenario}/s{seed}/n{nodes}", jobs)
    out = workdir / f"{scenario}-{seed}-{nodes}"
    simulate(
        out, scenario, seed=seed, nodes=nodes, hours=hours, overwrite=True, intervals=intervals, scheduler=scheduler
    )
    db = out / "store.duckdb"
    db.unlink(missing_ok=True)
    conn = connect(db)
    try:
        ingest_paths(conn, [out / "exports"], IngestOptions())
        truth = json.loads((out / "truth.json").read_text())
        return _score_all(conn, truth, f"{scenario}/s{seed}/n{nodes}", jobs)
    finally:
        conn.close()
        if not keep:
            shutil.rmtree(out, ignore_errors=True)


def _score_all(conn, truth: dict, label: str, jobs: list[str] | None) -> Score:
    total = Score()
    for job in truth["jobs"]:
        if jobs is None or job["job"] in jobs:
            total.add(score_job(conn, job, truth.get("decoys", []), f"{label}/{job['job']}"))
    return total
