"""Issue 38, the ingest's side: one guard for every path the ingest walks, bombs, odd line endings and
clocks. Each test failed on the code before it (the defect's number in the issue is in its name).

Every path ingest is given or walks (a symlink loop in a folder or on the command line, a name that is
not UTF-8, a name full of escapes and glob characters, a FIFO, a device, a file that vanishes or changes
while read) is one file's refusal, in one line, and the rest loads; under `--follow` too.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from reliability_kit import OPTIONS, TRACEBACK
from reliability_kit import run_synestra as _run
from reliability_kit import syslog as _syslog

from synestra_cli.errors import ExitCode
from synestra_cli.ingest import ingest_paths
from synestra_cli.ingest.follow import Follower
from synestra_cli.store import open_store

pytestmark = pytest.mark.reliability


def _by_name(reports) -> dict[str, tuple[str, str | None]]:
    return {os.fsencode(Path(r.path).name).decode("utf-8", "backslashreplace"): (r.status, r.error) for r in reports}


@pytest.fixture
def odd_folder(tmp_path) -> Path:
    """A folder holding one good log and one of each path the walk must refuse alone."""
    top = tmp_path / "export"
    top.mkdir()
    (top / "good.log").write_text(_syslog("gpu-001"))
    (top / "loop-a").symlink_to("loop-b")  # a -> b -> a: ELOOP
    (top / "loop-b").symlink_to("loop-a")
    (top / "self").symlink_to("self")
    (top / "dangling").symlink_to("no-such-file")
    os.mkfifo(top / "fifo")
    (top / "null").symlink_to("/dev/null")
    with open(os.fsencode(top) + b"/bad\xff\xfe.log", "w") as f:  # not UTF-8: Latin-1 from an old tool
        f.write(_syslog("gpu-002"))
    (top / "esc\x1b[2J*?[a].log").write_text(_syslog("gpu-003"))  # escapes and glob characters: loads
    return top


def test_2_3_every_odd_path_in_a_folder_is_refused_alone_and_the_rest_loads(odd_folder, db_path):
    with open_store(db_path) as c:
        reports = ingest_paths(c, [odd_folder], OPTIONS)
        hosts = [r[0] for r in c.execute("SELECT DISTINCT host FROM events ORDER BY host").fetchall()]
    got = _by_name(reports)
    assert got["good.log"][0] == "loaded"
    assert got["esc\x1b[2J*?[a].log"][0] == "loaded"  # DuckDB never globs a path it is given
    assert hosts == ["gpu-001", "gpu-003"]
    for name in ("loop-a", "loop-b", "self"):
        assert got[name][0] == "failed" and "symbolic link loop" in got[name][1], got[name]
    assert "broken symbolic link" in got["dangling"][1]
    assert "a FIFO" in got["fifo"][1] and "a device" in got["null"][1]
    assert got["bad\\xff\\xfe.log"][0] == "failed" and "not valid UTF-8" in got["bad\\xff\\xfe.log"][1]


@pytest.mark.heavy
def test_2_3_the_cli_prints_one_line_per_refused_path_and_exits_3(odd_folder, tmp_path):
    loop = odd_folder / "loop-a"
    res = _run("ingest", str(odd_folder), str(loop), "--year", "2026", "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == ExitCode.INPUT, res.stderr
    assert TRACEBACK not in res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 8  # loop-a twice (in the folder, on the command line), loop-b, self, dangling, fifo,
    # null, the non-UTF-8 name
    assert "total: 2 loaded, 0 skipped, 8 failed" in res.stderr
    assert "bad\\xff\\xfe.log" in res.stderr  # shown escaped


def test_2_3_a_non_utf8_folder_is_refused_once_not_walked(tmp_path, db_path):
    top = tmp_path / "export"
    top.mkdir()
    (top / "good.log").write_text(_syslog("gpu-001"))
    odd = os.fsencode(top) + b"/node\xe9"
    os.mkdir(odd)
    for i in range(3):
        with open(odd + f"/f{i}.log".encode(), "w") as f:
            f.write(_syslog(f"gpu-00{i + 2}"))
    with open_store(db_path) as c:
        reports = ingest_paths(c, [top], OPTIONS)
    assert [r.status for r in reports] == ["loaded", "failed"]
    assert "folder name is not valid UTF-8" in reports[1].error


def test_2_follow_survives_a_loop_and_a_non_utf8_name_and_loads_the_rest(odd_folder, db_path):
    follower = Follower(db_path, [odd_folder, odd_folder / "loop-a"], OPTIONS)
    first = follower.poll()
    (odd_folder / "later.log").write_text(_syslog("gpu-004"))
    second = follower.poll()
    loaded = sorted(Path(r.path).name for p in (first, second) for r in p.reports if r.status == "loaded")
    assert loaded == ["esc\x1b[2J*?[a].log", "good.log", "later.log"]
    failed_first = [r for r in first.reports if r.status == "failed"]
    assert len(failed_first) == 7  # loop-a, given twice, is said once
    assert not [r for r in second.reports if r.status == "failed"]  # each refusal said once, not every poll


@pytest.mark.heavy
def test_2_follow_on_the_command_line_with_a_loop_does_not_die(odd_folder, tmp_path):
    res = _run(
        "ingest",
        "--follow",
        "--max-polls",
        "2",
        "--interval",
        "0.1",
        str(odd_folder / "loop-a"),
        str(odd_folder / "good.log"),
        "--year",
        "2026",
        "--db",
        str(tmp_path / "s.duckdb"),
    )
    assert TRACEBACK not in res.stderr, res.stderr
    assert "symbolic link loop" in res.stderr and "good.log: syslog, 3 rows" in res.stderr


def test_2_a_file_that_vanishes_before_it_is_read_is_its_own_failure_not_a_bug(tmp_path, db_path, monkeypatch):
    from synestra_cli.ingest import plan

    gone, good = tmp_path / "gone.log", tmp_path / "good.log"
    gone.write_text(_syslog("gpu-001"))
    good.write_text(_syslog("gpu-002"))
    digest = plan.file_digest

    def vanishing(path, prefix=None):
        if Path(path) == gone:
            gone.unlink()
        return digest(path, prefix)

    monkeypatch.setattr(plan, "file_digest", vanishing)
    with open_store(db_path) as c:
        reports = ingest_paths(c, [gone, good], OPTIONS)
    assert [r.status for r in reports] == ["failed", "loaded"]
    assert "gone.log: cannot be read (No such file or directory)" in reports[0].error
    assert "please report" not in reports[0].error
