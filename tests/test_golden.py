"""Golden files for the human renderings (tables, trees, markdown) on sample_data: a change to what a
reader sees shows up as a diff to review, not by accident. Regenerate after an intended change with
`pytest tests/test_golden.py --update-golden` and commit tests/golden/ (tests/golden/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "golden"
WIDTH = "100"  # the tables are laid out for 100 columns, as a pipe with COLUMNS=100
# explain's trees name the evidence's files by absolute path, as long as the clone's folder: wide enough
# that no line of theirs wraps, and printed relative to the clone, they read the same in every clone
WIDE = "400"

RENDERINGS = {
    "jobs.txt": ["jobs"],
    "jobs-80.txt": ["jobs"],
    "attempts-1003.txt": ["jobs", "--job", "1003"],
    "explain-1003.txt": ["explain", "--job", "1003"],
    "explain-1003-tax.txt": ["explain", "--job", "1003", "--tax"],
    "explain-1003.md": ["explain", "--job", "1003", "--format", "markdown"],
    "explain-1003-1950.md": ["explain", "--job", "1003", "--checkpoint", "1950", "--format", "markdown"],
    "tax-report-1003-price.txt": ["tax-report", "--job", "1003", "--gpu-hour-price", "2.5"],
    "tax-report-all.txt": ["tax-report", "--all"],
}


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("golden") / "sample.duckdb"
    res = CliRunner().invoke(cli, ["ingest", str(ROOT / "sample_data" / "exports"), "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db


@pytest.mark.parametrize("name", RENDERINGS)
def test_rendering_matches_its_golden_file(sample_store, request, name):
    width = "80" if name.endswith("-80.txt") else WIDE if name.startswith("explain") else WIDTH
    res = CliRunner().invoke(cli, [*RENDERINGS[name], "--db", str(sample_store)], env={"COLUMNS": width})
    assert res.exit_code == 0, res.output
    stdout = res.stdout.replace(f"{ROOT}/", "")
    golden = GOLDEN / name
    if request.config.getoption("--update-golden"):
        golden.write_text(stdout)
        return
    assert golden.exists(), f"{golden} is missing: run pytest tests/test_golden.py --update-golden"
    assert stdout == golden.read_text(), (
        f"{name} drifted from its golden file: review the diff; if it is intended, "
        "run pytest tests/test_golden.py --update-golden and commit tests/golden/"
    )
