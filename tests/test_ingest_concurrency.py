"""Readers are never locked out by an ingest (issue 14 item 1), and a killed ingest leaves whole files.

The ingest runs in its own process, as the runbook's nightly `synestra ingest` does, over thousands of
small syslog files built here; meanwhile `jobs`, `explain` and `tax-report` read the same store and
must answer (exit 0, never 4) within SYNESTRA_LOCK_WAIT. On the old code the ingesting process held
DuckDB's file lock from its first file to its last, and every reader exited 4.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data" / "exports"
LOCK_WAIT = "5"  # what the readers wait for the store at most (the default)
LINES = 4  # per file: small files, where the cost is per file


def _files(folder: Path, n: int, tag: str = "") -> list[Path]:
    """n small RFC 3164 syslog files, each its own content (node, minute and second differ)."""
    folder.mkdir(parents=True)
    out = []
    for i in range(n):
        f = folder / f"node{i:05d}.log"
        f.write_text(
            "".join(
                f"Nov 29 {10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d} node{i:05d} kernel: "
                f"{tag}message {j} of file {i}\n"
                for j in range(LINES)
            )
        )
        out.append(f)
    return out


def _synestra(*args: str) -> list[str]:
    return [sys.executable, "-c", "from synestra_cli.cli.main import cli; cli()", *args]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "SYNESTRA_LOCK_WAIT": LOCK_WAIT, **extra}


def _jobs_store(db: Path) -> None:
    """A store with sample_data's jobs (sacct and job logs: small), for the readers to read."""
    result = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "sacct.txt"), str(SAMPLE / "jobs"), "--db", str(db)])
    assert result.exit_code == 0, result.output


def _start_ingest(folder: Path, db: Path) -> subprocess.Popen[str]:
    # stderr (a line per file) to a file, not a pipe nobody reads until the end: a full pipe would
    # stop the ingest at its next line, and the test would wait for it forever
    with open(folder.parent / f"{folder.name}.stderr", "w") as err:
        return subprocess.Popen(
            _synestra("ingest", str(folder), "--year", "2026", "--db", str(db)),
            stdout=subprocess.DEVNULL,
            stderr=err,
            text=True,
            env=_env(),
        )


def _sources(db: Path) -> int:
    """Sources committed so far: a read-only look that waits for the lock as a reader does."""
    deadline = time.monotonic() + float(LOCK_WAIT)
    while True:
        try:
            with duckdb.connect(str(db), read_only=True) as c:
                return c.execute("SELECT count(*) FROM sources").fetchone()[0]
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


READERS = (
    ["jobs"],
    ["explain", "--job", "1003", "--format", "json"],
    ["tax-report", "--job", "1003", "--format", "json"],
)


def _read_during(ingest: subprocess.Popen[str], db: Path, run_reader, rounds: int) -> int:
    """Run the readers in turn while the ingest runs; each must exit 0. Returns how many rounds of all
    three each answered with the ingest still running when it did (they ran during it)."""
    during = {args[0]: 0 for args in READERS}
    while ingest.poll() is None and min(during.values()) < rounds:
        for args in READERS:
            code, output = run_reader([*args, "--db", str(db)])
            assert code == 0, (args, code, output[-2000:])
            during[args[0]] += ingest.poll() is None
    return min(during.values())


def _whole_files(db: Path, files: list[Path]) -> dict[str, int]:
    """Each source's events are its file's, all of them: {path: events}. Fails on a partial file."""
    with duckdb.connect(str(db), read_only=True) as c:
        rows = c.execute(
            "SELECT s.path, s.rows, count(e.line), min(e.line), max(e.line) FROM sources s "
            "LEFT JOIN events e USING (source_id) WHERE s.format = 'syslog' GROUP BY ALL"
        ).fetchall()
        orphans = c.execute("SELECT count(*) FROM events WHERE source_id NOT IN (SELECT source_id FROM sources)")
        assert orphans.fetchone()[0] == 0  # no row without its source: no half-committed file
    names = {str(f.resolve()) for f in files}
    for path, n_rows, n_events, first, last in rows:
        assert path in names
        assert (n_rows, n_events, first, last) == (LINES, LINES, 1, LINES), path
    return {path: n for path, _, n, _, _ in rows}


def _check_readers_and_kill(tmp_path: Path, n_files: int, run_reader, rounds: int) -> None:
    db = tmp_path / "store.duckdb"
    _jobs_store(db)
    files = _files(tmp_path / "in", n_files)
    ingest = _start_ingest(tmp_path / "in", db)
    try:
        during = _read_during(ingest, db, run_reader, rounds)
    finally:
        ingest.wait(timeout=900)
    assert ingest.returncode == 0, (tmp_path / "in.stderr").read_text()[-2000:]
    assert during >= 1, "the ingest ended before one round of readers: give it more files"
    assert len(_whole_files(db, files)) == n_files

    # kill -9 mid-ingest: only whole files are in; ingesting again loads the rest, once (enough files that
    # it takes several commits: small files are parsed hundreds at a time)
    n_more = max(n_files, 3000)
    more = _files(tmp_path / "more", n_more, tag="more ")
    ingest = _start_ingest(tmp_path / "more", db)
    try:
        while _sources(db) <= n_files + 9 and ingest.poll() is None:  # a commit or more of the new files
            time.sleep(0.05)
        assert ingest.poll() is None, "the ingest ended before it could be killed: give it more files"
        ingest.send_signal(signal.SIGKILL)
    finally:
        ingest.wait(timeout=60)
    in_after_kill = _whole_files(db, files + more)
    assert n_files < len(in_after_kill) < n_files + n_more
    again = subprocess.run(
        _synestra("ingest", str(tmp_path / "more"), "--year", "2026", "--db", str(db)),
        capture_output=True,
        text=True,
        env=_env(),
        timeout=900,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(in_after_kill) - n_files} skipped" in again.stderr
    assert len(_whole_files(db, files + more)) == n_files + n_more


def _in_process(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args, env={"SYNESTRA_LOCK_WAIT": LOCK_WAIT})
    return result.exit_code, result.output


def _as_a_user(args: list[str]) -> tuple[int, str]:
    run = subprocess.run(_synestra(*args), capture_output=True, text=True, env=_env(), timeout=300)
    return run.returncode, run.stdout + run.stderr


@pytest.mark.heavy
def test_readers_answer_during_a_long_ingest_and_a_killed_one_leaves_whole_files(tmp_path):
    """Quick: readers in this process (CliRunner), 1,000 files."""
    _check_readers_and_kill(tmp_path, 1000, _in_process, rounds=1)


@pytest.mark.slow
def test_readers_as_processes_answer_during_an_ingest_of_thousands_of_files(tmp_path):
    """Every reader a new `synestra` process, as in a runbook; 4,000 files."""
    _check_readers_and_kill(tmp_path, 4000, _as_a_user, rounds=3)
