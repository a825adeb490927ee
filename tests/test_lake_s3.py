"""A lake on S3 without a network: moto's server on the loopback is the S3 endpoint (the `lake-s3` extra:
s3fs; moto for the test). Ingest writes its parts and entries as objects, explain reads them back
through fsspec and answers as a store file holding the same files. Skipped when s3fs or moto's server
is not installed (CI installs `.[test,peer,dev]`)."""

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
