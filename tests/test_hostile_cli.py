"""Hostile inputs, CLI and accounting side (issue 18 items 1, 3a, 6, 11, 12, 13, 14, 15; issue 14 item 6).

Wrong clocks must not make an absurd tax, NaN samples are no evidence, `synestra sql` can neither
write nor reach beyond its store, escape sequences never reach a terminal raw, bad variables and
options are refused with one line and a documented exit code, and every way a command ends (Ctrl-C,
a closed pipe, a store that is not one) has its own code. The ingest/store half: test_hostile_inputs.py.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from children import default_sigint
from click.testing import CliRunner
from explain_fixtures import Scenario, at, reactive_job_with_a_lossy_port
from hypothesis import given, settings
from hypothesis import strategies as st

from synestra_cli.accounting.buckets import BUCKETS, assemble
from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode
from synestra_cli.explain.job import explain_job
from synestra_cli.signals.anomalies import anomalies, build_scope
from synestra_cli.signals.scope import load_scope

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "exports"
SYNESTRA = str(Path(sys.executable).parent / "synestra")
TRACEBACK = "Traceback (most recent call last)"


def run(*args: str, db: Path | None = None, env: dict | None = None, timeout: float = 120, **kw):
    """The installed console script in a child process: what a shell sees (exit code, both streams)."""
    cmd = [SYNESTRA, *args, *(["--db", str(db)] if db else [])]
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=full_env, **kw)


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def one_line_error(stderr: str) -> bool:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return len(lines) == 1 and lines[0].startswith("error: ") and TRACEBACK not in stderr


def _job_1001(tmp_path: Path, edit=None, sacct: bool = True) -> Path:
    """sample_data's job 1001 (Megatron log), with its sacct rows, one line of the log edited."""
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    lines = (SAMPLE / "jobs" / "1001.log").read_text().splitlines(keepends=True)
    if edit:
        lines = edit(lines)
    (folder / "1001.log").write_text("".join(lines))
    if sacct:
        rows = [
            r for r in (SAMPLE / "sacct.txt").read_text().splitlines(keepends=True) if r.startswith(("JobID", "1001"))
        ]
        (folder / "sacct.txt").write_text("".join(rows))
    return folder


def _stamp(lineno: int, stamp: str):
    """Replace the time stamp of line `lineno` (1-based) by `stamp`."""

    def edit(lines):
        lines[lineno - 1] = re.sub(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\]", f"[{stamp}]", lines[lineno - 1], count=1)
        return lines

    return edit


def _tax(db: Path, job: str = "1001") -> dict:
    res = invoke("tax-report", "--job", job, "--format", "json", "--db", str(db))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["jobs"][0]


# ---------------------------------------------------------------- item 1: one wrong clock, no absurd tax

CLEAN: dict[bool, dict] = {}


def _clean_tax(tmp_path_factory, sacct: bool) -> dict:
    if sacct not in CLEAN:
        tmp = tmp_path_factory.mktemp("clean")
        db = tmp / "clean.duckdb"
        assert invoke("ingest", str(_job_1001(tmp, sacct=sacct)), "--db", str(db)).exit_code == 0
        CLEAN[sacct] = _tax(db)
    return CLEAN[sacct]


@pytest.mark.heavy
@pytest.mark.parametrize(
    ("line", "stamp", "sacct"),
    [
        (60, "1970-01-01 00:00:00.000000", True),  # a save's start after an RTC reset
        (61, "2099-01-01 00:00:00.000000", True),  # a save's end in 2099
        (201, "2099-06-01 00:00:00.000000", False),  # one iteration line in 2099, no sacct
        (383, "2099-06-01 00:00:00.000000", False),  # the last line of the log in 2099, no sacct
        (1, "1970-01-01 00:00:00.000000", False),  # the first line of the log in 1970, no sacct
    ],
    ids=[
        "save-start-1970",
        "save-end-2099",
        "iteration-2099-no-sacct",
        "last-line-2099-no-sacct",
        "first-line-1970-no-sacct",
    ],
)
def test_one_wrong_clock_on_a_job_log_line_gives_the_clean_tax_and_a_note(
    tmp_path, tmp_path_factory, line, stamp, sacct
):
    db = tmp_path / "s.duckdb"
    res = invoke("ingest", str(_job_1001(tmp_path, _stamp(line, stamp), sacct=sacct)), "--db", str(db))
    assert res.exit_code == 0
    assert f"(line {line}: {stamp[:19]}), a wrong clock" in res.stderr
    doc, clean = _tax(db), _clean_tax(tmp_path_factory, sacct)
    assert doc["wall_s"] == pytest.approx(clean["wall_s"], abs=60)
    assert doc["checkpoint_tax"] == pytest.approx(clean["checkpoint_tax"], abs=0.005)
    assert all(v >= 0 for v in doc["buckets_s"].values())
    assert sum(doc["buckets_s"].values()) == pytest.approx(doc["wall_s"])
    assert invoke("tax-report", "--job", "1001", "--fail-over", "15", "--db", str(db)).exit_code == 0


def test_a_job_requeued_days_later_keeps_its_times(tmp_path, tmp_path_factory):
    """Not a wrong clock: from line 200 on the log is three days later (many lines, in order)."""

    def later(lines):
        def shift(m):
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f") + timedelta(days=3)
            return f"[{t:%Y-%m-%d %H:%M:%S.%f}]"

        return lines[:199] + [re.sub(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]", shift, ln) for ln in lines[199:]]

    db = tmp_path / "s.duckdb"
    res = invoke("ingest", str(_job_1001(tmp_path, later, sacct=False)), "--db", str(db))
    assert res.exit_code == 0 and "wrong clock" not in res.stderr
    assert _tax(db)["wall_s"] == pytest.approx(_clean_tax(tmp_path_factory, False)["wall_s"] + 3 * 86400, abs=60)


def _cut(attempt, start, end, **secs):
    t0 = datetime(2026, 1, 1)
    cut = {
        "attempt": attempt,
        "start_ts": t0 + timedelta(seconds=start),
        "end_ts": t0 + timedelta(seconds=end),
        "failed": secs.pop("failed", False),
        "state": None,
        "last_iteration": secs.pop("last", 100),
        "saved_iteration": secs.pop("saved", 100),
    }
    for key in ("save_s", "restore_s", "startup_s", "lost_work_s", "hang_s", "requeue_s", "restart_gap_s"):
        cut[key] = secs.get(key, 0.0)
    return cut


SECONDS = st.floats(min_value=-2e9, max_value=2e9, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0, 1e6), st.floats(-1e5, 1e6), *[SECONDS] * 7, st.booleans()),
        min_size=1,
        max_size=4,
    ),
    st.floats(0, 1e4),
    st.integers(0, 10**6),
    st.floats(-1e9, 1e9, allow_nan=False),
)
def test_no_bucket_is_ever_negative_and_they_sum_to_the_wall_time(attempts, ideal, iterations, degraded_s):
    """Whatever the logs' clocks make of the attempts' cut instants, the partition holds."""
    from synestra_cli.accounting.buckets import DegradedWindow

    cuts = [
        _cut(
            i + 1,
            start,
            start + length,
            save_s=a,
            restore_s=b,
            startup_s=c,
            lost_work_s=d,
            hang_s=e,
            requeue_s=f,
            restart_gap_s=g,
            failed=failed,
            last=iterations,
        )
        for i, (start, length, a, b, c, d, e, f, g, failed) in enumerate(attempts)
    ]
    window = DegradedWindow(datetime(2026, 1, 1), datetime(2026, 1, 2), degraded_s)
    jb = assemble("j", 8, cuts, ideal, [window], 0)
    assert set(jb.buckets_s) == set(BUCKETS)
    assert all(v >= 0 and math.isfinite(v) for v in jb.buckets_s.values()), jb.buckets_s
    assert sum(jb.buckets_s.values()) == pytest.approx(jb.wall_s, rel=1e-9, abs=1e-6)
    assert 0 <= jb.checkpoint_tax_s <= jb.wall_s * (1 + 1e-9) + 1e-6


# ---------------------------------------------------------------- item 3a: NaN samples are no evidence


def test_nan_samples_are_never_anomaly_evidence(conn):
    sc = Scenario(conn).cluster()
    sc.attempt(1, 0, 3600, "COMPLETED")
    sc.series("gpu-004", "gpu1", "gpu_temp_celsius", -1800, 3600, 60, 62.0, (900, 3600, math.nan))
    sc.series("gpu-002", "mlx5_0", "ib_port_symbol_errors_total", -1800, 3600, 60, 0.0, (1200, 3600, math.nan), True)
    build_scope(conn, load_scope(conn, "100"), [(at(-1800), at(3600))])
    assert anomalies(conn) == []


def test_nan_samples_do_not_raise_a_causes_confidence(tmp_path):
    from synestra_cli.store.connect import memory_store

    plain, with_nan = memory_store(), memory_store()
    reactive_job_with_a_lossy_port(plain)
    sc = reactive_job_with_a_lossy_port(with_nan)
    for gpu in range(8):  # every GPU of the faulty host reports NaN temperatures and power from t=200
        sc.series("gpu-002", f"gpu{gpu}", "gpu_temp_celsius", -1800, 2000, 30, 60.0, (200, 1e9, math.nan))
        sc.series("gpu-002", f"gpu{gpu}", "gpu_power_watts", -1800, 2000, 30, 600.0, (200, 1e9, math.nan))
    a, b = ([c for c in explain_job(x, "100").checkpoints if c.iteration == 330][0] for x in (plain, with_nan))
    assert (b.cause.category, b.cause.host) == (a.cause.category, a.cause.host)
    assert b.cause.confidence == pytest.approx(a.cause.confidence)
    assert not any("nan" in json.dumps(lk.evidence, default=str).lower() for lk in b.chain)
    assert [alt.category for alt in b.alternatives] == [alt.category for alt in a.alternatives]


# ---------------------------------------------------------------- item 6: CPU-only jobs


def test_tax_report_table_on_cpu_only_slurm_jobs(tmp_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(re.sub(r",gres/gpu=\d+", "", (SAMPLE / "sacct.txt").read_text()))
    db = tmp_path / "cpu.duckdb"
    assert invoke("ingest", str(sacct), "--db", str(db)).exit_code == 0
    res = invoke("tax-report", "--db", str(db))
    assert res.exit_code == 0, res.output
    assert "0.0 GPU-h allocated, checkpoint tax n/a" in res.stdout
    doc = json.loads(invoke("tax-report", "--db", str(db), "--format", "json").stdout)
    assert doc["fleet"]["checkpoint_tax"] is None and doc["fleet"]["jobs"] == 8


# ---------------------------------------------------------------- item 11: `sql` cannot write or reach out


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A small real store: sample_data's sacct and two job logs."""
    tmp = tmp_path_factory.mktemp("store")
    folder = tmp / "in"
    folder.mkdir()
    shutil.copy(SAMPLE / "sacct.txt", folder)
    for job in ("1001", "1008"):
        shutil.copy(SAMPLE / "jobs" / f"{job}.log", folder)
    db = tmp / "store.duckdb"
    assert invoke("ingest", str(folder), "--db", str(db)).exit_code == 0
    return db


def _sql(db: Path, query: str):
    return invoke("sql", query, "--db", str(db))


def _counts(db: Path) -> tuple:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as c:
        return tuple(c.execute(f"SELECT count(*) FROM {t}").fetchall()[0][0] for t in ("sources", "steps", "jobs"))


def test_sql_cannot_attach_another_store_read_write_and_drop_its_tables(store, tmp_path):
    other = tmp_path / "other.duckdb"
    shutil.copy(store, other)
    before = _counts(other)
    res = _sql(store, f"ATTACH '{other}' AS o (READ_WRITE); DROP TABLE o.steps CASCADE")
    assert res.exit_code == ExitCode.QUERY and one_line_error(res.stderr)
    assert "reads the store only" in res.stderr
    assert _counts(other) == before


def test_sql_cannot_reach_its_own_store_through_a_hard_link(store, tmp_path):
    link = tmp_path / "link.duckdb"
    os.link(store, link)
    before = _counts(store)
    res = _sql(store, f"ATTACH '{link}' AS me; DELETE FROM me.steps")
    assert res.exit_code == ExitCode.QUERY and one_line_error(res.stderr)
    assert _counts(store) == before


@pytest.mark.parametrize(
    "query",
    [
        "COPY (SELECT * FROM sources) TO '{out}'",
        "EXPORT DATABASE '{out}'",
        "PRAGMA profiling_output = '{out}'; PRAGMA enable_profiling = 'json'; SELECT count(*) FROM steps",
        "SET profiling_output = '{out}'",
        "SELECT * FROM read_csv('{out}')",
    ],
    ids=["copy-to", "export-database", "pragma-profiling-output", "set-profiling-output", "read-csv"],
)
def test_sql_cannot_write_or_read_any_other_file(store, tmp_path, query):
    out = tmp_path / "out"
    res = _sql(store, query.format(out=out))
    assert res.exit_code == ExitCode.QUERY and one_line_error(res.stderr)
    assert not out.exists()


@pytest.mark.parametrize(
    "query",
    [
        "INSTALL httpfs",
        "LOAD httpfs",
        "CREATE SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
        "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'k', SECRET 's')",
        "SELECT * FROM read_csv('https://example.com/x.csv')",
    ],
    ids=["install-httpfs", "load-httpfs", "create-secret", "create-persistent-secret", "read-url"],
)
def test_sql_never_reaches_for_the_network_or_an_extension(store, query, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # where DuckDB keeps extensions and persistent secrets
    res = run("sql", query, db=store, env={"HOME": str(tmp_path)})
    assert res.returncode == ExitCode.QUERY and one_line_error(res.stderr), res.stderr
    assert not (tmp_path / ".duckdb").exists()


@pytest.mark.parametrize(
    "query",
    [
        "SET enable_external_access = true",
        "SET lock_configuration = false",
        "RESET enable_external_access",
        "SET autoinstall_known_extensions = true",
        "SET memory_limit = '100GB'",
    ],
    ids=["enable-external-access", "unlock", "reset", "autoinstall", "memory-limit"],
)
def test_sql_cannot_undo_the_lock(store, query, tmp_path):
    out = tmp_path / "must-not-exist.csv"
    res = _sql(store, f"{query}; COPY (SELECT 1) TO '{out}'")
    assert res.exit_code == ExitCode.QUERY and one_line_error(res.stderr)
    assert "the configuration has been locked" in res.stderr
    assert not out.exists()


def test_sql_still_reads_the_store_with_views_and_macros(store):
    res = _sql(store, "SELECT job_id, count(*) AS n FROM steps_reconciled GROUP BY job_id ORDER BY job_id")
    assert res.exit_code == 0 and "1001" in res.stdout and "1008" in res.stdout
    res = invoke(
        "sql",
        "SELECT to_utc(TIMESTAMP '2026-06-01 12:00:00', 'Europe/Paris') AS t",
        "--db",
        str(store),
        "--format",
        "csv",
    )
    assert res.stdout == "t\n2026-06-01T10:00:00.000Z\n"


def test_a_sqlite_file_as_db_is_refused_without_fetching_sqlite_scanner(tmp_path):
    lite = tmp_path / "lite.db"
    with sqlite3.connect(lite) as c:
        c.execute("CREATE TABLE t (x)")
    for args in (["sql", "SELECT 1"], ["jobs"], ["ingest", str(SAMPLE / "sacct.txt")]):
        res = run(*args, db=lite, env={"HOME": str(tmp_path)})
        assert res.returncode == ExitCode.STORE and one_line_error(res.stderr), res.stderr
        assert "SQLite" in res.stderr and "download" not in res.stderr.lower()
    assert not (tmp_path / ".duckdb").exists()


# ---------------------------------------------------------------- item 12: escape sequences in human views

EVIL = "\x1b]0;owned\x07\x1b[2J\x1b]52;c;aGVsbG8=\x07"


@pytest.mark.heavy
def test_escape_sequences_in_log_lines_and_file_names_are_shown_escaped(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    sacct = (SAMPLE / "sacct.txt").read_text().replace("llama-70b-sft", "llama" + EVIL)
    (folder / "sacct.txt").write_text(sacct)
    log = (SAMPLE / "jobs" / "1008.log").read_text()
    (folder / f"job{EVIL}.log").write_text(log + f"garbage line {EVIL}\n")
    db = tmp_path / "s.duckdb"
    views = [
        invoke("ingest", str(folder), "--job", "1008", "--db", str(db)),
        invoke("sources", "--db", str(db)),
        invoke("jobs", "--db", str(db)),
        invoke("jobs", "--job", "1008", "--db", str(db)),
        invoke("explain", "--job", "1008", "--db", str(db)),
        invoke("sql", "SELECT path, chr(27) || '[2J' || chr(155) || '2J' AS x FROM sources", "--db", str(db)),
        invoke("sql", "SELECT name FROM jobs_reconciled", "--db", str(db)),
    ]
    for res in views:
        assert res.exit_code == 0, res.output
        for ch in ("\x1b", "\x07", "\x9b"):
            assert ch not in res.stdout and ch not in res.stderr
    assert "\\x1b]0;owned\\x07" in views[0].stderr  # the file name, escaped, in the ingest report
    assert "\\x1b[2J\\x9b2J" in views[5].stdout.replace("\n", "").replace("│", "").replace(" ", "")
    csv = invoke("sql", "SELECT name FROM jobs_reconciled", "--db", str(db), "--format", "csv")
    assert "llama\x1b]0;owned\x07" in csv.stdout  # machine formats carry the text as it is


# ---------------------------------------------------------------- item 13 (sql half): streamed results


def test_sql_streams_its_result_in_record_batches(conn):
    from synestra_cli.query.inspect import stream_sql

    cols, batches = stream_sql(conn, "SELECT range AS i, range::VARCHAR AS s FROM range(50000)", batch_rows=4096)
    first = next(batches)
    assert cols == ["i", "s"] and len(first) <= 4096 and first[0] == {"i": 0, "s": "0"}
    rest = [len(b) for b in batches]
    assert max(rest) <= 4096 and len(first) + sum(rest) == 50000


@pytest.mark.heavy
def test_sql_csv_and_jsonl_exports_are_whole_and_in_order(store):
    q = "SELECT i, i * 0.5 AS half, 'x' || i AS s FROM range(30000) t(i) ORDER BY i"
    csv_out = invoke("sql", q, "--db", str(store), "--format", "csv").stdout.splitlines()
    assert csv_out[0] == "i,half,s" and len(csv_out) == 30001 and csv_out[-1] == "29999,14999.5,x29999"
    jl = invoke("sql", q, "--db", str(store), "--format", "jsonl").stdout.splitlines()
    assert len(jl) == 30000 and json.loads(jl[12345]) == {"i": 12345, "half": 6172.5, "s": "x12345"}
    js = json.loads(invoke("sql", q, "--db", str(store), "--format", "json").stdout)
    assert len(js) == 30000 and js[-1]["s"] == "x29999"
    assert json.loads(invoke("sql", "SELECT 1 WHERE false", "--db", str(store), "--format", "json").stdout) == []
    table = invoke("sql", "SELECT * FROM range(10001)", "--db", str(store))  # a terminal table stops at 10,000
    assert "│ 9999 " in table.stdout and "│ 10000 " not in table.stdout
    assert "only the first 10,000 rows are shown" in table.stderr


# ---------------------------------------------------------------- item 14: variables and store paths


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SYNESTRA_THREADS", "abc"),
        ("SYNESTRA_THREADS", "999999"),
        ("SYNESTRA_THREADS", "0"),
        ("SYNESTRA_MEMORY_LIMIT", "lots"),
        ("SYNESTRA_MEMORY_LIMIT", "-1GB"),
        ("SYNESTRA_LOCK_WAIT", "soon"),
        ("SYNESTRA_LOCK_WAIT", "nan"),
        ("SYNESTRA_LOCK_WAIT", "-3"),
        ("SYNESTRA_WORKERS", "many"),
        ("SYNESTRA_INGEST_WORKERS", "0"),
    ],
)
def test_a_malformed_variable_is_one_line_and_exit_2_never_a_hang(store, name, value):
    args = ["ingest", str(SAMPLE / "sacct.txt")] if name == "SYNESTRA_INGEST_WORKERS" else ["tax-report"]
    db = store if args[0] != "ingest" else store.parent / "w.duckdb"
    if name == "SYNESTRA_INGEST_WORKERS":  # the variable matters only with more than one file
        args = ["ingest", str(SAMPLE / "sacct.txt"), str(SAMPLE / "topology.csv")]
    res = run(*args, db=db, env={name: value}, timeout=60)
    assert res.returncode == ExitCode.USAGE and one_line_error(res.stderr), res.stderr
    assert name in res.stderr and repr(value) in res.stderr


def test_an_empty_sql_query_is_a_clear_error(store):
    for query in ("", "   \n"):
        res = _sql(store, query)
        assert res.exit_code == ExitCode.QUERY and one_line_error(res.stderr) and "empty query" in res.stderr


def test_db_under_a_regular_file_is_a_clear_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    res = run("ingest", str(SAMPLE / "sacct.txt"), db=tmp_path / "afile" / "s.duckdb")
    assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "is a file, not a folder" in res.stderr


def test_a_fifo_as_db_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo.duckdb"
    os.mkfifo(fifo)
    for args in (["sql", "SELECT 1"], ["ingest", str(SAMPLE / "sacct.txt")], ["jobs"]):
        res = run(*args, db=fifo, timeout=20)
        assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "FIFO" in res.stderr


def test_a_text_file_as_db_is_not_a_store(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("not a store\n" * 100)
    for args in (["jobs"], ["ingest", str(SAMPLE / "sacct.txt")], ["sql", "SELECT 1"]):
        res = run(*args, db=text)
        assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "not a Synestra store" in res.stderr
    assert text.read_text() == "not a store\n" * 100


def test_a_missing_migration_row_is_a_clear_error(store, tmp_path):
    import duckdb

    db = tmp_path / "m.duckdb"
    shutil.copy(store, db)
    with duckdb.connect(str(db)) as c:
        c.execute("DELETE FROM _migrations WHERE name = (SELECT min(name) FROM _migrations)")
    res = run("ingest", str(SAMPLE / "topology.csv"), db=db)
    assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "_migrations" in res.stderr


def _unprivileged() -> list[str]:
    """Run as nobody when the tests run as root (root ignores file permissions)."""
    if os.geteuid() != 0:
        return []
    if not shutil.which("setpriv"):
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    probe = subprocess.run([*prefix, SYNESTRA, "--version"], capture_output=True, timeout=60)
    if probe.returncode != 0:  # the clone or its venv sits in a folder private to root
        pytest.skip("nobody cannot run this synestra (a private folder above it): permissions cannot be tested")
    return prefix


@pytest.fixture
def open_dir():
    """A folder anyone can enter (pytest's tmp_path is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="synestra-perm-"))
    path.chmod(0o755)
    yield path
    for p in path.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    shutil.rmtree(path)


def _as_nobody(*args: str, db: Path):
    return subprocess.run(
        [*_unprivileged(), SYNESTRA, *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(db.parent)},
    )


def test_db_in_a_read_only_folder_is_a_clear_error(open_dir):
    folder = open_dir / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    res = _as_nobody("ingest", str(SAMPLE / "sacct.txt"), db=folder / "s.duckdb")
    assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "not writable" in res.stderr


def test_a_read_only_store_refuses_ingest_but_serves_reads(open_dir, store):
    db = open_dir / "ro.duckdb"
    shutil.copy(store, db)
    db.chmod(0o444)
    res = _as_nobody("ingest", str(SAMPLE / "topology.csv"), db=db)
    assert res.returncode == ExitCode.STORE and one_line_error(res.stderr) and "read-only" in res.stderr
    res = _as_nobody("jobs", "--format", "csv", db=db)
    assert res.returncode == 0 and "1001" in res.stdout


# ---------------------------------------------------------------- item 15: options, signals, exit codes


@pytest.mark.parametrize(
    "args",
    [
        ["--gpu-hour-price", "-1"],
        ["--gpu-hour-price", "nan"],
        ["--gpu-hour-price", "inf"],
        ["--capacity-gpus", "0"],
        ["--fail-over", "nan"],
        ["--fail-over", "-5"],
        ["--since", "2026-11-04", "--until", "2026-11-01"],
    ],
    ids=lambda a: " ".join(a),
)
def test_tax_report_refuses_impossible_options(store, args):
    res = invoke("tax-report", *args, "--db", str(store))
    assert res.exit_code == ExitCode.USAGE and TRACEBACK not in res.output
    assert res.stdout == ""


def test_explain_refuses_since_after_until(store):
    res = invoke("explain", "--all", "--since", "2026-11-04", "--until", "2026-11-01", "--db", str(store))
    assert res.exit_code == ExitCode.USAGE and "after --until" in res.stderr


def test_ingest_with_an_unknown_format_is_a_usage_error(tmp_path):
    res = invoke("ingest", str(SAMPLE / "sacct.txt"), "--format", "nosuch", "--db", str(tmp_path / "s.duckdb"))
    assert res.exit_code == ExitCode.USAGE and "no format named 'nosuch'" in res.stderr
    assert not (tmp_path / "s.duckdb").exists()


def test_a_bad_sql_query_has_its_own_exit_code(store):
    for query in ("SELEC 1", "SELECT * FROM no_such_table", "SELECT 'x'::INTEGER", "DELETE FROM steps"):
        res = _sql(store, query)
        assert res.exit_code == ExitCode.QUERY == 9 and one_line_error(res.stderr), query
        assert res.stdout == ""


def test_an_empty_time_window_says_so_and_is_not_an_empty_store(store):
    for cmd in (["tax-report"], ["explain", "--all"]):
        res = invoke(*cmd, "--since", "2030-01-01", "--db", str(store))
        assert res.exit_code == ExitCode.NOT_FOUND and one_line_error(res.stderr)
        assert "no job ran after 2030-01-01T00:00:00Z" in res.stderr and "no jobs in the store" not in res.stderr
        assert re.search(r"the store's \d+ jobs ran 2026-11-02", res.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["sources"],
        ["jobs"],
        ["sql", "SELECT * FROM range(2000000)", "--format", "csv"],
        ["explain", "--job", "1008"],
        ["tax-report", "--format", "csv"],
    ],
    ids=lambda a: a[0],
)
def test_a_closed_pipe_ends_quietly_with_0(store, args):
    """`synestra ... | head -1`: the reader goes away after one line."""
    proc = subprocess.Popen([SYNESTRA, *args, "--db", str(store)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err.decode() == ""


def _long_syslog(path: Path, lines: int, host: str = "gpu-001") -> Path:
    """A syslog big enough that its parse outlasts a signal sent while it runs (~1-3 s a file). Each of
    several must name its own host: files of the same bytes are one file, the copies skipped unparsed."""
    body = f"{host} kernel: [ 12.000000] NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.\n"
    path.write_text("".join(f"Nov  3 {h:02d}:{m:02d}:{sec:02d} {body}" for h, m, sec in _clock(lines)))
    return path


def _clock(lines: int):
    for i in range(lines):
        yield (i // 3600) % 24, (i // 60) % 60, i % 60


@pytest.mark.heavy
@pytest.mark.parametrize(
    "sig, code, said",
    [(signal.SIGINT, ExitCode.INTERRUPTED, "interrupted"), (signal.SIGTERM, ExitCode.TERMINATED, "interrupted")],
)
def test_ctrl_c_or_sigterm_during_ingest_exits_130_or_143_and_leaves_the_store_whole(tmp_path, sig, code, said):
    """Small files load many at a time, so sample_data alone commits before a signal can land: three big
    syslogs after it keep the ingest parsing when Ctrl-C (or `kill`, systemd's stop) comes, after the
    first commit. SIGTERM used to kill the one-shot ingest outright (exit -15, no message). The three
    were once the same bytes: two were skipped as copies, the ingest ended ~3 s after the first commit,
    and on a fast machine the signal came after the end (exit 0)."""
    db = tmp_path / "s.duckdb"
    bigs = [_long_syslog(tmp_path / f"big-{k}.log", 400_000, f"gpu-00{k + 1}") for k in range(3)]
    inputs = [str(SAMPLE), *map(str, bigs)]
    proc = subprocess.Popen(
        [SYNESTRA, "ingest", *inputs, "--year", "2026", "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNESTRA_INGEST_WORKERS": "1"},
        preexec_fn=default_sigint,  # Ctrl-C as at a terminal, however the suite was started
    )
    for line in proc.stderr:  # the first files are in: interrupt the rest
        if "rows" in line:
            break
    time.sleep(0.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code
    assert said in err and TRACEBACK not in err
    res = invoke("ingest", *inputs, "--year", "2026", "--db", str(db))
    assert res.exit_code == 0
    total = re.search(r"total: (\d+) loaded, (\d+) skipped, 0 failed", res.stderr)
    assert int(total.group(1)) + int(total.group(2)) == 29 + 3 and int(total.group(2)) >= 1
    # every kept file is whole: a clean store of the same files holds the same rows
    clean = tmp_path / "clean.duckdb"
    invoke("ingest", *inputs, "--year", "2026", "--db", str(clean))
    assert _counts(db) == _counts(clean)


def test_every_exit_code_is_documented_in_the_readme_and_the_runbook():
    readme = (ROOT / "README.md").read_text()
    runbook = (ROOT / "docs" / "runbook.md").read_text()
    for code in ExitCode:
        assert re.search(rf"^\| {code.value} \| ", readme, re.MULTILINE), f"README.md: exit code {code.value}"
        assert re.search(rf"\b{code.value}\b", runbook), f"docs/runbook.md: exit code {code.value}"
    assert "1 | unexpected error (a bug" in readme


@pytest.mark.heavy
def test_out_of_memory_exits_10_with_the_limit_to_raise_and_leaves_only_whole_files(tmp_path):
    """DuckDB's "Out of Memory" under a too small SYNESTRA_MEMORY_LIMIT ended as "unexpected DuckDB error
    (a bug)", exit 1: it is the limit's fault, said as such, with its own code (README, exit codes)."""
    db = tmp_path / "s.duckdb"
    res = run("ingest", str(SAMPLE), db=db, env={"SYNESTRA_MEMORY_LIMIT": "8MB"})
    assert res.returncode == ExitCode.MEMORY, res.stderr
    assert "out of memory" in res.stderr and "SYNESTRA_MEMORY_LIMIT" in res.stderr
    assert TRACEBACK not in res.stderr and "a bug" not in res.stderr
    again = run("ingest", str(SAMPLE), db=db)  # the default limit: what was kept is whole, the rest loads
    assert again.returncode == 0, again.stderr
    clean = tmp_path / "clean.duckdb"
    assert run("ingest", str(SAMPLE), db=clean).returncode == 0
    assert _counts(db) == _counts(clean)


def test_an_out_of_memory_is_known_in_the_error_a_library_made_of_it():
    # an Arrow scan reports DuckDB's as its own error: the file then fails with the limit to raise
    from synestra_cli.errors import is_out_of_memory

    class OutOfMemoryException(Exception):
        pass

    try:
        try:
            raise OutOfMemoryException("Out of Memory Error: could not allocate block of size 30.5 MiB")
        except OutOfMemoryException as inner:
            raise ValueError("offering a filter failed") from inner
    except ValueError as outer:
        assert is_out_of_memory(outer)
    assert not is_out_of_memory(ValueError("out of range"))


@pytest.mark.heavy
@pytest.mark.parametrize("alone", [False, True], ids=["the batch", "one file alone"])
def test_a_batch_whose_checks_run_out_of_memory_is_checked_file_by_file(tmp_path, monkeypatch, alone):
    """The checks of a batch (duplicates, times out of range) ran over all its files at once, and an
    out-of-memory there ended the whole ingest. Every check is per file: the batch is checked again file
    by file, with the same verdicts; a file that alone runs out fails with the limit to raise."""
    import duckdb

    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import batch, ingest_paths
    from synestra_cli.store import open_store

    checks, calls = batch.check_sources, []

    def short_of_memory(conn, ids, *args):
        calls.append(list(ids))
        first_alone = next(c for c in calls if len(c) == 1) if len(ids) == 1 else None
        if len(ids) > 1 or (alone and ids == first_alone):  # every batch; and the first file alone
            raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256.0 KiB")
        return checks(conn, ids, *args)

    monkeypatch.setattr(batch, "check_sources", short_of_memory)
    monkeypatch.setenv("SYNESTRA_INGEST_WORKERS", "1")
    db = tmp_path / "s.duckdb"
    with open_store(db) as conn:
        reports = ingest_paths(conn, [SAMPLE], IngestOptions(year=2026))
    assert any(len(c) > 1 for c in calls) and any(len(c) == 1 for c in calls)
    failed = [r for r in reports if r.status == "failed"]
    if alone:
        assert len(failed) == 1 and "ran out of memory" in failed[0].error
        assert "SYNESTRA_MEMORY_LIMIT" in failed[0].error
    else:
        assert not failed
    monkeypatch.setattr(batch, "check_sources", checks)
    with open_store(db) as conn:  # what was kept is whole: the rest loads, and the store is a clean one's
        assert not [r for r in ingest_paths(conn, [SAMPLE], IngestOptions(year=2026)) if r.status == "failed"]
    clean = tmp_path / "clean.duckdb"
    with open_store(clean) as conn:
        ingest_paths(conn, [SAMPLE], IngestOptions(year=2026))
    assert _counts(db) == _counts(clean)
    with open_store(db, read_only=True) as a, open_store(clean, read_only=True) as b:
        rejects = "SELECT count(*), sum(rejected) FROM sources"
        assert a.execute(rejects).fetchall() == b.execute(rejects).fetchall()
