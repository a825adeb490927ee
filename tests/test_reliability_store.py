"""Issue 38, the store's side: what a killed ingest leaves in `STORE.tmp` is removed by the next writer
(only a dead process's files, never a live one's: defect 5), and `--cluster` namespaces racks and
filesystem servers as it does hosts (defect 6). Each test failed on the code before it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]  # heavy: spilling children; sample_data twice

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_data" / "exports"
SYNESTRA = str(Path(sys.executable).parent / "synestra")

# A process that spills into a folder as DuckDB's ingest parsing database does, and waits to be killed.
SPILLER = """
import sys, time, duckdb
c = duckdb.connect(':memory:', config={'memory_limit': '30MB', 'threads': 1, 'temp_directory': sys.argv[1]})
c.execute('SET enable_progress_bar = false')
c.execute('CREATE TABLE t AS SELECT range AS i, random() AS r FROM range(1500000)')
c.execute('SELECT * FROM t ORDER BY r').fetchmany(1)
print('spilled', flush=True)
time.sleep(600)
"""


def spill_folder(db: Path) -> Path:
    return Path(f"{db}.tmp")  # where DuckDB spills for a store file, and ingest's parsing database


def _spiller(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", SPILLER, str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stdout:
        if line.strip().endswith("spilled"):
            return proc
    raise AssertionError(proc.stderr.read())


def _files_of(folder: Path, pid: int) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith(f"duckdb_temp_{pid}_"))


def test_5_a_killed_spillers_files_are_removed_by_the_next_ingest_and_a_live_ones_kept(tmp_path):
    db = tmp_path / "s.duckdb"
    folder = spill_folder(db)
    dead, live = _spiller(folder), _spiller(folder)
    try:
        dead.send_signal(signal.SIGKILL)
        dead.wait(30)
        assert _files_of(folder, dead.pid) and _files_of(folder, live.pid)
        res = CliRunner().invoke(cli, ["ingest", str(SAMPLE / "topology.csv"), "--db", str(db)])
        assert res.exit_code == 0, res.output
        assert _files_of(folder, dead.pid) == []  # the dead one's, gone (it did not spill: DuckDB left them)
        assert _files_of(folder, live.pid)  # the live one's, kept
    finally:
        live.kill()
        live.wait(30)
    from synestra_cli.store.spill import sweep

    assert sweep(folder) > 0 and os.listdir(folder) == []


def test_5_a_reused_pid_does_not_keep_a_dead_processs_files(tmp_path):
    """A file older than the process now holding its pid was written by another process, since dead."""
    from synestra_cli.store.spill import sweep

    folder = tmp_path / "s.duckdb.tmp"
    folder.mkdir()
    parent = os.getppid()  # running, and started long before the file below
    stale = folder / f"duckdb_temp_{parent}_0_storage_DEFAULT-0.tmp"
    stale.write_bytes(b"x" * 100)
    os.utime(stale, (time.time() - 10**7, time.time() - 10**7))  # written before it started: not its file
    fresh = folder / f"duckdb_temp_{parent}_1_owner"
    fresh.write_bytes(b"")
    other = folder / "notes.txt"  # not DuckDB's: never touched
    other.write_text("x")
    assert sweep(folder) == 1
    assert not stale.exists() and fresh.exists() and other.exists()


def test_5_a_forget_sweeps_too_and_a_reader_never_does(tmp_path):
    db = tmp_path / "s.duckdb"
    assert CliRunner().invoke(cli, ["ingest", str(SAMPLE / "topology.csv"), "--db", str(db)]).exit_code == 0
    folder = spill_folder(db)
    folder.mkdir()
    dead = folder / "duckdb_temp_999999999_0_storage_DEFAULT-0.tmp"  # no such pid
    dead.write_bytes(b"x")
    assert CliRunner().invoke(cli, ["jobs", "--db", str(db)]).exit_code == 6
    assert dead.exists()  # a reader may have no right to write the folder: it leaves it
    assert CliRunner().invoke(cli, ["forget", "1", "--db", str(db)]).exit_code == 0
    assert not dead.exists()


# ---------------------------------------------------------------- defect 6: --cluster namespaces racks and filesystems


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory) -> Path:
    """sample_data/ twice in one store, as clusters a and b: the same rack-01, nfs-01, gpu-001..."""
    db = tmp_path_factory.mktemp("clusters") / "s.duckdb"
    for name in ("a", "b"):
        res = CliRunner().invoke(cli, ["ingest", str(SAMPLE), "--cluster", name, "--db", str(db)])
        assert res.exit_code == 0, res.output
    return db


def _json(*args: str) -> dict:
    res = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_6_fleet_keeps_two_clusters_racks_and_filesystems_apart(two_clusters):
    doc = _json("fleet", "--db", str(two_clusters))
    racks = {c["asset"]["id"]: c["asset"]["hosts"] for c in doc["components"] if c["asset"]["kind"] == "rack"}
    fs = {c["asset"]["id"]: c["asset"]["clients"] for c in doc["components"] if c["asset"]["kind"] == "filesystem"}
    assert set(racks) == {"a:rack-01", "b:rack-01"}
    assert all(h.startswith("a:") for h in racks["a:rack-01"]) and all(h.startswith("b:") for h in racks["b:rack-01"])
    assert set(fs) == {"a:nfs-01", "b:nfs-01"}
    assert all(h.startswith("a:") for h in fs["a:nfs-01"])
    for c in doc["components"]:  # every part's rack is its own cluster's
        rack = c["asset"].get("rack")
        if rack and c["asset"].get("host"):
            assert rack.split(":")[0] == c["asset"]["host"].split(":")[0]


def test_6_a_rack_ticket_and_explains_assets_name_one_clusters_hosts(two_clusters):
    doc = _json("explain", "--job", "a:1003", "--db", str(two_clusters))
    thermal = [c for c in doc["checkpoints"] if (c.get("cause") or {}).get("category") == "cooling.thermal"]
    assert thermal, "job 1003's hot rack"
    cause = thermal[0]["cause"]
    assert cause["component"] == "a:rack-01"
    assert "b:" not in cause["action"]["text"] and "a:gpu-001" in cause["action"]["text"]
    racks = [a for a in cause["assets"] if a["kind"] == "rack"]
    assert [a["rack"] for a in racks] == ["a:rack-01"] and all(h.startswith("a:") for h in racks[0]["hosts"])
    storage = _json("explain", "--job", "b:1005", "--db", str(two_clusters))
    slow = [c["cause"] for c in storage["checkpoints"] if (c.get("cause") or {}).get("category") == "storage.slow"]
    assert slow and slow[0]["component"] == "b:nfs-01"
    fs = [a for a in slow[0]["assets"] if a["kind"] == "filesystem"]
    assert [a["server"] for a in fs] == ["b:nfs-01"] and all(h.startswith("b:") for h in fs[0]["clients"])
