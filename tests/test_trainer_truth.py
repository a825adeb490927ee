"""The truth matrix over every trainer and launcher (issue 37): every scenario under every trainer, each
scenario under both launchers, at 8 nodes (tests/trainer_truth.py; ~10 min on 2 cores: `truth` and `slow`).

Targets per trainer and per launcher: every checkpoint found and none reported twice, triggers and causes
as explain's truth matrix requires (tests/test_explain_truth.py), no routine save or decoy blamed, every
job's tax buckets within 5% or 60 s and every restore's duration within 5% or 60 s of the truth.

A trainer or launcher whose reading is not fixed yet is `xfail(strict=False)`: the cell's misses say how it
fails (the report of the `sim-trainers` branch lists them for the readers).
"""

from __future__ import annotations

import pytest
from explain_truth import Score
from trainer_truth import Matrix, run_matrix

from synestra_cli.simulate.model import LAUNCHERS, TRAINERS

pytestmark = [pytest.mark.truth, pytest.mark.slow]

TARGETS = {"trigger": 0.98, "category": 0.95, "host": 0.95, "component": 0.90}
NOT_YET = {  # not at every target yet (docs/simulator.md, "After the readers"): NeMo 2.0's undated restore (only
    # Lightning's lines, no time: the load is bounded by the start-up around it), one Hugging Face job's `other` 100 s
    # over under torchrun; torchrun holds both
    "nemo2",
    "hf_trainer",
    "torchrun",
}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory) -> Matrix:
    return run_matrix(tmp_path_factory.mktemp("trainer-truth"), nodes=8, hours=4.0, seed=101)


def _assert_targets(sc: Score) -> None:
    rates = sc.rates()
    short = {k: rates[k] for k, floor in TARGETS.items() if rates[k] < floor}
    problems = {
        "not found": sc.checkpoints - sc.found,
        "duplicates": sc.duplicates,
        "blamed": sc.routine_blamed + sc.decoy_blamed,
        "jobs with a bucket off": sc.jobs_scored - sc.jobs_buckets_ok,
        "restores off": sc.restores_scored - sc.restores_ok,
    }
    problems = {k: v for k, v in problems.items() if v}
    assert not short and not problems, (short, problems, sc.misses[:25])


def _maybe(name: str):
    return (
        pytest.param(name, marks=pytest.mark.xfail(strict=False, reason="reader not fixed yet"))
        if name in NOT_YET
        else name
    )


@pytest.mark.parametrize("trainer", [_maybe(t) for t in TRAINERS])
def test_each_trainer_meets_the_targets(matrix, trainer):
    _assert_targets(matrix.by("trainer")[trainer])


@pytest.mark.parametrize("launcher", [_maybe(x) for x in LAUNCHERS])
def test_each_launcher_meets_the_targets(matrix, launcher):
    _assert_targets(matrix.by("launcher")[launcher])
