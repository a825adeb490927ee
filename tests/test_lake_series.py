"""The series layout in the Parquet lake (issue 32 item 5): parts in (series_id, ts) order with the lake's
series ids, a dictionary of parts (`series`, kept like the metric catalog), the candidates read by id; a
lake with a part written before the layout is read the old way; the workers of a distributed ingest
number new series in blocks of their own. Every way, the same answers as a store file."""

from __future__ import annotations

import glob
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from synestra_cli.cli.main import cli
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.store.connect import connect
from synestra_cli.store.lake_writer import SERIES_BLOCK, LakeWriter, ingest_target
from synestra_cli.store.series import has_series_layout

pytestmark = pytest.mark.heavy  # sample_data ingested into a lake, a store file and a two-worker lake

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"
DISORDER_SQL = """
SELECT count(*) FROM (
    SELECT series_id, ts, lag(series_id) OVER w AS ps, lag(ts) OVER w AS pt
    FROM read_parquet(?, file_row_number = true) WINDOW w AS (PARTITION BY filename ORDER BY file_row_number))
WHERE series_id < ps OR (series_id = ps AND ts < pt)
"""


def _answers(db: str) -> dict[str, str]:
    runner, out = CliRunner(), {}
    for args in (["tax-report", "--all"], ["explain", "--job", "1003"], ["fleet"]):
        result = runner.invoke(cli, [*args, "--db", db, "--format", "json"], env={"SYNESTRA_KEPT": "0"})
        assert result.exit_code == 0, result.output
        out[args[0]] = result.stdout
    return out


@pytest.fixture(scope="module")
def written(tmp_path_factory, sample_store_template) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("lake-series")
    lake = f"{folder / 'lake'}/"
    with ingest_target(lake, None) as (conn, on_report):
        ingest_paths(conn, [SAMPLE], IngestOptions(), on_report=on_report)
    return {"lake": lake, "store": str(sample_store_template), "folder": str(folder)}


def test_a_lake_s_parts_are_in_series_order_with_the_lake_s_ids(written):
    parts = sorted(glob.glob(f"{written['lake']}metrics/*/*/*.parquet"))
    assert parts
    with duckdb.connect() as c:
        assert c.execute(DISORDER_SQL, [parts]).fetchone() == (0,)
    reader = connect(written["lake"], read_only=True)
    try:
        assert has_series_layout(reader)
        named = reader.execute(
            "SELECT count(*) FILTER (WHERE d.series_id IS NULL), count(DISTINCT m.series_id) FROM metrics m "
            "LEFT JOIN series d ON d.series_id = m.series_id AND d.host IS NOT DISTINCT FROM m.host "
            "AND d.entity IS NOT DISTINCT FROM m.entity AND d.metric = m.metric"
        ).fetchone()
        assert named[0] == 0 and named[1] > 100  # every sample's id names its own series
    finally:
        reader.close()
    assert _answers(written["lake"]) == _answers(written["store"])


def test_a_lake_with_a_part_written_before_the_series_layout_is_read_the_old_way(written, tmp_path):
    import shutil

    lake = tmp_path / "old"
    shutil.copytree(written["lake"].rstrip("/"), lake)
    part = sorted(glob.glob(f"{lake}/metrics/*/*/*.parquet"))[0]
    with duckdb.connect() as c:  # the part as a lake before migration 023 wrote it: no series_id column
        c.execute(f"COPY (SELECT * EXCLUDE (series_id) FROM read_parquet('{part}')) TO '{part}.tmp' (FORMAT parquet)")
    Path(f"{part}.tmp").replace(part)
    _record_rewrite(lake, Path(part))
    reader = connect(f"{lake}/", read_only=True)
    try:
        assert not has_series_layout(reader)
    finally:
        reader.close()
    assert _answers(f"{lake}/") == _answers(written["store"])


def test_the_workers_of_a_distributed_ingest_number_new_series_in_blocks_of_their_own(written, tmp_path):
    """As engine/ray_engine.py runs them, without Ray: the driver holds the lake and writes the entries
    in file order; each worker stages its files with its own block of ids for the series it meets first."""
    lake = f"{tmp_path / 'two'}/"
    files = sorted(p for p in SAMPLE.rglob("*") if p.is_file())
    driver = LakeWriter(lake)
    try:
        ids = driver.reserve_ids(len(files))
        workers = [LakeWriter(lake, task=True, worker=k) for k in range(2)]
        try:
            for i, (path, sid) in enumerate(zip(files, ids, strict=True)):
                w = workers[i % 2]
                entry = w.stage(ingest_file(w.conn, path, IngestOptions(), sid))
                if entry is not None:
                    driver.write_entry(entry)
        finally:
            for w in workers:
                w.close()
    finally:
        driver.close()
    reader = connect(lake, read_only=True)
    try:
        assert has_series_layout(reader)
        ids_of = reader.execute("SELECT series_id FROM series").fetchall()
        assert len(ids_of) == len(set(ids_of))  # no id names two series
        blocks = {i // SERIES_BLOCK for (i,) in ids_of}
        assert blocks == {0, 1}  # both workers met series first, each numbered them in its block
    finally:
        reader.close()
    assert _answers(lake) == _answers(written["store"])


def _record_rewrite(lake: Path, part: Path) -> None:
    """The rewritten part's size and sha256 in its manifest entry, as the lake's writer records a part
    (a part that differs from its entry is refused: issue 38 defect 8)."""
    import hashlib
    import json

    name = part.relative_to(lake).as_posix()
    for manifest in lake.glob("_manifest/*.json"):
        doc = json.loads(manifest.read_text())
        for entry in doc.get("entries", [doc]):
            for p in entry["parts"]:
                if p["path"] == name:
                    p["bytes"] = part.stat().st_size
                    p["sha256"] = hashlib.sha256(part.read_bytes()).hexdigest()
        manifest.write_text(json.dumps(doc))
