"""tax-report against the simulator's ground truth: every scenario, three seeds, several sizes.

Each bucket must match the truth within 5% or 60 s, and the buckets must sum to the wall time exactly.
Only the job logs and sacct are ingested: the buckets come from the job's own history.
"""

from __future__ import annotations

import json

import pytest

from synestra_cli.accounting.report import tax_report
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.simulate.scenarios import SCENARIOS, simulate
from synestra_cli.store.connect import memory_store

pytestmark = pytest.mark.truth  # a ground-truth matrix: `pytest -m "not truth"` skips it while developing

SEEDS_AND_SIZES = [(101, 8), (202, 16), (303, 32)]  # seeds never used while developing
TOLERANCE_S, TOLERANCE_REL = 60.0, 0.05


def _close(ours: float, truth: float) -> bool:
    return abs(ours - truth) <= max(TOLERANCE_S, TOLERANCE_REL * abs(truth))


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_buckets_match_the_truth(scenario, tmp_path):
    misses = []
    for seed, nodes in SEEDS_AND_SIZES:
        out = tmp_path / f"{seed}"
        simulate(out, scenario, seed=seed, nodes=nodes, hours=3, telemetry=False)  # job logs and sacct only
        truth = {j["job"]: j for j in json.loads((out / "truth.json").read_text())["jobs"]}
        conn = memory_store()
        reports = ingest_paths(conn, [out / "exports" / "jobs", out / "exports" / "sacct.txt"], IngestOptions())
        assert all(r.status == "loaded" and r.rejected == 0 for r in reports), [r.error for r in reports]
        jobs = tax_report(conn).jobs
        assert {j.buckets.job_id for j in jobs} == set(truth)
        for job in jobs:
            t = truth[job.buckets.job_id]
            assert sum(job.buckets.buckets_s.values()) == pytest.approx(job.buckets.wall_s, abs=1e-6)
            assert _close(job.buckets.wall_s, t["wall_s"])
            misses += [
                f"seed {seed} job {job.buckets.job_id} {name}: ours {v:.1f} s, truth {t['buckets_s'][name]:.1f} s"
                for name, v in job.buckets.buckets_s.items()
                if not _close(v, t["buckets_s"][name])
            ]
        conn.close()
    assert not misses, "\n".join(misses)
