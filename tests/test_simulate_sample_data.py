"""sample_data/ is exactly what `synestra simulate` writes from the seed recorded in its truth.json."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from synestra_cli.simulate.scenarios import simulate

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data"


def digest(root: Path, skip: str | None = None) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not (skip and p.relative_to(root).parts[0] == skip)
    }


def test_sample_data_regenerates_byte_identical_from_its_seed(tmp_path):
    meta = json.loads((SAMPLE / "truth.json").read_text())
    assert meta["scenario"] == "campaign" and len(meta["jobs"]) >= 6
    simulate(
        tmp_path,
        meta["scenario"],
        seed=meta["seed"],
        nodes=meta["nodes"],
        hours=meta["hours"],
        gpus_per_node=meta["gpus_per_node"],
        gz=meta["gzip"],
    )
    mine = digest(SAMPLE, skip="kubernetes")  # the Kubernetes campaign beside it: the next test
    mine.pop("README.md", None)
    assert digest(tmp_path) == mine


@pytest.mark.heavy
def test_the_kubernetes_campaign_regenerates_byte_identical_from_its_seed(tmp_path):
    meta = json.loads((SAMPLE / "kubernetes" / "truth.json").read_text())
    assert meta["scenario"] == "campaign" and meta["scheduler"] == "kubernetes" and len(meta["jobs"]) >= 4
    simulate(
        tmp_path,
        meta["scenario"],
        seed=meta["seed"],
        nodes=meta["nodes"],
        hours=meta["hours"],
        gpus_per_node=meta["gpus_per_node"],
        gz=meta["gzip"],
        scheduler="kubernetes",
    )
    mine = digest(SAMPLE / "kubernetes")
    mine.pop("README.md", None)
    assert digest(tmp_path) == mine


def test_sample_data_stays_small():
    total = sum(p.stat().st_size for p in SAMPLE.rglob("*") if p.is_file())
    assert total < 9_000_000  # the Slurm campaign (~4.4 MB) and the Kubernetes one (~3.7 MB)
