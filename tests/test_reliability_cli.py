"""Issue 38, the command line's side: every numeric option and variable checked once at the edge (finite,
in range, in units), every error a command can meet mapped to its documented exit code, one line and
never a traceback. Each test failed on the code before it (the defect's number in the issue is in its name).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from test_hostile_cli import _as_nobody, open_dir  # noqa: F401  (a fixture)

from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode

pytestmark = pytest.mark.reliability

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "exports"
SYNESTRA = str(Path(sys.executable).parent / "synestra")
TRACEBACK = "Traceback (most recent call last)"


def run(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [SYNESTRA, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


def one_line(res: subprocess.CompletedProcess, code: int) -> bool:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    return res.returncode == code and len(lines) == 1 and TRACEBACK not in res.stderr


def usage_error(res: subprocess.CompletedProcess) -> bool:
    """Exit 2 with one error line: click's own (`Error: Invalid value for ...`, after its usage line), or ours."""
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith(("Error: ", "error: "))]
    return res.returncode == ExitCode.USAGE and len(errors) == 1 and TRACEBACK not in res.stderr


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """sacct and a job log: a small real store."""
    folder = tmp_path_factory.mktemp("store")
    db = folder / "s.duckdb"
    res = run("ingest", str(SAMPLE / "sacct.txt"), str(SAMPLE / "jobs" / "1001.log"), "--db", str(db))
    assert res.returncode == 0, res.stderr
    return db


# ---------------------------------------------------------------- defects 11, 14, 17: numbers at the edge

OPTIONS = [
    ("tax-report", "--gpu-hour-price"),
    ("tax-report", "--capacity-gpus"),
    ("tax-report", "--fail-over"),
    ("risks", "--history-hours"),
    ("risks", "--fail-over"),
    ("fleet", "--top"),
    ("explain --job 1001", "--checkpoint"),
    ("compact", "--retain"),
    ("ingest --follow x", "--interval"),
    ("ingest --follow x", "--max-polls"),
    ("ingest x", "--year"),
    ("simulate {tmp} --scenario ghost-link", "--hours"),
    ("simulate {tmp} --scenario ghost-link", "--seed"),
]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e308", "-1", "1e400", "x"])
@pytest.mark.parametrize(("command", "option"), OPTIONS, ids=[f"{c.split()[0]} {o}" for c, o in OPTIONS])
def test_11_14_17_every_numeric_option_refuses_what_is_not_a_finite_number_in_range(tmp_path, command, option, value):
    """In process (click parses before the command runs): 91 cases in a second."""
    args = [*command.format(tmp=tmp_path / "sim").split(), f"{option}={value}"]
    if args[0] != "simulate":
        args += ["--db", str(tmp_path / "s.duckdb")]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == ExitCode.USAGE, res.output
    assert option in res.stderr and "Traceback" not in res.output
    assert not (tmp_path / "s.duckdb").exists() and not (tmp_path / "sim").exists()


@pytest.mark.heavy
def test_17_a_huge_gpu_hour_price_is_refused_with_its_range(store):
    res = run("tax-report", "--all", "--gpu-hour-price", "1e308", "--db", str(store))
    assert res.returncode == ExitCode.USAGE and "expected 0 to 10,000 USD per GPU-hour" in res.stderr
    assert "$inf" not in res.stdout and res.stdout == ""
    ok = run("tax-report", "--all", "--gpu-hour-price", "9999.5", "--db", str(store))
    assert ok.returncode == 0 and "$" in ok.stdout and "inf" not in ok.stdout


@pytest.mark.heavy
@pytest.mark.parametrize("args", [["risks", "--at", "0001-01-01"], ["risks", "--at", "-1e308h"]])
def test_11_risks_at_an_impossible_time_is_one_line_and_exit_2(store, args):
    res = run(*args, "--db", str(store))
    assert res.returncode == ExitCode.USAGE and TRACEBACK not in res.stderr, res.stderr
    assert "--at" in res.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("value", ["inf", "nan", "1e308"])
def test_11_risks_history_hours_out_of_range_is_one_line_and_exit_2(store, value):
    res = run("risks", "--history-hours", value, "--db", str(store))
    assert res.returncode == ExitCode.USAGE and TRACEBACK not in res.stderr
    assert "expected 0 to 87,600 hours" in res.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("year", ["-5", "99999", "0"])
def test_14_ingest_year_out_of_range_is_refused_once_before_any_file(tmp_path, year):
    db = tmp_path / "s.duckdb"
    res = run("ingest", str(SAMPLE / "sacct.txt"), str(SAMPLE / "topology.csv"), "--year", year, "--db", str(db))
    assert res.returncode == ExitCode.USAGE and TRACEBACK not in res.stderr, res.stderr
    assert res.stderr.count("--year") == 1 and "expected 1 to 9,999" in res.stderr
    assert not db.exists()


@pytest.mark.heavy
@pytest.mark.parametrize("value", ["99999999TB", "0.0001%", "1B", "100KB", "200%", "0%"])
def test_14_an_out_of_range_memory_limit_is_a_usage_error(store, value):
    res = run("jobs", "--db", str(store), env={"SYNESTRA_MEMORY_LIMIT": value})
    assert one_line(res, ExitCode.USAGE), res.stderr
    assert "SYNESTRA_MEMORY_LIMIT" in res.stderr and "8MB to 1PB" in res.stderr


@pytest.mark.heavy
def test_14_a_sql_query_over_the_memory_limit_exits_10(store):
    res = run(
        "sql", "SELECT list(range) FROM range(60000000)", "--db", str(store), env={"SYNESTRA_MEMORY_LIMIT": "200MB"}
    )
    assert one_line(res, ExitCode.MEMORY), res.stderr
    assert "SYNESTRA_MEMORY_LIMIT" in res.stderr


@pytest.mark.heavy
def test_14_engine_ray_without_ray_is_a_usage_error_with_the_install_hint(tmp_path):
    pytest.importorskip("sys")
    try:
        import ray  # noqa: F401

        pytest.skip("Ray is installed here")
    except ImportError:
        pass
    res = run("ingest", str(SAMPLE / "sacct.txt"), "--engine", "ray", "--db", f"{tmp_path}/lake/")
    assert one_line(res, ExitCode.USAGE), res.stderr
    assert "pip install 'synestra[distributed]'" in res.stderr
    res = run("ingest", str(SAMPLE / "sacct.txt"), "--engine", "ray", "--db", str(tmp_path / "s.duckdb"))
    assert one_line(res, ExitCode.USAGE) and "works on a lake" in res.stderr


# ---------------------------------------------------------------- defect 13: one huge value in `sql`


@pytest.mark.heavy
def test_13_the_memory_limit_bounds_one_huge_value_in_sql(store):
    """`repeat('x', 1.5e9)` is one value DuckDB allocates outside its buffer pool: 3 GB of RSS under a 1 GB
    budget. The sandbox's process is bounded too: DuckDB's out-of-memory, exit 10, within the budget."""
    probe = (
        "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(p.stderr, file=sys.stderr)"
    )
    query = "SELECT length(repeat('x', 1500000000)) AS n"
    res = subprocess.run(
        [sys.executable, "-c", probe, SYNESTRA, "sql", query, "--db", str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYNESTRA_MEMORY_LIMIT": "1GB"},
    )
    code, peak_kb = map(int, res.stdout.split())
    assert code == ExitCode.MEMORY and TRACEBACK not in res.stderr, res.stderr
    assert peak_kb * 1024 < 1.1e9, peak_kb
    small = run(
        "sql", "SELECT length(repeat('x', 1000000)) AS n", "--db", str(store), env={"SYNESTRA_MEMORY_LIMIT": "1GB"}
    )
    assert small.returncode == 0 and "1000000" in small.stdout


# ---------------------------------------------------------------- defects 9 and 10: the store's own state


@pytest.mark.heavy
def test_9_a_store_in_a_read_only_folder_refuses_ingest_and_forget_with_exit_8(open_dir, store):  # noqa: F811
    folder = open_dir / "ro"
    folder.mkdir()
    db = folder / "s.duckdb"
    shutil.copy(store, db)
    db.chmod(0o666)  # the file is writable; its folder, where the WAL goes, is not
    folder.chmod(0o555)
    for args in (["ingest", str(SAMPLE / "topology.csv")], ["forget", "1"]):
        res = _as_nobody(*args, db=db)
        assert one_line(res, ExitCode.STORE), res.stderr
        assert "read-only folder" in res.stderr and "a bug" not in res.stderr
    res = _as_nobody("jobs", "--format", "csv", db=db)
    assert res.returncode == 0 and "1001" in res.stdout


READERS = [
    ["jobs"],
    ["sources"],
    ["explain", "--job", "1001"],
    ["tax-report", "--all"],
    ["fleet"],
    ["risks"],
    ["annotations", "--all"],
    ["sql", "SELECT * FROM jobs"],
]


@pytest.mark.heavy
@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_10_a_store_killed_before_its_tables_exist_is_empty_for_readers(tmp_path, args):
    db = tmp_path / "s.duckdb"
    duckdb.connect(str(db)).close()  # what a kill in the first half second of a first ingest leaves
    res = run(*args, "--db", str(db))
    assert one_line(res, ExitCode.EMPTY_STORE), res.stderr
    assert "a bug" not in res.stderr and "run `synestra ingest" in res.stderr
    again = run("ingest", str(SAMPLE / "sacct.txt"), "--db", str(db))  # and the next ingest makes it whole
    assert again.returncode == 0, again.stderr


# ---------------------------------------------------------------- defect 12: outputs that cannot be written


@pytest.mark.heavy
@pytest.mark.parametrize(
    "target", ["missing/folder/t.html", "/dev/full", "{tmp}"], ids=["missing-folder", "dev-full", "a-folder"]
)
def test_12_timeline_into_an_output_that_cannot_be_written_is_one_line(store, tmp_path, target):
    out = target.format(tmp=tmp_path)
    if target.startswith("missing"):
        out = str(tmp_path / target)
    res = run("timeline", "--job", "1001", "-o", out, "--db", str(store))
    assert usage_error(res), res.stderr
    assert out in res.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("outdir", ["/dev/null", "{tmp}/file"], ids=["dev-null", "a-file"])
def test_12_simulate_into_something_that_is_not_a_folder_is_one_line(tmp_path, outdir):
    (tmp_path / "file").write_text("x")
    res = run("simulate", outdir.format(tmp=tmp_path), "--scenario", "ghost-link", "--nodes", "4", "--hours", "1")
    assert usage_error(res) and "not a folder" in res.stderr, res.stderr


@pytest.mark.heavy
def test_12_stdout_to_a_full_disk_is_one_line_not_a_traceback(store):
    with open("/dev/full", "w") as full:
        res = subprocess.run(
            [SYNESTRA, "sql", "SELECT * FROM range(100000)", "--format", "csv", "--db", str(store)],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert res.returncode == ExitCode.USAGE and TRACEBACK not in res.stderr, res.stderr
    assert "No space left on device" in res.stderr and "Exception ignored" not in res.stderr
