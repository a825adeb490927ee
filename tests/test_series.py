"""The series layout (migration 023, store/series.py, store/series_migration.py): the same answers as the
layout before it, byte for byte; an older store migrated equals a fresh ingest; a migration killed
anywhere leaves a store that opens and finishes migrating."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import simcache
from click.testing import CliRunner
from conftest import LEGACY_SCHEMA

from synestra_cli.cli.main import cli
from synestra_cli.store import open_store
from synestra_cli.store.series import has_series_layout

pytestmark = pytest.mark.heavy  # simulated campaigns, their stores and a child process per migration

CAMPAIGN = {"seed": 41, "nodes": 4, "hours": 12}
# Every sample with its file instead of its source id, its series' names from the dictionary beside its own.
ROWS_SQL = """
SELECT s.path, m.ts, m.host, m.entity, m.metric, m.value FROM metrics m JOIN sources s USING (source_id)
ORDER BY ALL
"""
NAMED_SQL = """
SELECT count(*) FILTER (WHERE m.series_id IS NULL),
       count(*) FILTER (WHERE NOT (d.host IS NOT DISTINCT FROM m.host AND d.entity IS NOT DISTINCT FROM m.entity
                                  AND d.metric = m.metric))
FROM metrics m LEFT JOIN series d USING (series_id)
"""
# Rows of one source that go backwards in (series_id, ts) as they are stored: none, each batch is in order.
DISORDER_SQL = """
SELECT count(*) FROM (
    SELECT source_id, series_id, ts, lag(series_id) OVER w AS p_series, lag(ts) OVER w AS p_ts
    FROM metrics WINDOW w AS (PARTITION BY source_id ORDER BY rowid))
WHERE series_id < p_series OR (series_id = p_series AND ts < p_ts)
"""


@pytest.fixture(scope="module")
def sim() -> Path:
    return simcache.simulation("campaign", **CAMPAIGN)


@pytest.fixture(scope="module")
def stores(sim, tmp_path_factory) -> dict[str, Path]:
    """The campaign ingested into the series layout, into the layout before it, and that older store
    migrated: copies of their own (the reports keep explanations in them)."""
    folder = tmp_path_factory.mktemp("series")
    out = {
        "series": simcache.store_copy(simcache.ingested(sim), folder, "series.duckdb"),
        "legacy": simcache.store_copy(simcache.ingested(sim, upto=LEGACY_SCHEMA), folder, "legacy.duckdb"),
    }
    out["migrated"] = simcache.store_copy(out["legacy"], folder, "migrated.duckdb")
    with open_store(out["migrated"]):  # a writable open migrates it
        pass
    return out


def _answers(db: Path) -> dict[str, str]:
    runner = CliRunner()
    env = {"SYNESTRA_KEPT": "0", "SYNESTRA_WORKERS": "2"}
    out = {}
    for name, args in {
        "explain": ["explain", "--all"],
        "tax-report": ["tax-report", "--all"],
        "fleet": ["fleet"],
        "risks": ["risks"],
    }.items():
        result = runner.invoke(cli, [*args, "--db", str(db), "--format", "json"], env=env)
        assert result.exit_code == 0, (name, result.output)
        out[name] = result.stdout
    return out


def test_the_series_layout_answers_byte_for_byte_as_the_layout_before_it(stores):
    with open_store(stores["legacy"], read_only=True) as conn:
        assert not has_series_layout(conn)  # read as an older Synestra left it
    with open_store(stores["series"], read_only=True) as conn:
        assert has_series_layout(conn) and conn.execute(NAMED_SQL).fetchone() == (0, 0)
        assert conn.execute(DISORDER_SQL).fetchone() == (0,)
    legacy, series = _answers(stores["legacy"]), _answers(stores["series"])
    assert series == legacy
    explained = json.loads(series["explain"])
    docs = explained if isinstance(explained, list) else explained.get("jobs", [])
    assert len(docs) >= 4 and any(c["cause"] for d in docs for c in d["checkpoints"])  # not vacuous
    assert json.loads(series["fleet"])["components"]


def test_an_older_store_migrated_equals_a_fresh_ingest(stores):
    with open_store(stores["migrated"], read_only=True) as a, open_store(stores["series"], read_only=True) as b:
        assert has_series_layout(a)
        assert a.execute(NAMED_SQL).fetchone() == (0, 0)
        assert a.execute(DISORDER_SQL).fetchone() == (0,)
        assert a.execute(ROWS_SQL).fetchall() == b.execute(ROWS_SQL).fetchall()
        names = "SELECT host, entity, metric FROM series ORDER BY ALL"
        assert a.execute(names).fetchall() == b.execute(names).fetchall()
        assert a.execute("SELECT count(*), count(DISTINCT series_id) FROM series").fetchone()[0] == len(
            a.execute(names).fetchall()
        )
        left = "SELECT count(*) FROM duckdb_tables() WHERE starts_with(table_name, '_') AND table_name <> '_migrations'"
        assert a.execute(left).fetchone() == (0,)  # the migration's own tables are gone
    assert _answers(stores["migrated"]) == _answers(stores["series"])


# A child that migrates the store, killed with SIGKILL at a chosen point: in the transaction of its third
# group of sources (after two committed), or in the last transaction, after the old table was dropped.
KILLED_CHILD = """
import os, signal, sys
from synestra_cli.store import series_migration as sm
from synestra_cli.store.connect import connect
sm.GROUP_ROWS = 20_000
where, groups = sys.argv[2], []
copy, has_table = sm._copy, sm.has_table
def killing_copy(conn, ids):
    copy(conn, ids)
    groups.append(ids)
    if where == "group" and len(groups) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
def killing_has_table(conn, name):
    if where == "swap" and name == "metric_summaries":
        os.kill(os.getpid(), signal.SIGKILL)
    return has_table(conn, name)
sm._copy, sm.has_table = killing_copy, killing_has_table
connect(sys.argv[1])
"""


@pytest.mark.parametrize("where", ["group", "swap"])
def test_a_migration_killed_anywhere_leaves_a_store_that_opens_and_finishes_migrating(stores, tmp_path, where):
    db = simcache.store_copy(stores["legacy"], tmp_path, "killed.duckdb")
    child = subprocess.run([sys.executable, "-c", KILLED_CHILD, str(db), where], capture_output=True, text=True)
    assert child.returncode == -signal.SIGKILL, child.stderr
    with open_store(db, read_only=True) as conn:  # opens, whole: read as it was, the old table intact
        assert not has_series_layout(conn)
        done = conn.execute("SELECT count(*) FROM _series_migrated").fetchone()[0]
        assert (done > 0) if where == "group" else True
        with duckdb.connect(str(stores["legacy"]), read_only=True) as before:
            assert conn.execute(ROWS_SQL).fetchall() == before.execute(ROWS_SQL).fetchall()
    with open_store(db):  # the next writable open goes on from where it stopped
        pass
    with open_store(db, read_only=True) as a, open_store(stores["series"], read_only=True) as b:
        assert has_series_layout(a) and a.execute(NAMED_SQL).fetchone() == (0, 0)
        assert a.execute(DISORDER_SQL).fetchone() == (0,)
        assert a.execute(ROWS_SQL).fetchall() == b.execute(ROWS_SQL).fetchall()
    assert _answers(db)["explain"] == _answers(stores["series"])["explain"]


def test_the_migration_s_progress_is_told_to_whoever_listens(stores, tmp_path, monkeypatch):
    from synestra_cli import progress
    from synestra_cli.store import series_migration as sm

    db = simcache.store_copy(stores["legacy"], tmp_path, "heard.duckdb")
    monkeypatch.setattr(sm, "GROUP_ROWS", 50_000)
    heard: list[tuple[str, int, int]] = []
    with progress.listening(lambda *p: heard.append(p)), open_store(db):
        pass
    assert heard and heard[0][1] == 0 and heard[-1][1] == heard[-1][2] > 2
    assert all(what == sm.WHAT for what, _, _ in heard)
    os.remove(db)


def test_an_older_store_keeps_its_layout_until_compact_or_ingest_migrates_it(stores, sim, tmp_path):
    """The branch's choice (docs/data-model.md, "Existing stores migrate once"): a report that keeps its
    explanations writes into an older store without rewriting its samples; `compact` or `ingest` does."""
    runner = CliRunner()
    for how in ("compact", "ingest"):
        db = simcache.store_copy(stores["legacy"], tmp_path, f"{how}.duckdb")
        kept = runner.invoke(cli, ["tax-report", "--all", "--db", str(db), "--format", "json"])
        assert kept.exit_code == 0, kept.output
        with open_store(db, read_only=True) as conn:
            assert conn.execute("SELECT count(*) FROM explanations").fetchone()[0] > 0  # it wrote its rows
            assert not has_series_layout(conn)  # and left the samples as they were
        if how == "compact":
            done = runner.invoke(cli, ["compact", "--db", str(db), "--format", "json"])
            assert done.exit_code == 0, done.output
            assert "024_series" in json.loads(done.stdout)["migrated"]
        else:  # a file the store already holds: skipped, but the store is migrated before it
            done = runner.invoke(cli, ["ingest", str(sim / "exports" / "sacct.txt"), "--db", str(db)])
            assert done.exit_code == 0, done.output
        with open_store(db, read_only=True) as a, open_store(stores["series"], read_only=True) as b:
            assert has_series_layout(a)
            assert a.execute(ROWS_SQL).fetchall() == b.execute(ROWS_SQL).fetchall()
        assert kept.stdout == runner.invoke(cli, ["tax-report", "--all", "--db", str(db), "--format", "json"]).stdout
