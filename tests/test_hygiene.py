"""The shape of the house: the library stays free of the CLI's dependencies; the entry point works."""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys

import synestra_cli

LIBRARY_MODULES = [
    m.name for m in pkgutil.walk_packages(synestra_cli.__path__, "synestra_cli.")
    if not m.name.startswith("synestra_cli.cli")
]


def test_importing_the_whole_library_loads_neither_click_nor_rich():
    code = (
        "import importlib, sys\n"
        f"for m in {LIBRARY_MODULES!r}: importlib.import_module(m)\n"
        "print(sorted(k for k in ('click', 'rich') if k in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_installed_entry_point_prints_its_version():
    exe = shutil.which("synestra")
    assert exe, "the console script is not installed (pip install -e .)"
    out = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"synestra, version {synestra_cli.__version__}"


def test_every_command_has_help_with_an_example():
    from click.testing import CliRunner

    from synestra_cli.cli.main import cli

    runner = CliRunner()
    for name in cli.list_commands(None):
        result = runner.invoke(cli, [name, "-h"])
        assert result.exit_code == 0, name
        assert "Example" in result.stdout, f"`synestra {name} -h` shows no example"


def test_no_test_reads_the_shared_folder_beside_the_clone():
    """A clone alone must pass: real samples live in tests/data/ with their provenance."""
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    offenders = [
        p.name for p in tests.glob("*.py")
        if p.name != Path(__file__).name and ('"shared"' in (text := p.read_text()) or "../shared" in text)
    ]
    assert offenders == []
    assert (tests / "data" / "real_samples" / "syslog" / "PROVENANCE.md").is_file()
