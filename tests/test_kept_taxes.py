"""Each job's tax accounting kept beside its explanation (kept/taxes.py): a warm tax-report reads it
instead of recomputing the buckets or decoding the explanations, prints the same bytes, and any new or
forgotten source makes it stale with the explanations."""

from __future__ import annotations

import json
from dataclasses import replace

import duckdb
from builders import crash_and_resume
from click.testing import CliRunner
from explain_fixtures import reactive_job_with_a_lossy_port

from synestra_cli.accounting import attribution
from synestra_cli.accounting.attribution import build_report
from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.accounting.kept import taxes as kept
from synestra_cli.cli.main import cli
from synestra_cli.explain import batch
from synestra_cli.store import open_store
from synestra_cli.store.migrations import apply_migrations
from synestra_cli.store.sources import forget


def _report(db, *options: str) -> str:
    result = CliRunner().invoke(cli, ["tax-report", "--all", "--format", "json", "--db", str(db), *options])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _keep(conn: duckdb.DuckDBPyConnection) -> attribution.FullReport:
    full = build_report(conn, None, None, None, None, None, explanations=False)
    memo.save(conn, full.key, full.computed, lambda c: kept.save(c, full.key, full.taxes))
    return full


def test_a_warm_report_reads_the_kept_accounting_and_prints_the_same_bytes(db_path, monkeypatch):
    with open_store(db_path) as c:
        reactive_job_with_a_lossy_port(c)
    priced = ["--gpu-hour-price", "2.5", "--by", "host"]
    cold = _report(db_path, *priced)
    assert any(ch["component"] == "leaf-01:Ethernet2" for ch in json.loads(cold)["jobs"][0]["by_cause"])
    with open_store(db_path, read_only=True) as c:
        assert c.execute("SELECT job_id, store_key FROM kept_taxes").fetchall() == [("100", memo.store_key(c))]

    def must_not_run(*_a, **_k):
        raise AssertionError("the kept accounting should have been read")

    monkeypatch.setattr(attribution, "report_of", must_not_run)  # no buckets recomputed
    monkeypatch.setattr(memo, "load", must_not_run)  # no explanation decoded
    monkeypatch.setattr(batch, "explain_batch", must_not_run)
    assert _report(db_path, *priced) == cold
    warm_plain = _report(db_path)  # the price and grouping are applied to the kept accounting
    monkeypatch.undo()
    with open_store(db_path) as c:
        c.execute("DELETE FROM kept_taxes")
    assert _report(db_path) == warm_plain


def test_the_kept_accounting_reads_back_exactly_as_it_was_computed(conn):
    crash_and_resume(conn)  # two attempts, a failure: datetimes in the cuts, charges tied to checkpoints
    full = _keep(conn)
    [computed] = full.report.jobs
    assert computed.charges and computed.buckets.attempts[0]["start_ts"] is not None
    loaded = kept.load(conn, ["42"], full.key)
    assert loaded == {"42": replace(computed, by_cause=[])}  # by_cause: the report's price applied to the charges


def test_a_new_or_forgotten_source_makes_the_kept_accounting_stale(conn):
    sc = reactive_job_with_a_lossy_port(conn)
    full = _keep(conn)
    assert kept.load(conn, ["100"], memo.store_key(conn)) is not None
    late = sc.source("late.log", "syslog")  # one more file ingested
    assert kept.load(conn, ["100"], memo.store_key(conn)) is None
    again = _keep(conn)  # recomputed under the new key, and kept under it
    assert again.taxes and again.key != full.key
    assert kept.load(conn, ["100"], again.key) is not None
    forget(conn, [str(late)])
    assert memo.store_key(conn) != again.key
    assert kept.load(conn, ["100"], memo.store_key(conn)) is None


def test_a_job_without_accounting_is_kept_as_such_and_a_partial_hit_recomputes(conn):
    crash_and_resume(conn)
    conn.execute("INSERT INTO jobs (job_id, gpus, source_id) VALUES ('43', 8, 1)")
    key = memo.store_key(conn)
    assert kept.documents(["42", "43"], []) == [("42", None), ("43", None)]
    kept.save(conn, key, [("43", None)])
    assert kept.load(conn, ["43"], key) == {"43": None}
    assert kept.load(conn, ["42", "43"], key) is None  # 42 is not kept: everything is recomputed


def test_migration_020_adds_the_table_to_a_store_of_the_old_schema(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
        c.execute("DROP TABLE kept_taxes")
        c.execute("DELETE FROM _migrations WHERE name = '020_kept_taxes'")
    old = _report(db_path)  # opened read-only before the migration: computed, and kept once it ran
    with open_store(db_path, read_only=True) as c:
        assert c.execute("SELECT job_id FROM kept_taxes").fetchall() == [("42",)]
    c = duckdb.connect(str(db_path))
    try:
        c.execute("DROP TABLE kept_taxes")
        c.execute("DELETE FROM _migrations WHERE name = '020_kept_taxes'")
        assert apply_migrations(c) == ["020_kept_taxes"]
        assert c.execute("SELECT count(*) FROM kept_taxes").fetchone() == (0,)
    finally:
        c.close()
    assert _report(db_path) == old
