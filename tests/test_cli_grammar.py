"""One grammar across commands (issue 14 item 4-5): every command with every --format it offers, the
time options in every form the JSON outputs write, --job repeated or comma-separated, --host, and
conflicting options refused the same way. The store is sample_data's sacct, topology, two job logs
and one host's syslog, built once per session."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
JOBS = ("1003", "1004")


@pytest.fixture(scope="session")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("grammar")
    exports = folder / "exports"
    (exports / "jobs").mkdir(parents=True)
    shutil.copy(SAMPLE / "sacct.txt", exports)
    shutil.copy(SAMPLE / "topology.csv", exports)
    shutil.copy(SAMPLE / "syslog" / "gpu-002.syslog.gz", exports)
    for job in JOBS:
        shutil.copy(SAMPLE / "jobs" / f"{job}.log", exports / "jobs")
    db = folder / "store.duckdb"
    res = CliRunner().invoke(cli, ["ingest", str(exports), "--db", str(db)])
    assert res.exit_code == 0, res.output
    return db


def run(store: Path, *args: str, env: dict | None = None):
    return CliRunner().invoke(cli, [*args, "--db", str(store)], env={"COLUMNS": "100", **(env or {})})


# the arguments each command needs besides --format (those that write go to a copy of the store)
COMMAND_ARGS = {
    "sources": [],
    "sql": ["SELECT job_id, [name, state] AS words FROM jobs ORDER BY job_id"],
    "formats": [],
    "jobs": [],
    "explain": ["--job", "1003"],
    "tax-report": ["--job", "1003"],
    "fleet": [],
    "risks": ["--history-hours", "0"],
    "annotations": ["--job", "1003"],
    "timeline": ["--job", "1003", "-o", "{tmp}/tl"],
    "packet": ["--job", "1003", "-o", "{tmp}/p"],
    "ingest": [str(SAMPLE / "topology.csv")],
    "forget": ["1"],
    "compact": [],
    "check": [],
    "simulate": ["{tmp}/sim", "--scenario", "routine", "--nodes", "4", "--hours", "1", "--gpus-per-node", "1"],
}
NO_DB = {"formats", "simulate"}


def _formats(name: str) -> list[str]:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    (fmt,) = [p for p in command.params if p.name == "fmt"]
    return list(fmt.type.choices) if isinstance(fmt.type, click.Choice) else ["table", "json", "csv"]


def test_every_command_has_format_and_an_invocation_here():
    assert set(cli.list_commands(click.Context(cli))) == set(COMMAND_ARGS)
    for name in COMMAND_ARGS:
        assert _formats(name), name


CASES = [(name, fmt) for name in COMMAND_ARGS for fmt in _formats(name)]


def _check_output(name: str, fmt: str, out: str) -> None:
    if fmt == "json":
        doc = json.loads(out)
        if name != "sql":  # the query's own rows; every other document says what it is
            docs = doc if isinstance(doc, list) else [doc]
            assert all(d["schema"].startswith("synestra.") for d in docs)
        if name not in ("sql", "simulate"):  # simulate's `nodes` is its own --nodes option
            assert "job_id" not in out and '"nodes"' not in out  # one name per concept: job, hosts
    elif fmt == "jsonl":
        assert all(json.loads(line) for line in out.splitlines())
    elif fmt == "csv":
        rows = list(csv.reader(io.StringIO(out)))
        assert rows and all(len(r) == len(rows[0]) for r in rows)
        # cells are scalars: a list is its items joined with spaces, never a JSON array
        assert not any(cell.startswith(("[", "{")) for r in rows for cell in r)
    elif fmt == "markdown":
        assert out.startswith("#")
    elif fmt == "table":
        assert out.strip() or name in ("ingest", "forget", "compact", "check")  # their human report is on stderr


@pytest.mark.parametrize(("name", "fmt"), CASES, ids=[f"{n}-{f}" for n, f in CASES])
def test_every_command_with_every_format(store, tmp_path, name, fmt):
    db = tmp_path / "copy.duckdb"
    shutil.copy(store, db)
    args = [a.replace("{tmp}", str(tmp_path)) for a in COMMAND_ARGS[name]]
    if name in ("timeline", "packet"):  # the file's suffix names the format
        args[-1] += f".{fmt}"
        pytest.importorskip("vl_convert")
    full = [name, *args, "--format", fmt, *([] if name in NO_DB else ["--db", str(db)])]
    res = CliRunner().invoke(cli, full, env={"COLUMNS": "100"})
    assert res.exit_code == 0, res.output
    if name in ("ingest", "forget", "compact", "check", "timeline", "packet"):
        assert res.stderr  # their report
    else:
        assert res.stderr == ""  # piped: no progress, no noise
    if name in ("timeline", "packet"):
        assert Path(args[-1]).stat().st_size > 0
        return
    _check_output(name, fmt, res.stdout)


@pytest.mark.parametrize("name", ["ingest", "forget"])
def test_json_is_a_hidden_alias_of_format_json(store, tmp_path, name):
    shutil.copy(store, tmp_path / "a.duckdb")
    shutil.copy(store, tmp_path / "b.duckdb")
    arg = str(SAMPLE / "topology.csv") if name == "ingest" else "2"
    a = CliRunner().invoke(cli, [name, arg, "--json", "--db", str(tmp_path / "a.duckdb")])
    b = CliRunner().invoke(cli, [name, arg, "--format", "json", "--db", str(tmp_path / "b.duckdb")])
    assert a.exit_code == b.exit_code == 0 and json.loads(a.stdout)["schema"] == json.loads(b.stdout)["schema"]
    assert "--json" not in CliRunner().invoke(cli, [name, "--help"]).stdout
    c = CliRunner().invoke(cli, [name, arg, "--json", "--format", "csv", "--db", str(tmp_path / "a.duckdb")])
    assert c.exit_code == 2 and "cannot be used together" in c.stderr


def test_ingest_format_names_the_output_and_the_input_format_moved(store, tmp_path):
    db = tmp_path / "s.duckdb"
    res = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), "--input-format", "sacct", "--db", str(db)])
    assert res.exit_code == 0, res.output
    # the older spelling still loads, and says what it is now
    res = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "topology.csv"), "--format", "topology_csv", "--db", str(db)])
    assert res.exit_code == 0 and "--input-format topology_csv" in res.stderr
    res = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), "--format", "nosuch", "--db", str(db)])
    assert res.exit_code == 2


# --- times -------------------------------------------------------------------------------------------

# every way of writing 2026-11-02 09:00 UTC (the JSON outputs write the first two)
SAME_TIME = [
    "2026-11-02T09:00:00.000Z",
    "2026-11-02T09:00:00Z",
    "2026-11-02T09:00:00",
    "2026-11-02 09:00:00",
    "2026-11-02T11:00:00+02:00",
    "2026-11-02T04:00:00-05:00",
    "2026-11-02T09:00:00.000000Z",
]
WINDOWED = [
    ["explain", "--all", "--format", "json"],
    ["tax-report", "--format", "json"],
    ["fleet", "--format", "json"],
]


@pytest.mark.parametrize("command", WINDOWED, ids=lambda c: c[0])
@pytest.mark.parametrize("since", SAME_TIME)
def test_since_accepts_every_spelling_of_one_time(store, command, since):
    res = run(store, *command, "--since", since)
    ref = run(store, *command, "--since", SAME_TIME[0])
    assert res.exit_code == ref.exit_code == 0, res.output
    assert res.stdout == ref.stdout


@pytest.mark.parametrize("command", WINDOWED, ids=lambda c: c[0])
def test_relative_times_and_dates(store, command):
    everything = run(store, *command)
    for since, until in (("-36500d", "now"), ("now-36500d", "now+1h"), ("2026-11-01", "2026-11-04")):
        res = run(store, *command, "--since", since, "--until", until)
        assert res.exit_code == 0, (since, until, res.output)
        if command[0] == "tax-report":  # (explain leaves failures out of a window, fleet repeats it)
            assert res.stdout == everything.stdout
        elif command[0] == "explain":
            assert [d["job"] for d in json.loads(res.stdout)] == [d["job"] for d in json.loads(everything.stdout)]
    if command[0] != "fleet":  # an empty fleet is an answer; no job in a window is exit 5
        res = run(store, *command, "--since", "-1h")  # nothing in the store ran in the last hour
        assert res.exit_code == 5 and "no job ran after" in res.stderr


@pytest.mark.parametrize("command", WINDOWED, ids=lambda c: c[0])
def test_since_after_until_and_a_bad_time_are_usage_errors_everywhere(store, command):
    res = run(store, *command, "--since", "2026-11-03T00:00:00Z", "--until", "2026-11-02T00:00:00+01:00")
    assert res.exit_code == 2
    assert "--since 2026-11-03T00:00:00Z is after --until 2026-11-01T23:00:00Z" in res.stderr
    res = run(store, *command, "--since", "yesterday-ish")
    assert res.exit_code == 2 and "is not a time" in res.stderr


def test_a_time_from_a_json_output_reads_back(store):
    (job,) = [j for j in json.loads(run(store, "jobs", "--format", "json").stdout)["jobs"] if j["job"] == "1004"]
    res = run(store, "tax-report", "--since", job["last_ts"], "--format", "json")
    assert res.exit_code == 0, res.output
    assert "1004" in {d["job"] for d in json.loads(res.stdout)["jobs"]}
    res = run(store, "risks", "--at", job["first_ts"], "--history-hours", "0", "--format", "json")
    assert res.exit_code == 0 and json.loads(res.stdout)["at"] == job["first_ts"]


# --- jobs and hosts ----------------------------------------------------------------------------------

JOB_LISTS = {
    "explain": (["explain", "--format", "json"], lambda doc: [d["job"] for d in doc]),
    "tax-report": (["tax-report", "--format", "json"], lambda doc: [d["job"] for d in doc["jobs"]]),
    "jobs": (["jobs", "--format", "json"], lambda doc: sorted({a["job"] for a in doc["attempts"]})),
    "annotations": (
        ["annotations", "--format", "json"],
        lambda doc: sorted({t.split(":", 1)[1] for a in doc["annotations"] for t in a["tags"] if t.startswith("job:")}),
    ),
}


@pytest.mark.parametrize("name", JOB_LISTS)
def test_job_is_repeatable_and_comma_separated(store, name):
    command, jobs_of = JOB_LISTS[name]
    repeated = run(store, *command, "--job", "1003", "--job", "1004")
    commas = run(store, *command, "--job", "1003,1004")
    assert repeated.exit_code == commas.exit_code == 0, repeated.output
    assert repeated.stdout == commas.stdout
    assert jobs_of(json.loads(commas.stdout)) == ["1003", "1004"]
    unknown = run(store, *command, "--job", "1003,9999")
    assert unknown.exit_code == 5 and "9999" in unknown.stderr


@pytest.mark.parametrize("name", ["explain", "tax-report", "annotations"])
def test_job_and_all_are_refused_together_the_same_way(store, name):
    res = run(store, name, "--job", "1003", "--all")
    assert res.exit_code == 2 and "--job and --all cannot be used together" in res.stderr


@pytest.mark.parametrize("name", ["explain", "annotations"])
def test_neither_job_nor_all_is_refused_the_same_way(store, name):
    res = run(store, name)
    assert res.exit_code == 2 and "give one of --job or --all" in res.stderr


def test_checkpoint_is_for_one_job(store):
    res = run(store, "explain", "--job", "1003,1004", "--checkpoint", "1950")
    assert res.exit_code == 2 and "cannot be used together" in res.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "--format", "json"],
        ["explain", "--all", "--format", "json"],
        ["tax-report", "--format", "json"],
    ],
    ids=lambda c: c[0],
)
def test_host_keeps_the_jobs_that_ran_there(store, command):
    everything = {j["job"]: set(j["hosts"]) for j in json.loads(run(store, "jobs", "--format", "json").stdout)["jobs"]}
    for host in ("gpu-001", "gpu-[003-004]"):
        res = run(store, *command, "--host", host)
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        got = {d["job"] for d in (doc if isinstance(doc, list) else doc["jobs"])}
        wanted = {"gpu-001"} if host == "gpu-001" else {"gpu-003", "gpu-004"}
        assert got == {j for j, hosts in everything.items() if hosts & wanted} and got
    res = run(store, *command, "--host", "no-such-host")
    assert res.exit_code in (0, 5)
    if res.exit_code == 0:
        assert json.loads(res.stdout)["jobs"] == []


# --- tables and reports ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["jobs", "sources"])
def test_tables_choose_their_columns_to_fit_the_width(store, name):
    narrow = run(store, name, env={"COLUMNS": "80"})
    wide = run(store, name, env={"COLUMNS": "250"})
    assert narrow.exit_code == wide.exit_code == 0
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80
    assert "not shown at this width" in narrow.stdout and "not shown" not in wide.stdout
    header = next(line for line in narrow.stdout.splitlines() if "┃" in line)
    assert "…" not in header  # columns are left out, not every cell cut
    if name == "jobs":
        body = narrow.stdout
        assert "COMPLET…" not in body and "COMPLETED" in body and "Z" in body  # whole cells, times with zone


def test_durations_are_human(store):
    res = run(store, "jobs", "--job", "1003", env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "4h17m" in res.stdout and "e+0" not in res.stdout


def test_dollars_wherever_a_price_is_given(store):
    table = run(store, "tax-report", "--gpu-hour-price", "2.5")
    assert table.exit_code == 0 and table.stdout.count("$") >= 10
    assert "$" not in run(store, "tax-report").stdout
    rows = list(
        csv.DictReader(io.StringIO(run(store, "tax-report", "--gpu-hour-price", "2.5", "--format", "csv").stdout))
    )
    assert rows and all(
        abs(float(r["wall_usd"]) - float(r["gpu_hours"]) * 2.5) < 1e-6 * float(r["wall_usd"]) for r in rows
    )


def test_fail_over_names_every_job_over_the_line(store):
    res = run(store, "tax-report", "--fail-over", "0", "--format", "json")
    assert res.exit_code == 7
    docs = json.loads(res.stdout)["jobs"]
    over = [d["job"] for d in docs if d["checkpoint_tax"] > 0]
    assert len(over) >= 2 and all(f"job {j} checkpoint tax" in res.stderr for j in over)
    assert f"{len(over)} of {len(docs)} jobs over 0.0%" in res.stderr
    assert res.stderr.count("exceeds") == len(over)


def test_explain_csv_is_one_row_per_checkpoint(store):
    doc = json.loads(run(store, "explain", "--job", "1003", "--format", "json").stdout)
    rows = list(csv.DictReader(io.StringIO(run(store, "explain", "--job", "1003", "--format", "csv").stdout)))
    assert len(rows) == len(doc["checkpoints"])
    assert [r["iteration"] for r in rows] == [str(c["iteration"]) for c in doc["checkpoints"]]
    caused = [(r["cause"], r["host"]) for r in rows if r["cause"]]
    assert caused == [(c["cause"]["category"], c["cause"]["host"] or "") for c in doc["checkpoints"] if c["cause"]]


# --- progress ----------------------------------------------------------------------------------------


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_only(store):
    from synestra_cli.cli.progress import progress_on_tty
    from synestra_cli.explain.job import explain_each
    from synestra_cli.store import open_store

    terminal, pipe = _Terminal(), io.StringIO()
    with open_store(store, read_only=True) as conn:
        with progress_on_tty(terminal):
            explain_each(conn, list(JOBS))
        with progress_on_tty(pipe):
            explain_each(conn, list(JOBS))
    assert "explaining jobs" in terminal.getvalue() and "2/2" in terminal.getvalue()
    assert pipe.getvalue() == ""
