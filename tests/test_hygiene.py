"""The shape of the house: the library stays free of the CLI's dependencies; the entry point works."""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import synestra_cli

LIBRARY_MODULES = [
    m.name
    for m in pkgutil.walk_packages(synestra_cli.__path__, "synestra_cli.")
    if not m.name.startswith("synestra_cli.cli")
]


@pytest.mark.heavy
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
    tests = Path(__file__).resolve().parent
    offenders = [
        p.name
        for p in tests.glob("*.py")
        if p.name != Path(__file__).name and ('"shared"' in (text := p.read_text()) or "../shared" in text)
    ]
    assert offenders == []
    assert (tests / "data" / "real_samples" / "syslog" / "PROVENANCE.md").is_file()


ROOT = Path(__file__).resolve().parents[1]


def test_ci_runs_the_readmes_test_command():
    """.ci/run installs what the README's test command installs, then runs its test runner."""
    readme = (ROOT / "README.md").read_text()
    command = readme.split("Run the tests:", 1)[1].split("```sh\n", 1)[1].split("\n", 1)[0]
    install, runner = command.rsplit(" && ", 1)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert install in ci and runner in ci
    assert ci.index(install) < ci.index(runner)


def test_the_changelog_names_the_current_version():
    released = re.findall(r"^## (\d+\.\d+\.\d+)\b", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert released and released[0] == synestra_cli.__version__


def test_the_cli_reference_check_fails_when_the_file_drifts(tmp_path):
    spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "scripts" / "gen_cli_docs.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    out = tmp_path / "cli.md"
    assert gen.main(["--out", str(out)]) == 0
    assert gen.main(["--check", "--out", str(out)]) == 0
    assert "## synestra tax-report" in out.read_text() and "--fail-over PCT" in out.read_text()
    out.write_text(out.read_text().replace("--fail-over PCT", "--fail-over"))
    assert gen.main(["--check", "--out", str(out)]) == 1


def test_the_layers_contract_names_every_top_level_module():
    # import-linter checks only the modules a layer names: a new package left out would be unchecked
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    named = {m.strip(" ()") for layer in layers for m in layer.split("|")}
    top = {f"synestra_cli.{m.name}" for m in pkgutil.iter_modules(synestra_cli.__path__)}
    assert top - named == set(), "add these to a layer of [tool.importlinter] in pyproject.toml"
