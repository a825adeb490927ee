"""A lake on S3 without a network: moto's server on the loopback is the S3 endpoint (the `lake-s3` extra:
s3fs; moto for the test). Ingest writes its parts and entries as objects, explain reads them back
through fsspec and answers as a store file holding the same files. Skipped when s3fs or moto's server
is not installed (the README's test command installs `.[test,peer,dev]`; `.ci/run` then installs
the extra and moto's server, and runs this file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
FILES = [
    SAMPLE / "sacct.txt",
    SAMPLE / "topology.csv",
    SAMPLE / "jobs" / "1001.log",
    *sorted((SAMPLE / "dcgm").iterdir())[:2],
]


@pytest.fixture
def s3(monkeypatch):
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="telemetry")
    yield boto3.client("s3", endpoint_url=endpoint)
    server.stop()


def _cli(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 0, res.output
    return res.stdout


def test_a_lake_on_s3_answers_as_a_store_file(s3, tmp_path):
    lake, store = "s3://telemetry/synestra", str(tmp_path / "store.duckdb")
    _cli("ingest", *map(str, FILES), "--db", lake)
    _cli("ingest", *map(str, FILES), "--db", store)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="telemetry")["Contents"]]
    assert "synestra/_lake.json" in keys
    assert sum(k.startswith("synestra/_manifest/") for k in keys) == len(FILES)
    assert any(k.startswith("synestra/metrics/day=") for k in keys)
    on_s3 = _cli("explain", "--job", "1001", "--format", "json", "--db", lake)
    assert '"checkpoints"' in on_s3
    assert on_s3 == _cli("explain", "--job", "1001", "--format", "json", "--db", store)
    again = CliRunner().invoke(cli, ["ingest", *map(str, FILES), "--db", lake])
    assert again.exit_code == 0 and f"0 loaded, {len(FILES)} skipped" in again.output


def test_one_writer_at_a_time_on_an_s3_lake(s3, monkeypatch):
    """The lock object is created by a conditional PUT: a second writer waits, then gets exit 4 naming
    the holder; readers never wait; once released, the next writer gets it."""
    from synestra_cli.store import lake_lock
    from synestra_cli.store.lake_fs import open_fs

    lake = "s3://telemetry/synestra"
    _cli("ingest", str(FILES[0]), "--db", lake)
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "1")
    held = lake_lock.take(open_fs(lake))
    try:
        res = CliRunner().invoke(cli, ["ingest", str(FILES[1]), "--db", lake])
        assert res.exit_code == 4, res.output
        assert "is being written by another synestra" in res.output and "pid" in res.output
        res = CliRunner().invoke(cli, ["forget", str(FILES[0]), "--db", lake])
        assert res.exit_code == 4
        assert _cli("jobs", "--db", lake) is not None  # a reader
    finally:
        held.release()
    assert "synestra/_lake.lock" not in [o["Key"] for o in s3.list_objects_v2(Bucket="telemetry")["Contents"]]
    _cli("ingest", str(FILES[1]), "--db", lake)


def test_a_dead_writers_lease_expires_and_a_lost_lease_stops_the_commit(s3, monkeypatch):
    """A writer that died leaves its lock object; once its lease has expired the next writer takes it
    over (a conditional PUT on its ETag), and the old holder, were it only stalled, may commit nothing."""
    from synestra_cli.errors import StoreBusyError
    from synestra_cli.store import lake_lock
    from synestra_cli.store.lake_fs import open_fs

    lake = "s3://telemetry/synestra"
    monkeypatch.setenv("SYNESTRA_LAKE_LEASE", "8")
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "0")
    stalled = lake_lock.take(open_fs(lake))
    stalled._stop.set()  # it stops renewing, as a hung or killed writer does
    with pytest.raises(StoreBusyError):
        lake_lock.take(open_fs(lake))  # its lease still runs
    monkeypatch.setenv("SYNESTRA_LOCK_WAIT", "30")
    successor = lake_lock.take(open_fs(lake))  # waits out the lease, then takes it over
    try:
        with pytest.raises(StoreBusyError, match="lease expired"):
            stalled.check()
        successor.check()
    finally:
        successor.release()
        stalled.release()


def test_forget_and_kept_explanations_on_s3(s3, tmp_path):
    lake, store = "s3://telemetry/synestra", str(tmp_path / "store.duckdb")
    _cli("ingest", *map(str, FILES), "--db", lake)
    _cli("ingest", *map(str, FILES), "--db", store)
    on_s3 = _cli("forget", str(FILES[-1]), "--db", lake, "--format", "json")
    assert on_s3 == _cli("forget", str(FILES[-1]), "--db", store, "--format", "json")
    first = _cli("tax-report", "--all", "--format", "json", "--db", lake)
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="telemetry")["Contents"]]
    assert any(k.startswith("synestra/_explanations/key-") for k in keys)
    assert first == _cli("tax-report", "--all", "--format", "json", "--db", lake)
    assert first == _cli("tax-report", "--all", "--format", "json", "--db", store)


def test_compaction_and_forget_on_s3(s3, tmp_path, monkeypatch):
    """On S3 the compacted parts are objects, the commit one checkpoint PUT: explain answers as before and
    as a store file, forget after compaction reports as on a store file, and --retain 0 leaves exactly
    the listed parts."""
    from synestra_cli.store.lake_fs import open_fs
    from synestra_cli.store.lake_manifest import read_manifest

    monkeypatch.setenv("SYNESTRA_LAKE_COMPACT_RUN", "0")
    # a prefix of its own: moto's state outlives its server, and the tests above wrote under synestra/
    lake, store = "s3://telemetry/compacted", str(tmp_path / "store.duckdb")
    _cli("ingest", *map(str, FILES), "--db", lake)
    _cli("ingest", *map(str, FILES), "--db", store)
    before = _cli("explain", "--job", "1001", "--format", "json", "--db", lake)
    res = CliRunner().invoke(cli, ["compact", "--db", lake])
    assert res.exit_code == 0 and "compacted" in res.output, res.output
    listed = [p.path for e in read_manifest(open_fs(lake)).kept() for p in e.parts]
    assert sum(p.startswith("sources/") for p in listed) == 1
    assert _cli("explain", "--job", "1001", "--format", "json", "--db", lake) == before
    assert before == _cli("explain", "--job", "1001", "--format", "json", "--db", store)
    on_s3 = _cli("forget", str(FILES[-1]), "--db", lake, "--format", "json")
    assert on_s3 == _cli("forget", str(FILES[-1]), "--db", store, "--format", "json")
    assert _cli("tax-report", "--all", "--format", "json", "--db", lake) == _cli(
        "tax-report", "--all", "--format", "json", "--db", store
    )
    _cli("compact", "--db", lake, "--retain", "0")
    listed = {p.path for e in read_manifest(open_fs(lake)).kept() for p in e.parts}
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="telemetry")["Contents"]]
    assert {k.removeprefix("compacted/") for k in keys if k.startswith("compacted/") and "/part-" in k} == listed
