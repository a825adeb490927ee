"""`synestra explain`: table and JSON output, schema, exit codes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from explain_fixtures import healthy_job

from synestra_cli.cli.main import cli
from synestra_cli.store.connect import connect


def _store(db_path):
    conn = connect(db_path)
    healthy_job(conn)
    conn.close()


def test_json_follows_the_documented_schema(db_path):
    _store(db_path)
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100", "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "synestra.explain/3" and doc["job"] == "100"
    first = doc["checkpoints"][0]
    assert set(first) >= {
        "kind",
        "iteration",
        "start",
        "end",
        "duration_s",
        "trigger",
        "cause",
        "chain",
        "alternatives",
    }
    assert first["start"].endswith("Z") and first["cause"] is None and first["kind"] == "save"


def test_table_folds_routine_checkpoints_into_one_line(db_path):
    _store(db_path)
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100"])
    assert res.exit_code == 0
    assert "5 routine checkpoints (periodic 4, final 1)" in res.stdout


def test_all_with_jsonl_writes_one_document_per_job(db_path):
    _store(db_path)
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--all", "--format", "jsonl"])
    assert res.exit_code == 0
    assert [json.loads(line)["job"] for line in res.stdout.splitlines()] == ["100"]


def test_unknown_job_exits_5_and_empty_store_exits_6(db_path):
    connect(db_path).close()
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100"])
    assert res.exit_code == 6 and res.stdout == "" and "no jobs" in res.stderr
    _store(db_path)
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "999"])
    assert res.exit_code == 5 and res.stdout == "" and "999" in res.stderr


def test_job_or_all_is_required(db_path):
    _store(db_path)
    res = CliRunner().invoke(cli, ["explain", "--db", str(db_path)])
    assert res.exit_code == 2


def test_since_until_select_checkpoints_and_accept_a_z_suffix(db_path):
    _store(db_path)
    args = [
        "explain",
        "--db",
        str(db_path),
        "--job",
        "100",
        "--format",
        "json",
        "--since",
        "2026-03-01T12:05:00Z",
        "--until",
        "2026-03-01 12:15:00",
    ]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 0, res.output
    assert [c["iteration"] for c in json.loads(res.stdout)["checkpoints"]] == [400, 600, 800]


@pytest.mark.heavy
def test_tax_flag_adds_the_job_tax_summary(db_path):
    _store(db_path)
    plain = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100", "--format", "json"])
    taxed = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100", "--format", "json", "--tax"])
    assert json.loads(plain.stdout)["tax"] is None
    doc = json.loads(taxed.stdout)
    assert doc["tax"]["gpus"] == 32 and doc["checkpoints"][0]["tax"]["buckets_s"]["checkpoint_save"] > 0
    table = CliRunner().invoke(cli, ["explain", "--db", str(db_path), "--job", "100", "--tax"])
    assert "tax: checkpoint" in table.stdout
