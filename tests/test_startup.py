"""Start-up: a command imports what it needs and no more (issue 32 item 3).

`synestra --help` lists the commands from words kept in cli/main.py, without importing one; `jobs` and
the `explain` of a kept job never load pandas, pyarrow, numpy or a plotting library. Measured with
`python -X importtime` in docs/performance.md ("Start-up").
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from synestra_cli.cli.main import COMMANDS, short_help

HEAVY = ("pandas", "pyarrow", "numpy", "matplotlib", "PIL")
# Runs the CLI as the console script does, then names the heavy packages it loaded (on stderr).
PROBE = """
import sys
from synestra_cli.cli.main import cli
sys.argv = ["synestra", *sys.argv[1:]]
try:
    cli()
except SystemExit:
    pass
print("LOADED", sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY)), file=sys.stderr)
""".replace("HEAVY", repr(HEAVY))


def _loaded(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, check=True)
    line = next(ln for ln in out.stderr.splitlines() if ln.startswith("LOADED "))
    return eval(line.removeprefix("LOADED "))  # noqa: S307 - our own probe's list of names


def test_the_listing_s_words_are_each_command_s_own_at_every_width():
    for name, (module, _) in COMMANDS.items():
        command = importlib.import_module(f"synestra_cli.cli.{module}").command
        for limit in range(20, 91):  # the listing is at most 100 wide, less 6 and the longest name
            assert short_help(name, limit) == command.get_short_help_str(limit), (name, limit)


def test_help_imports_no_command():
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom synestra_cli.cli.main import cli\n"
        "CliRunner().invoke(cli, ['--help'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('synestra_cli.cli.') and m != 'synestra_cli.cli.main'"
        " or m.split('.')[0] in ('duckdb', 'pyarrow', 'numpy', 'pandas', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.heavy
def test_help_jobs_and_a_kept_explanation_load_no_heavy_package(tmp_path: Path):
    from synestra_cli.accounting.kept import explanations as memo
    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import ingest_paths
    from synestra_cli.store.connect import connect

    root = Path(__file__).resolve().parents[1]
    db = tmp_path / "s.duckdb"
    conn = connect(db)
    ingest_paths(conn, [root / "sample_data" / "exports"], IngestOptions())
    memo.keep_all(conn)  # `explain` then reads the kept explanation, as a user's second run does
    conn.close()
    assert _loaded("--help") == []
    assert _loaded("jobs", "--db", str(db)) == []
    assert _loaded("explain", "--job", "1003", "--db", str(db)) == []
    assert _loaded("explain", "--job", "1003", "--db", str(db), "--format", "json") == []
