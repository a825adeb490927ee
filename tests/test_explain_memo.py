"""Explanations kept in the store (kept/explanations.py): read back as computed, never stale, reused by tax-report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import crash_and_resume
from click.testing import CliRunner
from explain_fixtures import reactive_job_with_a_lossy_port

import synestra_cli
from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.cli.main import cli
from synestra_cli.errors import StoreBusyError, StoreError
from synestra_cli.explain import batch
from synestra_cli.explain.job import explain_job
from synestra_cli.store import open_store


def _doc(explanation) -> str:
    return json.dumps(explanation.to_json(), default=memo._iso, sort_keys=True)


def test_a_kept_explanation_reads_back_exactly_as_it_was_computed(conn):
    reactive_job_with_a_lossy_port(conn)
    live = explain_job(conn, "100")
    assert any(c.cause and c.cause.component == "leaf-01:Ethernet2" for c in live.checkpoints)  # worth keeping
    key = memo.store_key(conn)
    assert memo.save(conn, key, [live]) == 1
    kept = memo.load(conn, ["100"], key)["100"]
    assert [c.cause for c in kept.checkpoints] == [c.cause for c in live.checkpoints]
    assert [(c.start, c.end, c.trigger) for c in kept.checkpoints] == [
        (c.start, c.end, c.trigger) for c in live.checkpoints
    ]
    assert _doc(kept) == _doc(live)


def test_any_new_source_changes_the_key_so_a_kept_explanation_is_never_read_stale(conn):
    sc = reactive_job_with_a_lossy_port(conn)
    before = memo.store_key(conn)
    memo.save(conn, before, [explain_job(conn, "100")])
    sc.source("late.log", "syslog")  # one more file ingested
    after = memo.store_key(conn)
    assert after != before
    assert memo.load(conn, ["100"], after) == {}
    explanations, computed, key = memo.explain_jobs(conn, ["100"])
    assert [e.job for e in computed] == ["100"] and key == after
    # a save under the old key, after the store changed, keeps nothing
    assert memo.save(conn, before, computed) == 0


def test_tax_report_keeps_the_explanations_it_computes_and_reuses_them(db_path, monkeypatch):
    with open_store(db_path) as c:
        crash_and_resume(c)
    args = ["tax-report", "--all", "--format", "json", "--db", str(db_path)]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.stderr
    with open_store(db_path, read_only=True) as c:
        assert c.execute("SELECT job_id FROM explanations").fetchall() == [("42",)]

    def must_not_run(_conn, job_ids, _windows=None):
        assert not job_ids, "the kept explanation should have been reused"
        return []

    monkeypatch.setattr(batch, "explain_batch", must_not_run)
    second = CliRunner().invoke(cli, args)
    assert second.exit_code == 0, second.stderr
    assert second.stdout == first.stdout


@pytest.mark.parametrize("error", [StoreBusyError("held by another process"), StoreError("read-only file")])
def test_a_store_that_cannot_be_written_now_is_left_alone(conn, monkeypatch, error):
    reactive_job_with_a_lossy_port(conn)

    def busy(*_a, **_k):
        raise error

    monkeypatch.setattr("synestra_cli.store.open_store", busy)
    assert memo.save_to("x.duckdb", memo.store_key(conn), [explain_job(conn, "100")]) == 0


def test_a_store_from_before_the_cache_is_read_without_it(db_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
        c.execute("DROP TABLE explanations")
    with open_store(db_path, read_only=True) as c:
        assert memo.load(c, ["42"], memo.store_key(c)) == {}
        explanations, computed, _ = memo.explain_jobs(c, ["42"])
    assert [e.job for e in computed] == ["42"] and set(explanations) == {"42"}


def test_another_version_of_synestra_does_not_read_them(conn, monkeypatch):
    reactive_job_with_a_lossy_port(conn)
    memo.save(conn, memo.store_key(conn), [explain_job(conn, "100")])
    monkeypatch.setattr(memo, "__version__", "0.0.9")
    assert memo.load(conn, ["100"], memo.store_key(conn)) == {}


def test_ingest_explain_keeps_every_job_for_the_next_tax_report(db_path, tmp_path, monkeypatch):
    with open_store(db_path) as c:
        crash_and_resume(c)
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(cli, ["ingest", str(tmp_path / "empty"), "--db", str(db_path), "--explain"])
    assert out.exit_code == 0, out.stderr
    assert "explain: 1 job explained and kept for tax-report" in out.stderr
    with open_store(db_path, read_only=True) as c:
        (key,) = c.execute("SELECT store_key FROM explanations WHERE job_id = '42'").fetchone()
        assert key == memo.store_key(c)
    monkeypatch.setattr(batch, "explain_batch", lambda _c, jobs, *_: [] if not jobs else pytest.fail("re-explained"))
    report = CliRunner().invoke(cli, ["tax-report", "--all", "--format", "json", "--db", str(db_path)])
    assert report.exit_code == 0, report.stderr
    assert json.loads(report.stdout)["jobs"][0]["job"] == "42"


def test_ingest_explain_on_a_store_without_jobs_says_so(db_path, tmp_path):
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(cli, ["ingest", str(tmp_path / "empty"), "--db", str(db_path), "--explain"])
    assert out.exit_code == 0 and "explain: no jobs in the store yet" in out.stderr


# Run in a fresh process against a copy of the package: the key of the code that process runs.
KEY_SCRIPT = """
import json, sys
import synestra_cli
from synestra_cli.accounting.kept import explanations as memo
from synestra_cli.explain import batch
from synestra_cli.store import open_store
with open_store(sys.argv[1], read_only=True) as c:
    key = memo.store_key(c)
    print(json.dumps({"package": synestra_cli.__file__, "key": key, "kept": sorted(memo.load(c, ["42"], key))}))
"""


def _copy_of_the_package(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    shutil.copytree(
        Path(synestra_cli.__file__).parent, root / "synestra_cli", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root


def _key_in_a_new_process(root: Path, db: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}  # and the working folder: `-c` puts it first on sys.path
    out = subprocess.run([sys.executable, "-c", KEY_SCRIPT, str(db)], env=env, cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["package"].startswith(str(root)), doc  # the copy ran, not the installed package
    return doc


def test_a_changed_threshold_makes_the_kept_explanations_ignored(db_path, tmp_path):
    with open_store(db_path) as c:
        crash_and_resume(c)
    first = CliRunner().invoke(cli, ["tax-report", "--all", "--format", "json", "--db", str(db_path)])
    assert first.exit_code == 0, first.stderr
    with open_store(db_path, read_only=True) as c:
        (kept_key,) = c.execute("SELECT store_key FROM explanations WHERE job_id = '42'").fetchone()
    root = _copy_of_the_package(tmp_path)
    same = _key_in_a_new_process(root, db_path)
    assert same["key"] == kept_key and same["kept"] == ["42"]  # the same code elsewhere reuses them
    thresholds = root / "synestra_cli" / "signals" / "thresholds.py"
    text = thresholds.read_text()
    assert "\nSLOW_FACTOR = 1.10\n" in text
    thresholds.write_text(text.replace("\nSLOW_FACTOR = 1.10\n", "\nSLOW_FACTOR = 1.25\n"))
    tuned = _key_in_a_new_process(root, db_path)
    assert tuned["key"] != kept_key and tuned["kept"] == []  # same version, same sources: the code changed


def test_the_code_digest_covers_what_produces_an_explanation_and_only_that(tmp_path):
    root = _copy_of_the_package(tmp_path)
    pkg = root / "synestra_cli"
    base = memo.code_digest(pkg)
    assert base == memo.code_digest(Path(synestra_cli.__file__).parent) == memo.process_digest()
    for producer in ("explain/rules.py", "accounting/attribution.py", "store/job_views.py"):
        f = pkg / producer
        original = f.read_bytes()
        f.write_bytes(original + b"\n# tuned\n")
        assert memo.code_digest(pkg) != base, producer
        f.write_bytes(original)
    (pkg / "formats" / "kernel" / "syslog.py").write_bytes(b"# a parser: what it wrote is in the sources already\n")
    (pkg / "cli" / "explain_view.py").write_bytes(b"# rendering only\n")
    assert memo.code_digest(pkg) == base


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, sample_store_template) -> Path:
    from conftest import copy_sample_store

    return copy_sample_store(sample_store_template, tmp_path_factory.mktemp("explain-kept"))


def _explain(db: Path, *args: str, kept: bool = True) -> str:
    env = {} if kept else {"SYNESTRA_KEPT": "0"}
    res = CliRunner(env=env).invoke(cli, ["explain", *args, "--db", str(db)])
    assert res.exit_code == 0, res.output
    return res.stdout


@pytest.mark.parametrize("fmt", ["json", "table", "csv", "jsonl"])
def test_explain_keeps_what_it_computes_and_prints_the_kept_explanation_alike(sample_db, fmt):
    """A whole job's explanation is kept in the store by the explain that computed it and read back by the
    next: every format prints the same bytes as a computation that neither reuses nor keeps (SYNESTRA_KEPT=0)."""
    args = ["--job", "1003", "--format", fmt]
    computed = _explain(sample_db, *args, kept=False)
    first, second = _explain(sample_db, *args), _explain(sample_db, *args)
    assert first == second == computed
    with open_store(sample_db, read_only=True) as c:
        assert ("1003",) in c.execute(
            "SELECT job_id FROM explanations WHERE store_key = ?", [memo.store_key(c)]
        ).fetchall()


def test_explain_all_computes_the_jobs_not_kept_at_once_and_prints_them_alike(sample_db):
    """--all explains the jobs nobody kept through the fleet's read (explain/batch.py), each as alone: the
    same bytes as one job at a time (SYNESTRA_KEPT=0), then as read back."""
    with open_store(sample_db) as c:
        c.execute("DELETE FROM explanations WHERE job_id <> '1003'")  # one kept, the others to compute
    alone = _explain(sample_db, "--all", "--format", "jsonl", kept=False)
    assert len(alone.splitlines()) >= 8
    assert _explain(sample_db, "--all", "--format", "jsonl") == alone
    assert _explain(sample_db, "--all", "--format", "jsonl") == alone


def test_explain_reuses_a_kept_explanation_without_computing(sample_db, monkeypatch):
    _explain(sample_db, "--job", "1001", "--format", "json")  # computes and keeps it
    import synestra_cli.explain.job as job

    monkeypatch.setattr(job, "explain_job", lambda *_a, **_k: pytest.fail("the kept explanation was not reused"))
    doc = json.loads(_explain(sample_db, "--job", "1001", "--format", "json"))
    assert doc["job"] == "1001" and doc["checkpoints"]


def test_a_view_of_one_checkpoint_or_a_window_is_computed_not_kept(sample_db, monkeypatch):
    with open_store(sample_db) as c:
        c.execute("DELETE FROM explanations")
    _explain(sample_db, "--job", "1003", "--checkpoint", "1802", "--format", "json")
    _explain(sample_db, "--job", "1003", "--since", "2026-11-02T12:00:00Z", "--format", "json")
    _explain(sample_db, "--job", "1003", "--tax", "--format", "json")
    with open_store(sample_db, read_only=True) as c:
        assert c.execute("SELECT count(*) FROM explanations").fetchone() == (0,)


def test_synestra_kept_0_neither_reads_nor_keeps(sample_db):
    with open_store(sample_db) as c:
        c.execute("DELETE FROM explanations")
    _explain(sample_db, "--all", "--format", "jsonl", kept=False)
    with open_store(sample_db, read_only=True) as c:
        assert c.execute("SELECT count(*) FROM explanations").fetchone() == (0,)
