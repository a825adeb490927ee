"""The ingest orchestrator: transactions, de-duplication and every kind of bad file.

These tests use a tiny stand-in format (one event per line) so that they exercise the orchestrator's
guarantees independently of any real parser.
"""

from __future__ import annotations

import dataclasses
import gzip
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from synestra_cli import formats
from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode
from synestra_cli.formats.base import Format, IngestOptions, LoadResult
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.store import open_store

LOAD_LINES_SQL = """
INSERT INTO events (ts, host, kind, message, source_id, line)
SELECT TIMESTAMP '2026-11-29 00:00:00' + to_seconds(lineno), 'h1', 'log', line, $sid, lineno
FROM batch WHERE line <> ''
"""


def _load_lines(ctx) -> LoadResult:
    result = LoadResult()
    for batch in ctx.line_batches(batch_bytes=64):  # tiny batches: exercise the carry-over
        ctx.conn.register("batch", batch)
        ctx.conn.execute(LOAD_LINES_SQL, {"sid": ctx.source_id})
        result.rows += ctx.conn.execute("SELECT count(*) FROM batch WHERE line <> ''").fetchall()[0][0]
        bad = ctx.conn.execute("SELECT min(lineno), count(*) FROM batch WHERE line LIKE 'BAD%'").fetchall()[0]
        ctx.conn.unregister("batch")
        for _ in range(bad[1]):
            result.reject(bad[0], "bad line", "BAD")
    if "EXPLODE" in ctx.read_text():
        raise RuntimeError("parser bug halfway through")
    return result


LINES = Format(
    "lines",
    "test: one event per line",
    sniff=lambda head: 1.0 if head.startswith("line") else 0.0,
    load=_load_lines,
    writes=frozenset({"events"}),
    priority=0,
)


@pytest.fixture(autouse=True)
def only_the_test_format(monkeypatch):
    monkeypatch.setattr(formats, "all_formats", lambda: {"lines": LINES})


def _events(db) -> int:
    with open_store(db) as c:
        return c.execute("SELECT count(*) FROM events").fetchone()[0]


def test_a_file_loads_with_line_numbers_and_its_source_row(tmp_path, db_path):
    f = tmp_path / "a.log"
    f.write_text("line one\nline two\r\nline three")
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions())
        rows = c.execute("SELECT line, message FROM events ORDER BY line").fetchall()
        src = c.execute("SELECT format, rows, hosts, first_ts, last_ts FROM sources").fetchone()
    assert report.status == "loaded" and report.rows == 3
    assert rows == [(1, "line one"), (2, "line two"), (3, "line three")]
    assert src[0] == "lines" and src[1] == 3 and src[2] == ["h1"]
    assert str(src[3]) == "2026-11-29 00:00:01" and str(src[4]) == "2026-11-29 00:00:03"


def test_ingesting_the_same_file_twice_adds_nothing(tmp_path, db_path):
    f = tmp_path / "a.log"
    f.write_text("line one\n")
    with open_store(db_path) as c:
        first = ingest_file(c, f, IngestOptions())
        second = ingest_file(c, f, IngestOptions())
    assert (first.status, second.status) == ("loaded", "skipped")
    assert "already in the store" in second.error
    assert _events(db_path) == 1


def test_a_failure_midway_leaves_the_store_exactly_as_it_was(tmp_path, db_path):
    good, bad = tmp_path / "good.log", tmp_path / "bad.log"
    good.write_text("line ok\n")
    bad.write_text("line 1\n" * 100 + "EXPLODE\n")
    with open_store(db_path) as c:
        ingest_file(c, good, IngestOptions())
        report = ingest_file(c, bad, IngestOptions())  # a parser bug is this file's failure, not a crash
        assert report.status == "failed" and "RuntimeError: parser bug halfway through" in report.error
        assert c.execute("SELECT count(*) FROM events").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM sources").fetchone()[0] == 1


def test_strict_turns_a_reject_into_a_failed_file_and_writes_nothing(tmp_path, db_path):
    f = tmp_path / "a.log"
    f.write_text("line fine\nBAD one\n")
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions(strict=True))
    assert report.status == "failed" and ":2: bad line" in report.error
    assert _events(db_path) == 0


# Lines that do not compress to nothing, so that cutting the gzip really truncates it.
NOISY_LINES = "".join(f"line {i * 7919 % 10007}\n" for i in range(5000)).encode()


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.log", b"", "empty file"),
        ("blank.log", b"\n\n  \n", "empty file"),
        ("binary.bin", bytes(range(256)) * 10, "binary file"),
        ("truncated.log.gz", gzip.compress(NOISY_LINES)[:4000], "truncated or corrupt gzip"),
        ("unknown.txt", b"something nobody exports\n", "unknown format"),
    ],
)
def test_bad_files_get_one_line_naming_them_and_the_others_still_load(tmp_path, db_path, name, content, message):
    bad = tmp_path / name
    bad.write_bytes(content)
    good = tmp_path / "z_good.log"
    good.write_text("line good\n")
    with open_store(db_path) as c:
        reports = ingest_paths(c, [bad, good], IngestOptions())
    assert reports[0].status == "failed" and message in reports[0].error and name in reports[0].error
    assert reports[1].status == "loaded"


def test_gzip_is_read_transparently_and_invalid_utf8_is_kept(tmp_path, db_path):
    f = tmp_path / "a.log.gz"
    f.write_bytes(gzip.compress(b"line caf\xe9\nline two\n"))
    with open_store(db_path) as c:
        ingest_file(c, f, IngestOptions())
        msgs = [r[0] for r in c.execute("SELECT message FROM events ORDER BY line").fetchall()]
    assert msgs == ["line caf\ufffd", "line two"]


@pytest.mark.heavy
def test_a_one_megabyte_line_is_loaded_whole(tmp_path, db_path):
    f = tmp_path / "long.log"
    f.write_text("line " + "x" * 1_000_000 + "\nline short\n")
    with open_store(db_path) as c:
        ingest_file(c, f, IngestOptions())
        lengths = c.execute("SELECT length(message) FROM events ORDER BY line").fetchall()
    assert lengths == [(1_000_005,), (10,)]


def test_folders_are_walked_recursively_and_hidden_files_skipped(tmp_path, db_path):
    (tmp_path / "d" / "sub").mkdir(parents=True)
    (tmp_path / "d" / "a.log").write_text("line a\n")
    (tmp_path / "d" / "sub" / "b.log").write_text("line b\n")
    (tmp_path / "d" / ".hidden").write_text("line h\n")
    with open_store(db_path) as c:
        reports = ingest_paths(c, [tmp_path / "d"], IngestOptions())
    assert [Path(r.path).name for r in reports] == ["a.log", "b.log"]


def test_cli_ingest_reports_on_stderr_and_exits_3_when_a_file_fails(tmp_path):
    quoted = tmp_path / 'it\'s "quoted".log'
    quoted.write_text("line q\n")
    empty = tmp_path / "empty.log"
    empty.write_text("")
    result = CliRunner().invoke(cli, ["ingest", str(quoted), str(empty)])
    assert result.exit_code == ExitCode.INPUT
    assert result.stdout == ""
    assert "lines, 1 row, 0 rejected" in result.stderr
    assert "empty file" in result.stderr
    assert "1 loaded, 0 skipped, 1 failed" in result.stderr


def test_cli_ingest_json_report_goes_to_stdout(tmp_path):
    import json

    f = tmp_path / "a.log"
    f.write_text("line a\n")
    result = CliRunner().invoke(cli, ["ingest", str(f), "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0
    assert doc["schema"] == "synestra.ingest/1"
    assert doc["files"][0]["rows"] == 1 and doc["files"][0]["format"] == "lines"


@pytest.mark.heavy
def test_cli_sources_and_sql_read_the_store(tmp_path):
    import json

    f = tmp_path / "a.log"
    f.write_text("line a\nline b\n")
    runner = CliRunner()
    runner.invoke(cli, ["ingest", str(f)])
    sources = json.loads(runner.invoke(cli, ["sources", "--format", "json"]).stdout)["sources"]
    assert sources[0]["rows"] == 2 and sources[0]["format"] == "lines"
    out = runner.invoke(cli, ["sql", "SELECT count(*) AS n FROM events", "--format", "csv"])
    assert out.stdout == "n\n2\n"


def test_cli_sql_refuses_writes_and_reports_the_error(tmp_path):
    f = tmp_path / "a.log"
    f.write_text("line a\n")
    runner = CliRunner()
    runner.invoke(cli, ["ingest", str(f)])
    result = runner.invoke(cli, ["sql", "DELETE FROM events"])
    assert result.exit_code == ExitCode.QUERY
    assert "read-only" in result.stderr.lower()
    assert result.stdout == ""


def test_cli_on_an_empty_store_exits_6(tmp_path):
    result = CliRunner().invoke(cli, ["sources", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == ExitCode.EMPTY_STORE
    assert "synestra ingest" in result.stderr


def test_a_gzip_header_mtime_dates_the_content_even_after_a_checkout_resets_the_file(tmp_path):
    import os
    from datetime import datetime

    from synestra_cli.formats.reading import content_mtime

    f = tmp_path / "old.log.gz"
    with open(f, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=1_700_000_000) as gz:
        gz.write(b"line a\n")
    os.utime(f, (2_000_000_000, 2_000_000_000))  # what a fresh clone would do
    assert content_mtime(f) == datetime(2023, 11, 14, 22, 13, 20)
    plain = tmp_path / "plain.log"
    plain.write_text("line a\n")
    os.utime(plain, (2_000_000_000, 2_000_000_000))
    assert content_mtime(plain) == datetime(2033, 5, 18, 3, 33, 20)


def _lines_and_a_shared_catalog_row(ctx) -> LoadResult:
    """Like LINES, and every file adds the same catalog row, slowly: concurrent files must collide."""
    result = _load_lines(ctx)
    ctx.conn.execute(
        "INSERT INTO metric_catalog VALUES ('common', 'x', 'gauge', 'every file adds me') ON CONFLICT DO NOTHING"
    )
    time.sleep(0.05)  # hold the transaction open while another worker writes the same row
    return result


def _files(tmp_path, n: int) -> list[Path]:
    out = []
    for i in range(n):
        f = tmp_path / "in" / f"f{i:02d}.log"
        f.parent.mkdir(exist_ok=True)
        f.write_text(f"line {i} a\nline {i} b\n")
        out.append(f)
    return out


def test_files_load_in_parallel_as_they_would_one_at_a_time(tmp_path):
    files = _files(tmp_path, 8)
    (tmp_path / "in" / "f08.log").write_text(files[3].read_text())  # same content as f03
    seen = {}
    for workers in (1, 3):
        db = tmp_path / f"w{workers}.duckdb"
        with open_store(db) as c:
            reports = ingest_paths(c, [tmp_path / "in"], IngestOptions(), workers=workers)
            sources = c.execute("SELECT source_id, path, rows FROM sources ORDER BY source_id").fetchall()
            events = c.execute(
                "SELECT s.path, e.line, e.message FROM events e JOIN sources s USING (source_id) ORDER BY ALL"
            ).fetchall()
        assert [r.path for r in reports] == [str(tmp_path / "in" / f"f{i:02d}.log") for i in range(9)]
        assert sorted(r.status for r in reports) == ["loaded"] * 8 + ["skipped"]  # the copy loads once
        # ids follow the order files were given in, whichever finished first
        assert [p for _, p, _ in sources] == sorted(p for _, p, _ in sources)
        seen[workers] = ([(p, n) for _, p, n in sources], events)
    assert seen[1] == seen[3]


def test_concurrent_files_that_write_the_same_row_are_retried_not_failed(tmp_path, db_path, monkeypatch):
    slow = dataclasses.replace(LINES, load=_lines_and_a_shared_catalog_row)
    monkeypatch.setattr(formats, "all_formats", lambda: {"lines": slow})
    _files(tmp_path, 6)
    with open_store(db_path) as c:
        reports = ingest_paths(c, [tmp_path / "in"], IngestOptions(), workers=3)
        assert c.execute("SELECT count(*) FROM metric_catalog WHERE metric = 'common'").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM events").fetchone()[0] == 12
    assert [r.status for r in reports] == ["loaded"] * 6, [r.error for r in reports]
