"""Broken and hostile input (issue 18, the ingest and store side): no crash, no silent loss, no stale rows.

One test (or one parametrized family) per item of the issue; each failed on the code before it. Inputs
are real formats: the real samples under tests/data with one line broken, or a few lines in the format
the tools emit (RFC 3164 syslog, `dmesg`, `sacct -P`, promtool's dump, Prometheus's query API answer).
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from conftest import REAL_SAMPLES

from synestra_cli.cli.main import cli
from synestra_cli.errors import ExitCode, StoreError
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.store import open_store

SYSLOG = "".join(f"Nov 29 10:00:{i:02d} gpu-017 kernel: line {i}\n" for i in range(1, 4))
MORE_SYSLOG = "".join(f"Nov 29 10:01:{i:02d} gpu-017 kernel: later {i}\n" for i in range(1, 3))
DMESG = "[    5.123456] NVRM: Xid (PCI:0000:9b:00): 79, pid=1234, GPU has fallen off the bus.\n"
SACCT_HEADER = "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES\n"
SACCT_ROW = (
    "{job}|train|ana|COMPLETED|0:0|2026-11-29T10:00:00|2026-11-29T11:00:00|{elapsed}|gpu-[001-002]|"
    "billing=16,cpu=16,gres/gpu=16,node=2\n"
)


def _count(c, sql: str, params=None) -> int:
    return c.execute(sql, params or []).fetchone()[0]


def _syslog_events(c) -> list[tuple[int, str]]:
    return c.execute("SELECT line, message FROM events ORDER BY source_id, line").fetchall()


# --- item 2: a grown file adds only its new lines; a changed one replaces the old source ---------------


def test_2_a_grown_syslog_adds_only_its_new_lines_numbered_after_the_old_ones(tmp_path, db_path):
    f = tmp_path / "messages"
    f.write_text(SYSLOG)
    with open_store(db_path) as c:
        first = ingest_file(c, f, IngestOptions(year=2026))
        f.write_text(SYSLOG + MORE_SYSLOG)  # the same file, two lines later
        grown = ingest_file(c, f, IngestOptions(year=2026))
        events = _syslog_events(c)
        offsets = c.execute("SELECT offset_bytes, first_line FROM sources ORDER BY source_id").fetchall()
    assert (first.rows, grown.status, grown.rows) == (3, "loaded", 2)
    assert [line for line, _ in events] == [1, 2, 3, 4, 5]  # 5 events, not 3 + 5
    assert events[3][1].endswith("later 1")
    assert offsets == [(0, 1), (len(SYSLOG), 4)]
    assert any("only its new lines" in n for n in grown.notes)


def test_2_a_grown_sacct_export_is_read_again_and_replaces_the_old_one(tmp_path, db_path):
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT_HEADER + SACCT_ROW.format(job=1001, elapsed="01:00:00"))
    with open_store(db_path) as c:
        ingest_file(c, f, IngestOptions())
        f.write_text(f.read_text() + SACCT_ROW.format(job=1002, elapsed="01:00:00"))
        report = ingest_file(c, f, IngestOptions())
        jobs = c.execute("SELECT job_id FROM jobs ORDER BY job_id").fetchall()
        n_sources = _count(c, "SELECT count(*) FROM sources")
    assert report.status == "loaded" and report.replaced == [1]
    assert jobs == [("1001",), ("1002",)] and n_sources == 1  # job 1001 once, not twice


def test_2_changed_content_under_the_same_path_replaces_the_old_source_and_its_rows(tmp_path, db_path):
    f = tmp_path / "messages"
    f.write_text(SYSLOG)
    with open_store(db_path) as c:
        ingest_file(c, f, IngestOptions(year=2026))
        f.write_text(MORE_SYSLOG)  # rotated: new content, same name
        report = ingest_file(c, f, IngestOptions(year=2026))
        events = _syslog_events(c)
        sources = c.execute("SELECT source_id, rows FROM sources").fetchall()
    assert report.replaced == [1] and sources == [(2, 2)]
    assert [m.split(": ")[-1] for _, m in events] == ["later 1", "later 2"]


def test_2_a_replacement_that_fails_leaves_the_old_source_as_it_was(tmp_path, db_path):
    f = tmp_path / "sacct.txt"
    f.write_text(SACCT_HEADER + SACCT_ROW.format(job=1001, elapsed="01:00:00"))
    with open_store(db_path) as c:
        ingest_file(c, f, IngestOptions())
        f.write_text(SACCT_HEADER + "garbage|row\n")  # every line rejected: the new load fails
        report = ingest_file(c, f, IngestOptions())
        jobs = c.execute("SELECT job_id FROM jobs").fetchall()
    assert report.status == "failed" and "all 1 line(s) rejected" in report.error
    assert jobs == [("1001",)]  # the delete of the old source rolled back with the failed load


# --- item 3b: duplicate samples are rejected as Prometheus does ------------------------------------------


def test_3b_a_duplicate_sample_with_another_value_is_rejected_and_reported(tmp_path, db_path):
    f = tmp_path / "dump.txt"  # promtool tsdb dump lines: {labels} value timestamp_ms
    f.write_text(
        '{__name__="DCGM_FI_DEV_GPU_TEMP", Hostname="gpu-017", gpu="0"} 61 1764410400000\n'
        '{__name__="DCGM_FI_DEV_GPU_TEMP", Hostname="gpu-017", gpu="0"} 90 1764410400000\n'
        '{__name__="DCGM_FI_DEV_GPU_TEMP", Hostname="gpu-017", gpu="0"} 61 1764410415000\n'
        '{__name__="DCGM_FI_DEV_GPU_TEMP", Hostname="gpu-017", gpu="0"} 61 1764410415000\n'
    )
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions())
        values = c.execute("SELECT epoch(ts)::BIGINT, value FROM metrics ORDER BY ts").fetchall()
        stored_rejects = _count(c, "SELECT count(*) FROM rejects WHERE reason LIKE 'duplicate sample%'")
    assert report.status == "loaded", report.error
    assert values == [(1764410400, 61.0), (1764410415, 61.0)]  # the first kept, as Prometheus does
    assert report.rejected == 1 and stored_rejects == 1
    assert any("kept the first, 61.0; rejected 90.0" in r[1] for r in report.reject_samples)
    assert any("repeated sample" in n for n in report.notes)


# --- item 4: every exception inside one file's load is that file's failure; bad times never stay --------


def _gnmi_nested(depth: int) -> str:
    event = json.loads((REAL_SAMPLES / "fabric" / "gh-gnmic-613_event-format_psu.json").read_text())[0]
    text = json.dumps(event)
    key = '"/openconfig-platform:components/component/power-supply/state/input-current": '
    return text.replace(key + "0.3", key + "[" * depth + "]" * depth)


HOSTILE = {
    # Prometheus HTTP API answer with a null series (seen when a proxy drops a result)
    "prom_null.json": '{"status":"success","data":{"resultType":"matrix","result":[null]}}',
    "gnmi_deep.json": _gnmi_nested(200_000),
    # promtool dump: a millisecond stamp before year 1
    "prom_ms.txt": '{__name__="DCGM_FI_DEV_GPU_TEMP", Hostname="gpu-017", gpu="0"} 61 -62135596800001\n',
    "rfc3339_year0.log": "0000-11-29T10:00:00.000000+00:00 gpu-017 kernel: NVRM: Xid (PCI:0000:9b:00): 79\n",
    "metrics_negative_epoch.csv": "timestamp,host,entity,metric,value\n-99999999999,gpu-017,gpu0,gpu_temp_celsius,61\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_4_one_hostile_file_fails_alone_and_leaves_no_row_before_year_1(tmp_path, db_path, name):
    bad = tmp_path / name
    bad.write_text(HOSTILE[name])
    good = tmp_path / "z_good.log"
    good.write_text(SYSLOG)
    with open_store(db_path) as c:
        reports = ingest_paths(c, [bad, good], IngestOptions(year=2026))
        out_of_range = sum(
            _count(c, f"SELECT count(*) FROM {t} WHERE ts < TIMESTAMP '0001-01-01'") for t in ("events", "metrics")
        )
    assert reports[1].status == "loaded"  # the rest go on
    assert reports[0].status == "failed" or reports[0].rejected, reports[0]
    assert reports[0].error or reports[0].reject_samples
    assert out_of_range == 0


def test_4_year_minus_5_is_rejected_before_commit(tmp_path, db_path):
    f = tmp_path / "messages"
    f.write_text(SYSLOG)
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions(year=-5))
        assert _count(c, "SELECT count(*) FROM events") == 0
        assert _count(c, "SELECT count(*) FROM sources") == 0
    assert report.status == "failed" and "outside years 1-9999" in report.error


def test_4_the_cli_reports_a_hostile_file_in_one_line_and_exits_3(tmp_path):
    bad = tmp_path / "prom_null.json"
    bad.write_text(HOSTILE["prom_null.json"])
    result = CliRunner().invoke(cli, ["ingest", str(bad)])
    assert result.exit_code == ExitCode.INPUT
    assert "Traceback" not in result.stderr
    assert "prom_null.json: 1 result(s) of the answer are not series objects" in result.stderr


def test_an_answer_that_matched_no_series_loads_as_nothing(tmp_path):
    """`"result": []` is what Prometheus answers a query that matched nothing: no rows, not a failure."""
    empty = tmp_path / "prom_empty.json"
    empty.write_text('{"status":"success","data":{"resultType":"matrix","result":[]}}')
    result = CliRunner().invoke(cli, ["ingest", str(empty)])
    assert result.exit_code == 0, result.stderr
    assert "prom_empty.json: prom_api_json, 0 rows, 0 rejected" in result.stderr


# --- item 5: nothing skipped silently ---------------------------------------------------------------------


def test_5_a_symlinked_folder_is_followed_once_even_through_a_loop(tmp_path, db_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    (real / "messages").write_text(SYSLOG)
    top = tmp_path / "export"
    top.mkdir()
    (top / "node").symlink_to(real, target_is_directory=True)
    (real / "loop").symlink_to(top, target_is_directory=True)  # export/node/loop -> export
    with open_store(db_path) as c:
        reports = ingest_paths(c, [top], IngestOptions(year=2026))
    assert [(Path(r.path).name, r.status) for r in reports] == [("messages", "loaded")]


def test_5_an_unreadable_sub_folder_is_reported_and_the_rest_loads(tmp_path, db_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "messages").write_text(SYSLOG)
    locked = tmp_path / "b"
    locked.mkdir()
    (locked / "messages").write_text(MORE_SYSLOG)
    real_scandir = os.scandir

    def scandir(path="."):  # as chmod 000 does for a user other than root (tests may run as root)
        if Path(path) == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    with open_store(db_path) as c:
        reports = ingest_paths(c, [tmp_path], IngestOptions(year=2026))
    by_status = {r.status: r for r in reports}
    assert by_status["loaded"].path.endswith("a/messages")
    assert "folder cannot be read (Permission denied)" in by_status["failed"].error
    assert str(locked) in by_status["failed"].error


def test_5_an_unreadable_file_on_the_command_line_fails_alone_with_exit_3(tmp_path, monkeypatch):
    locked, good = tmp_path / "locked.log", tmp_path / "good.log"
    locked.write_text(SYSLOG)
    good.write_text(MORE_SYSLOG)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: Path(p) != locked and real_access(p, mode, **kw))
    result = CliRunner().invoke(cli, ["ingest", str(locked), str(good), "--year", "2026"])
    assert result.exit_code == ExitCode.INPUT, result.output
    assert "locked.log: permission denied" in result.stderr
    assert "1 loaded, 0 skipped, 1 failed" in result.stderr


@pytest.mark.parametrize("hidden", [[], [".DS_Store", ".snapshot/messages"]])
def test_5_an_empty_folder_or_one_of_hidden_files_is_warned(tmp_path, hidden):
    folder = tmp_path / "export-2026-11-29"
    folder.mkdir()
    for name in hidden:
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(SYSLOG)
    result = CliRunner().invoke(cli, ["ingest", str(folder)])
    assert result.exit_code == 0  # a warning: `ingest empty/ --explain` still only explains
    assert f"warning: {folder}: no files to ingest in this folder" in result.stderr
    assert ("2 hidden name(s) skipped" in result.stderr) == bool(hidden)


def test_5_the_store_inside_the_ingested_folder_is_never_read_as_input(tmp_path, monkeypatch):
    (tmp_path / "messages").write_text(SYSLOG)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYNESTRA_DB")  # the default store, ./synestra.duckdb, inside the folder
    runner = CliRunner()
    first = runner.invoke(cli, ["ingest", ".", "--year", "2026"])
    second = runner.invoke(cli, ["ingest", ".", "--year", "2026"])
    assert (tmp_path / "synestra.duckdb").exists()
    assert (first.exit_code, second.exit_code) == (0, 0), second.stderr
    assert "0 loaded, 1 skipped, 0 failed" in second.stderr


def test_5_a_utf8_bom_does_not_cost_the_first_line(tmp_path, db_path):
    f = tmp_path / "messages"
    f.write_bytes(b"\xef\xbb\xbf" + SYSLOG.encode())
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions(year=2026))
        lines = [line for line, _ in _syslog_events(c)]
    assert (report.rows, report.rejected, lines) == (3, 0, [1, 2, 3])


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-le"])  # with a BOM (Windows' "Unicode"), and without
def test_5_utf16_is_decoded(tmp_path, db_path, codec):
    f = tmp_path / "sacct.txt"
    f.write_bytes((SACCT_HEADER + SACCT_ROW.format(job=1001, elapsed="01:00:00")).encode(codec))
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions())
        jobs = c.execute("SELECT job_id, gpus FROM jobs").fetchall()
        path = c.execute("SELECT path FROM sources").fetchone()[0]
    assert report.status == "loaded", report.error
    assert jobs == [("1001", 16)] and path == str(f)


# --- item 7: one absurd sacct Elapsed is one rejected row ---------------------------------------------------


def test_7_an_elapsed_of_24856_days_is_one_rejected_row_not_a_lost_file(tmp_path, db_path):
    f = tmp_path / "sacct.txt"
    f.write_text(
        SACCT_HEADER
        + SACCT_ROW.format(job=1001, elapsed="01:00:00")
        + SACCT_ROW.format(job=1002, elapsed="24856-00:00:00")
        + SACCT_ROW.format(job=1003, elapsed="99999999999999999999-00:00:00")
    )
    with open_store(db_path) as c:
        report = ingest_file(c, f, IngestOptions())
        jobs = c.execute("SELECT job_id FROM jobs").fetchall()
    assert report.status == "loaded", report.error
    assert jobs == [("1001",)] and report.rejected == 2
    assert report.reject_samples[0][:2] == (3, "Elapsed out of range (68 years or more) 24856-00:00:00")


# --- item 8: sources keyed on content and the options that change what is read; forget --------------------


def test_8_the_same_dmesg_bytes_from_a_second_host_load(tmp_path, db_path):
    f = tmp_path / "dmesg.txt"
    f.write_text(DMESG)
    with open_store(db_path) as c:
        a = ingest_file(c, f, IngestOptions(host="gpu-001"))
        b = ingest_file(c, f, IngestOptions(host="gpu-002"))
        again = ingest_file(c, f, IngestOptions(host="gpu-002"))
        hosts = c.execute("SELECT DISTINCT host FROM events ORDER BY host").fetchall()
    assert (a.status, b.status, again.status) == ("loaded", "loaded", "skipped")
    assert hosts == [("gpu-001",), ("gpu-002",)]
    assert any("forget 1" in n for n in b.notes)


def test_8_an_option_the_parser_does_not_read_does_not_make_a_second_copy(tmp_path, db_path):
    f = REAL_SAMPLES / "dcgm" / "prometheus_promtool_tsdb-dump_golden.txt"  # stamps in UTC ms: no zone read
    with open_store(db_path) as c:
        first = ingest_file(c, f, IngestOptions())
        second = ingest_file(c, f, IngestOptions(timezone="Europe/Paris"))
    assert (first.status, second.status) == ("loaded", "skipped")


def test_8_a_wrong_forced_format_does_not_block_the_right_load(tmp_path, db_path):
    f = tmp_path / "dmesg.txt"
    f.write_text(DMESG * 3)
    with open_store(db_path) as c:
        wrong = ingest_file(c, f, IngestOptions(format="prometheus", host="gpu-001"))
        right = ingest_file(c, f, IngestOptions(host="gpu-001"))
        n_sources = _count(c, "SELECT count(*) FROM sources")
    assert wrong.status == "failed" and "--input-format forced it" in wrong.error
    assert right.status == "loaded" and right.format == "syslog" and n_sources == 1


def test_8_forget_by_id_or_path_removes_a_source_and_every_row_it_wrote(tmp_path, db_path):
    from synestra_cli.store.sources import forget

    sacct, log = tmp_path / "sacct.txt", tmp_path / "messages"
    sacct.write_text(SACCT_HEADER + SACCT_ROW.format(job=1001, elapsed="01:00:00"))
    log.write_text(SYSLOG)
    with open_store(db_path) as c:
        ingest_paths(c, [sacct, log], IngestOptions(year=2026))
        removed, rows = forget(c, ["1"])
        left = {t: _count(c, f"SELECT count(*) FROM {t}") for t in ("jobs", "attempts", "job_nodes", "sacct_rows")}
        assert left == {"jobs": 0, "attempts": 0, "job_nodes": 0, "sacct_rows": 0} and rows > 0
        forget(c, [str(log)])
        assert _count(c, "SELECT count(*) FROM events") == 0
        assert _count(c, "SELECT count(*) FROM sources") == 0
    assert [r[0] for r in removed] == [1]


def test_8_forget_on_the_command_line_is_all_or_nothing(tmp_path):
    log = tmp_path / "messages"
    log.write_text(SYSLOG)
    runner = CliRunner()
    runner.invoke(cli, ["ingest", str(log), "--year", "2026"])
    missing = runner.invoke(cli, ["forget", "1", "42"])
    assert missing.exit_code == ExitCode.NOT_FOUND and "no source '42'" in missing.stderr
    done = runner.invoke(cli, ["forget", str(log), "--json"])
    assert done.exit_code == 0 and json.loads(done.stdout)["rows"] == 3
    again = runner.invoke(cli, ["ingest", str(log), "--year", "2026"])
    assert "1 loaded" in again.stderr  # forgotten, it loads again (the corrected reload)


# --- item 9: a store that cannot be written stops the run with its own exit code ---------------------------


def _limit_file_size():  # a disk that fills: writes beyond 1.5 MB fail with EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1_500_000, 1_500_000))


def test_9_a_full_disk_stops_at_the_first_store_error_with_exit_8(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(6):  # ~0.6 MB of events each
        with gzip.open(folder / f"node{i}.log.gz", "wt") as f:
            f.writelines(
                f"Nov 29 10:{j // 60 % 60:02d}:{j % 60:02d} node{i} kernel: message {j} {'x' * 40}\n"
                for j in range(8000)
            )
    synestra = [sys.executable, "-c", "from synestra_cli.cli.main import cli; cli()"]
    run = subprocess.run(
        [*synestra, "ingest", str(folder), "--year", "2026", "--db", str(tmp_path / "s.duckdb")],
        preexec_fn=_limit_file_size,
        capture_output=True,
        text=True,
        env={**os.environ, "SYNESTRA_INGEST_WORKERS": "1"},
        timeout=300,
    )
    assert run.returncode == ExitCode.STORE, run.stderr
    assert "cannot be written" in run.stderr and "Traceback" not in run.stderr
    assert run.stderr.count("error:") == 1  # one line, not one per remaining file


# --- item 10: the store is checked on open ------------------------------------------------------------------


def test_10_a_store_written_by_a_newer_synestra_is_refused(db_path):
    with open_store(db_path) as c:
        c.execute("INSERT INTO _migrations VALUES ('999_from_the_future', now()::TIMESTAMP)")
    with pytest.raises(StoreError, match="written by a newer Synestra"):
        open_store(db_path).__enter__()
    result = CliRunner().invoke(cli, ["sources", "--db", str(db_path)])
    assert result.exit_code == ExitCode.STORE and "999_from_the_future" in result.stderr


def test_10_a_truncated_store_is_one_clear_error(tmp_path, db_path):
    log = tmp_path / "messages"
    log.write_text(SYSLOG * 2000)
    with open_store(db_path) as c:
        ingest_file(c, log, IngestOptions(year=2026))
        c.execute("CHECKPOINT")
    os.truncate(db_path, db_path.stat().st_size // 2)
    for args in (["sources"], ["jobs"], ["ingest", str(log)]):
        result = CliRunner().invoke(cli, [*args, "--db", str(db_path)])
        assert result.exit_code == ExitCode.STORE, (args, result.output)
        assert "truncated" in result.stderr and "Traceback" not in result.output


def test_10_a_file_that_is_not_a_store_is_one_clear_error(tmp_path):
    not_a_store = tmp_path / "notes.duckdb"
    not_a_store.write_text("hello\n")
    result = CliRunner().invoke(cli, ["sources", "--db", str(not_a_store)])
    assert result.exit_code == ExitCode.STORE and "is not a Synestra store (not a DuckDB file)" in result.stderr
    assert "Traceback" not in result.output


def test_10_corruption_found_mid_query_is_one_clear_error():
    from synestra_cli.store.connect import as_store_error

    exc = duckdb.IOException("IO Error: Corrupt database file: computed checksum 1 does not match stored 2")
    assert "is damaged" in str(as_store_error(exc, "s.duckdb"))
    assert as_store_error(duckdb.BinderException("no such column"), "s.duckdb") is None


# --- item 13: the clock-order check streams; its answer does not depend on the batch size -----------------


def test_13_the_clock_scan_in_small_batches_finds_the_same_year_wraps(tmp_path, monkeypatch):
    from synestra_cli.formats.kernel import syslog_clock

    f = tmp_path / "messages"
    months = ["Nov", "Dec", "Jan", "Feb", "Dec", "Jan"]  # two new years, one at a batch boundary
    f.write_text("".join(f"{m} 29 10:00:00 gpu-017 kernel: line {i}\n" for i, m in enumerate(months, 1)))
    found = {}
    for rows in (1 << 20, 2, 1):
        monkeypatch.setattr(syslog_clock, "CLOCK_BATCH_ROWS", rows)
        with open_store(f"{tmp_path}/s{rows}.duckdb") as c:
            ingest_file(c, f, IngestOptions(year=2025))
            found[rows] = c.execute("SELECT year(ts), month(ts) FROM events ORDER BY line").fetchall()
    assert found[1] == found[2] == found[1 << 20]
    assert [y for y, _ in found[1]] == [2025, 2025, 2026, 2026, 2026, 2027]


@pytest.mark.heavy
def test_13_a_syslog_staged_in_chunks_loads_as_it_would_whole(tmp_path, monkeypatch):
    from synestra_cli.formats import base
    from synestra_cli.formats.kernel import syslog

    f = tmp_path / "messages"
    lines = []
    for i, month in enumerate(["Nov", "Dec", "Dec", "Jan", "Jan", "Feb"] * 4, 1):
        lines.append(f"{month} 29 10:00:{i:02d} gpu-017 kernel: message {i}\n")
        if i % 3 == 0:  # a multi-line message: its continuation may fall in the next chunk
            lines.append(f"    continued {i}\n")
    f.write_text("".join(lines))
    os.utime(f, (1_790_000_000, 1_790_000_000))  # 2026-09: the file ends in Feb 2026
    loaded = {}
    for chunked in (False, True):
        if chunked:  # batches of ~2 lines, a chunk per batch
            monkeypatch.setattr(base, "BATCH_BYTES", 80)
            monkeypatch.setattr(syslog, "CHUNK_BYTES", 1)
        with open_store(tmp_path / f"s{chunked}.duckdb") as c:
            report = ingest_file(c, f, IngestOptions())
            loaded[chunked] = (
                report.rows,
                report.rejected,
                c.execute("SELECT line, ts, message FROM events ORDER BY line").fetchall(),
            )
    assert loaded[True] == loaded[False]
    rows, rejected, events = loaded[True]
    assert (rows, rejected) == (24, 0) and events[2][2].endswith("message 3\n    continued 3")
    assert events[0][1].year == 2022 and events[-1][1].year == 2026  # four new years, ending in the mtime's


@pytest.mark.heavy
def test_13_what_a_syslog_file_keeps_between_chunks_does_not_grow_with_them(tmp_path, monkeypatch):
    """Memory flat in the file's size, counted instead of timed: DuckDB's memory after each of 80 chunks
    (the staging tables a chunk replaced in the file's transaction were kept until COMMIT, ~12 KB each
    even for a few lines), and the hosts the chunks saw (kept once each, not once per chunk)."""
    from synestra_cli.formats import base
    from synestra_cli.formats.kernel import syslog

    f = tmp_path / "messages"
    months = ["Nov", "Dec", "Jan"] * 27  # a new year every third line: the clock scan's state is exercised
    f.write_text("".join(f"{m} 29 10:00:{i % 60:02d} gpu-{i % 2} kernel: line {i}\n" for i, m in enumerate(months)))
    monkeypatch.setattr(base, "BATCH_BYTES", 40)  # a batch per line, a chunk per batch
    monkeypatch.setattr(syslog, "CHUNK_BYTES", 1)
    used, hosts = [], []
    memory_sql = "SELECT sum(memory_usage_bytes + temporary_storage_bytes) FROM duckdb_memory()"
    insert, finish = syslog.insert_events, syslog.finish

    def counting_insert(conn, *args):
        insert(conn, *args)
        used.append(conn.sql(memory_sql).fetchall())

    def counting_finish(conn, work, files):
        hosts.append(work.sql("SELECT count(*) FROM _syslog_hosts").fetchall()[0][0])
        finish(conn, work, files)

    monkeypatch.setattr(syslog, "insert_events", counting_insert)
    monkeypatch.setattr(syslog, "finish", counting_finish)
    with open_store(tmp_path / "s.duckdb") as c:
        report = ingest_file(c, f, IngestOptions(year=2000))
        assert report.rows == len(months) and report.rejected == 0
        assert c.execute("SELECT max(year(ts)) FROM events").fetchone() == (2000 + len(months) // 3,)
    assert len(used) >= 70 and hosts == [2]
    used = [row[0][0] for row in used]
    assert used[-1] - used[20] < 64 * 1024, used  # before: 18 MB more over those chunks, and 81 hosts


@pytest.mark.parametrize(
    ("budget", "pool"),
    [(None, "900000000"), ("4GiB", str(4 * 1024**3 - 600 * 10**6)), ("1.2GB", "600000000"), ("1GB", "500000000")],
)
def test_13_memory_limit_is_the_process_budget_and_duckdb_gets_it_less_the_reserve(tmp_path, monkeypatch, budget, pool):
    """SYNESTRA_MEMORY_LIMIT bounds the process (default 1.5 GB, the issue's target): DuckDB's pool is it
    less 600 MB for the interpreter and the lines in flight (at least half of it)."""
    if budget is not None:
        monkeypatch.setenv("SYNESTRA_MEMORY_LIMIT", budget)
    expected = duckdb.connect(config={"memory_limit": f"{pool} bytes"})
    with open_store(tmp_path / "s.duckdb") as c:
        setting = "SELECT current_setting('memory_limit')"
        assert c.execute(setting).fetchall() == expected.execute(setting).fetchall()


# --- exit codes: a documented table, the same in README.md, docs/formats.md (ingest) and `synestra -h` ------


def test_every_exit_code_is_in_the_readme_table_and_the_help():
    import re

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    table = dict(re.findall(r"^\| (\d+) \| (.+) \|$", readme, re.M))
    assert sorted(map(int, table)) == [int(c) for c in ExitCode]
    assert "store cannot be written" in table["8"] and "ingested" in table["3"]
    ingest_doc = (root / "docs" / "formats.md").read_text()
    assert all(f"| {c} |" in ingest_doc for c in (0, 2, 3, 4, 5, 6, 8))
    help_text = CliRunner().invoke(cli, ["-h"]).output
    assert all(f"{c.value}  {c.name.lower()}" in help_text for c in ExitCode)
