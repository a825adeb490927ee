"""The reliability suite (issue 38): what a demanding SRE probed by hand, as tests. kill -9 during an
ingest, a forget, a migration and `ingest --follow` (at a hook inside the transaction, and from outside
at moments spread over the run), readers during an ingest, two ingests of one input at once; every run
after a kill finds a store whose answers are a clean ingest's, and no command prints a traceback. The
bomb and sandbox cases are tests/test_reliability_bombs.py and tests/test_reliability_lake.py; the whole
suite is `pytest -m reliability` (CI runs it: .ci/run), under ~10 min on one worker.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from synestra_cli.errors import ExitCode

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]  # heavy: child processes killed and run again

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "exports"
TRACEBACK = "Traceback (most recent call last)"
# A small real input: Slurm, two job logs, a syslog, a DCGM export, topology (a few seconds to ingest).
INPUTS = [
    SAMPLE / "sacct.txt",
    SAMPLE / "topology.csv",
    SAMPLE / "jobs" / "1003.log",
    SAMPLE / "jobs" / "1004.log",
    SAMPLE / "syslog" / "gpu-002.syslog.gz",
    SAMPLE / "dcgm" / "gpu-002.prom.gz",
]
TABLES = ("sources", "events", "metrics", "steps", "checkpoints", "attempts", "jobs", "topology")


def synestra(*args: str, prelude: str = "") -> list[str]:
    """The CLI in a child process; `prelude`: Python run first (a hook that kills the process itself)."""
    return [sys.executable, "-c", f"{prelude}\nfrom synestra_cli.cli.main import main; main()", *args]


def run(*args: str, prelude: str = "", timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    res = subprocess.run(
        synestra(*args, prelude=prelude),
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "SYNESTRA_LOCK_WAIT": "30", **env},
    )
    assert TRACEBACK not in res.stderr + res.stdout, res.stderr
    return res


def counts(db: Path) -> dict[str, int]:
    """Rows per table, and the rows of sources whose rows are not all there (must be 0)."""
    with duckdb.connect(str(db), read_only=True) as c:
        out = {t: c.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}
        out["orphans"] = c.execute(
            "SELECT (SELECT count(*) FROM events WHERE source_id NOT IN (SELECT source_id FROM sources))"
            " + (SELECT count(*) FROM metrics WHERE source_id NOT IN (SELECT source_id FROM sources))"
        ).fetchone()[0]
    return out


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> dict[str, int]:
    """What a clean ingest of INPUTS holds."""
    db = tmp_path_factory.mktemp("clean") / "s.duckdb"
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    return counts(db)


def readers_answer(db: Path) -> None:
    """Every reader answers on the store as a kill left it: 0, or 6 when no job is in yet; never 1."""
    for args in (["jobs"], ["sources"], ["tax-report", "--all"], ["fleet"], ["check"]):
        res = run(*args, "--db", str(db))
        assert res.returncode in (ExitCode.OK, ExitCode.EMPTY_STORE), (args, res.returncode, res.stderr)


def kill_after(cmd: list[str], delay: float, env: dict | None = None) -> int:
    """Start cmd, SIGKILL it after `delay` seconds (if still running); its exit code."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert TRACEBACK not in err, err
    return proc.returncode


# ---------------------------------------------------------------- kill -9 during an ingest


# Inside the commit, after the store received some of a batch's tables: the worst moment.
KILL_IN_COMMIT = """
import os, signal, sys
from contextlib import contextmanager
from synestra_cli.ingest import batch
real = batch.transaction
@contextmanager
def transaction(conn):
    with real(conn) as c:
        yield c
        if sys._getframe(2).f_code.co_name == '_copy':  # the batch's rows are in the store, not committed
            os.kill(os.getpid(), signal.SIGKILL)
batch.transaction = transaction
"""


@pytest.mark.slow
def test_kill_9_during_an_ingest_at_any_moment_leaves_a_store_the_next_ingest_makes_whole(tmp_path):
    """sample_data/ (29 files, ~8 s on one worker), killed at moments spread over its run: before its
    tables exist, while it parses, while it commits; each time readers answer, no row is without its
    source, and the ingest run again ends with the clean ingest's rows."""
    db, clean_db = tmp_path / "s.duckdb", tmp_path / "clean.duckdb"
    cmd = synestra("ingest", str(SAMPLE), "--db", str(db))
    killed = 0
    for delay in (0.1, 0.3, 0.6, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5):
        code = kill_after(cmd, delay, {"SYNESTRA_INGEST_WORKERS": "1"})
        if code == 0:
            break
        assert code == -signal.SIGKILL
        killed += 1
        if db.exists():
            if _has_tables(db):
                assert counts(db)["orphans"] == 0
            readers_answer(db)
    assert killed >= 4
    assert run("ingest", str(SAMPLE), "--db", str(db)).returncode == 0
    assert run("ingest", str(SAMPLE), "--db", str(clean_db)).returncode == 0
    assert counts(db) == counts(clean_db)


def test_kill_9_inside_an_ingests_commit_keeps_only_whole_files(tmp_path, clean):
    db = tmp_path / "s.duckdb"
    res = subprocess.run(
        synestra("ingest", *map(str, INPUTS), "--db", str(db), prelude=KILL_IN_COMMIT),
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SYNESTRA_INGEST_WORKERS": "1"},
    )
    assert res.returncode == -signal.SIGKILL and TRACEBACK not in res.stderr
    readers_answer(db)
    assert counts(db)["orphans"] == 0
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    assert counts(db) == clean


def _has_tables(db: Path) -> bool:
    """Whether the store has every table `counts` reads (a kill may leave it between two migrations)."""
    try:
        with duckdb.connect(str(db), read_only=True) as c:
            names = {r[0] for r in c.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    except duckdb.Error:  # empty, or not a store yet
        return False
    return set(TABLES) <= names


# ---------------------------------------------------------------- kill -9 during a forget

KILL_IN_FORGET = """
import os, signal
from synestra_cli.store import sources
real = sources.delete_sources
def delete_sources(conn, ids, *args, **kw):
    rows = real(conn, ids, *args, **kw)  # every row deleted, not committed yet
    os.kill(os.getpid(), signal.SIGKILL)
sources.delete_sources = delete_sources
"""


def test_kill_9_during_a_forget_leaves_the_store_as_it_was(tmp_path, clean):
    db = tmp_path / "s.duckdb"
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    res = subprocess.run(synestra("forget", "5", "--db", str(db), prelude=KILL_IN_FORGET), capture_output=True)
    assert res.returncode == -signal.SIGKILL
    assert counts(db) == clean  # the transaction never committed: nothing forgotten
    readers_answer(db)
    done = run("forget", "5", "--db", str(db))
    assert done.returncode == 0 and counts(db)["sources"] == clean["sources"] - 1


# ---------------------------------------------------------------- kill -9 during a migration

# Inside migration `name`'s transaction, after its statements ran, before it commits.
KILL_IN_MIGRATION = """
import os, signal
from contextlib import contextmanager
from synestra_cli.store import migrations as m
real, names = m.transaction, iter(name for name, _ in m.MIGRATIONS if name not in {done})
@contextmanager
def transaction(conn):
    name = next(names)
    with real(conn) as c:
        yield c
        if name == {name!r}:
            os.kill(os.getpid(), signal.SIGKILL)
m.transaction = transaction
"""


def _prelude(name: str, done: set[str] | None = None) -> str:
    return KILL_IN_MIGRATION.replace("{done}", repr(done or set())).replace("{name!r}", repr(name))


def test_kill_9_during_a_first_ingests_migrations_leaves_a_store_readers_call_empty(tmp_path, clean):
    """A first ingest makes the store's schema one migration (one transaction) at a time: killed between
    them, the store holds some tables and no data. Readers say it is empty (6), never a bug (1); the next
    ingest finishes the schema and loads everything."""
    from synestra_cli.store.migrations import MIGRATIONS

    db = tmp_path / "s.duckdb"
    middle = MIGRATIONS[len(MIGRATIONS) // 2][0]
    res = subprocess.run(synestra("ingest", *map(str, INPUTS), "--db", str(db), prelude=_prelude(middle)))
    assert res.returncode == -signal.SIGKILL
    assert 0 < len(_migrations(db)) < len(MIGRATIONS) and middle not in _migrations(db)
    for args in (["jobs"], ["sources"], ["tax-report", "--all"], ["fleet"], ["risks"], ["sql", "SELECT 1"]):
        got = run(*args, "--db", str(db))
        assert got.returncode == ExitCode.EMPTY_STORE, (args, got.stderr)
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    assert _migrations(db) == sorted(name for name, _ in MIGRATIONS) and counts(db) == clean


def test_kill_9_during_the_migration_of_a_store_with_data_leaves_it_as_it_was(tmp_path, clean):
    """A store of an older schema (without migration 020, as test_kept_taxes.py makes it), killed inside
    that migration's transaction as the next ingest opens it: its schema and rows are as before, readers
    answer, and the next ingest migrates it."""
    db = tmp_path / "s.duckdb"
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    with duckdb.connect(str(db)) as c:
        c.execute("DROP TABLE kept_taxes; DELETE FROM _migrations WHERE name = '020_kept_taxes'")
    before = _migrations(db)
    done = set(before)
    res = subprocess.run(
        synestra("ingest", str(SAMPLE / "topology.csv"), "--db", str(db), prelude=_prelude("020_kept_taxes", done))
    )
    assert res.returncode == -signal.SIGKILL
    assert _migrations(db) == before and counts(db) == clean  # rolled back whole
    readers_answer(db)
    assert run("ingest", *map(str, INPUTS), "--db", str(db)).returncode == 0
    assert "020_kept_taxes" in _migrations(db) and counts(db) == clean


def _migrations(db: Path) -> list[str]:
    with duckdb.connect(str(db), read_only=True) as c:
        return [r[0] for r in c.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]


# ---------------------------------------------------------------- kill -9 during --follow


def _syslog(n0: int, n: int) -> str:
    return "".join(
        f"Nov 29 {10 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d} gpu-017 kernel: event {i}\n"
        for i in range(n0, n0 + n)
    )


@pytest.mark.slow
def test_kill_9_during_follow_then_a_restart_ends_with_the_one_shot_rows(tmp_path):
    folder, db = tmp_path / "logs", tmp_path / "s.duckdb"
    folder.mkdir()
    log = folder / "messages"
    log.write_text(_syslog(0, 2000))
    follow = synestra("ingest", "--follow", "--interval", "0.2", str(folder), "--year", "2026", "--db", str(db))
    n = 2000
    for delay in (0.8, 1.6, 2.4, 3.2):
        proc = subprocess.Popen(follow, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        with open(log, "a") as f:  # it grows while followed, and mid-poll when killed
            f.write(_syslog(n, 3000))
        n += 3000
        time.sleep(0.15)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert TRACEBACK not in err, err
        if _has_tables(db):
            assert counts(db)["orphans"] == 0
    final = run(
        "ingest", "--follow", "--max-polls", "2", "--interval", "0.2", str(folder), "--year", "2026", "--db", str(db)
    )
    assert final.returncode == 0, final.stderr
    one_shot = tmp_path / "one.duckdb"
    assert run("ingest", str(folder), "--year", "2026", "--db", str(one_shot)).returncode == 0
    with duckdb.connect(str(db), read_only=True) as a, duckdb.connect(str(one_shot), read_only=True) as b:
        q = "SELECT line, ts, message FROM events ORDER BY line"
        assert a.execute(q).fetchall() == b.execute(q).fetchall()  # every line once, where it is


# ---------------------------------------------------------------- readers during an ingest


def test_readers_answer_while_an_ingest_runs_and_never_print_a_traceback(tmp_path, clean):
    db = tmp_path / "s.duckdb"
    assert run("ingest", str(SAMPLE / "sacct.txt"), str(SAMPLE / "jobs"), "--db", str(db)).returncode == 0
    more = tmp_path / "more"
    shutil.copytree(SAMPLE / "dcgm", more / "dcgm")
    shutil.copytree(SAMPLE / "syslog", more / "syslog")
    proc = subprocess.Popen(
        synestra("ingest", str(more), "--db", str(db)), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    answered = 0
    try:
        while proc.poll() is None:
            for args in (
                ["jobs"],
                ["explain", "--job", "1003", "--format", "json"],
                ["sql", "SELECT count(*) FROM metrics"],
            ):
                res = run(*args, "--db", str(db))
                assert res.returncode == 0, (args, res.stderr)
                answered += proc.poll() is None
    finally:
        _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and TRACEBACK not in err, err
    assert answered >= 3


# ---------------------------------------------------------------- two writers at once


def test_two_ingests_of_one_input_at_once_load_it_once(tmp_path, clean):
    """Two ingests of the same files started together: one waits for the other's write lock (up to
    SYNESTRA_LOCK_WAIT), then finds every file already loaded; the store holds each row once."""
    db = tmp_path / "s.duckdb"
    cmd = synestra("ingest", *map(str, INPUTS), "--db", str(db))
    env = {**os.environ, "SYNESTRA_LOCK_WAIT": "120", "SYNESTRA_INGEST_WORKERS": "1"}
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in "ab"]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and TRACEBACK not in err, err
    assert counts(db) == clean  # no duplicates, nothing lost
