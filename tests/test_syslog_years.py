"""Yearless syslog stamps take their year from dated evidence first (the file's own dated lines or journal
header, then dated rows of the same hosts in the store), the file's mtime last; the report says which
(issue 12 item 4). Files are real samples, copied with an mtime years after they were written, as a log
copied later is."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file, ingest_paths
from synestra_cli.store import open_store

SYSLOG = REAL_SAMPLES / "syslog"
COPIED = datetime(2026, 11, 18, 12, 0, 0)  # long after every sample was written


def copied_later(tmp_path: Path, name: str, mtime: datetime = COPIED) -> Path:
    path = tmp_path / name
    shutil.copy(SYSLOG / name, path)
    stamp = mtime.replace(tzinfo=UTC).timestamp()
    os.utime(path, (stamp, stamp))
    return path


def years(conn, source_id: int | None = None) -> list[int]:
    where = f"WHERE source_id = {int(source_id)}" if source_id else ""
    return [r[0] for r in conn.execute(f"SELECT DISTINCT year(ts) FROM events {where} ORDER BY 1").fetchall()]


def year_note(report) -> str:
    [note] = [n for n in report.notes if n.startswith("no year in the time stamps")]
    return note


def basis(conn, source_id: int) -> tuple:
    return conn.execute("SELECT basis, year FROM source_years WHERE source_id = ?", [source_id]).fetchone()


def test_a_journal_header_dates_the_lines_after_it(conn, tmp_path):
    # systemd#1401: `-- Logs begin at Fr 2015-08-07 ..., end at Mi 2015-09-30 16:29:34 CEST. --`, then Sep 30 lines
    path = copied_later(tmp_path, "gh-systemd-1401_journal-short_logs-begin-header_de.log")
    report = ingest_file(conn, path, IngestOptions())
    assert years(conn) == [2015]
    first = conn.execute("SELECT ts FROM events WHERE line = 2").fetchone()[0]
    assert first == datetime(2015, 9, 30, 16, 21, 44)
    note = year_note(report)
    assert "year taken from the journal header (-- Logs begin at Fr 2015-08-07" in note
    assert "the file's mtime would say 2026" in note and note.endswith(
        ": 2015; pass --year YEAR (the year the log starts in) to override"
    )
    assert basis(conn, report.source_id) == ("file", 2015)


def test_dated_lines_of_the_file_give_its_year(conn, tmp_path):
    # borg's `Keeping archive:` line carries the archive's full date on its own line's day (real line shape)
    path = tmp_path / "journal-u-backup.log"
    path.write_text(
        "Oct 31 16:01:04 backupclient backup.sh[5108]: borg 1.1.18\n"
        "Oct 31 16:01:24 backupclient backup.sh[5108]: Keeping archive: etc_backup-2022-10-31_16-01-05"
        "       Mon, 2022-10-31 16:01:07 [f0c...2eea2d]\n"
        "Oct 31 16:01:24 backupclient systemd[1]: Started My backup service.\n"
    )
    os.utime(path, (COPIED.replace(tzinfo=UTC).timestamp(),) * 2)
    report = ingest_file(conn, path, IngestOptions())
    assert years(conn) == [2022]
    assert "year taken from 1 line(s) of the file that carry a full date on their own day" in year_note(report)
    assert basis(conn, report.source_id) == ("file", 2022)


def _attempt_on(conn, host: str, start: datetime, end: datetime) -> None:
    """sacct's record of a job on `host` (dated: Slurm prints the year), with its source's span as ingest keeps it."""
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts, hosts,"
        " source_key) VALUES (800, '/slurm/sacct.txt', 's', 'sacct', 1, 1, 0, ?, ?, [?], 's')",
        [start, end, host],
    )
    conn.execute("INSERT INTO attempts VALUES ('4242', 1, ?, ?, 'FAILED', '1:0', [?], 800)", [start, end, host])


def test_sacct_on_the_same_host_dates_a_copied_syslog(conn, tmp_path):
    # docker/for-linux#1001: `May 15 23:09:30 ubuntu-s-1vcpu-2gb-ams3-01 kernel: ... Out of memory: Killed process`
    _attempt_on(conn, "ubuntu-s-1vcpu-2gb-ams3-01", datetime(2020, 5, 15, 22, 0), datetime(2020, 5, 15, 23, 10))
    path = copied_later(tmp_path, "gh-docker-for-linux-1001_rfc3164_oom-killed-new-format.log")
    report = ingest_file(conn, path, IngestOptions())
    assert years(conn, report.source_id) == [2020]
    note = year_note(report)
    assert "year taken from dated evidence in the store for the same hosts (/slurm/sacct.txt)" in note
    assert "the file's mtime would say 2026" in note
    assert basis(conn, report.source_id) == ("store", 2020)


def test_without_dated_evidence_the_mtime_gives_the_year_and_says_so(conn, tmp_path):
    _attempt_on(conn, "some-other-node", datetime(2020, 5, 15, 22, 0), datetime(2020, 5, 15, 23, 10))
    path = copied_later(tmp_path, "gh-docker-for-linux-1001_rfc3164_oom-killed-new-format.log")
    report = ingest_file(conn, path, IngestOptions())
    assert years(conn, report.source_id) == [2026]
    assert "year taken from the file's modification time (2026-11-18): 2026" in year_note(report)
    assert basis(conn, report.source_id) == ("mtime", 2026)


def test_a_log_dated_by_its_mtime_is_no_evidence_for_another(conn, tmp_path):
    # Two copies of one host's log: the first takes its mtime's year; the second must not take it from the first.
    first = copied_later(tmp_path, "gh-pf-ring-293_rfc3164_ixgbe-nic-link-up-down.log", datetime(2024, 12, 1))
    ingest_file(conn, first, IngestOptions())
    other = tmp_path / "other"
    other.mkdir()
    text = first.read_text().replace("NIC Link is Down", "NIC Link is Down ")  # another file, same host and days
    second = other / first.name
    second.write_text(text)
    os.utime(second, (COPIED.replace(tzinfo=UTC).timestamp(),) * 2)
    report = ingest_file(conn, second, IngestOptions())
    assert years(conn, report.source_id) == [2026] and basis(conn, report.source_id)[0] == "mtime"


def test_a_new_year_inside_the_file_with_store_evidence(conn, tmp_path):
    # The real ixgbe line shapes of pf_ring#293, across a new year; a DCGM scrape of the same host dates January.
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected, first_ts, last_ts, hosts,"
        " source_key) VALUES (801, '/dcgm/superserver.prom', 'd', 'prometheus', 1, 1, 0,"
        " TIMESTAMP '2019-01-01 00:05:00', TIMESTAMP '2019-01-01 00:05:00', ['superserver'], 'd')"
    )
    conn.execute(
        "INSERT INTO metrics (ts, host, entity, metric, value, source_id) "
        "VALUES (TIMESTAMP '2019-01-01 00:05:00', 'superserver', 'gpu0', 'gpu_temp_c', 40, 801)"
    )
    path = tmp_path / "messages"
    path.write_text(
        "Dec 31 23:59:58 superserver kernel: [11314.654843] ixgbe 0000:08:00.0 eth11: NIC Link is Down\n"
        "Jan  1 00:00:03 superserver kernel: [11319.655315] ixgbe 0000:08:00.0 eth11: NIC Link is Up 10 Gbps, "
        "Flow Control: RX\n"
    )
    os.utime(path, (COPIED.replace(tzinfo=UTC).timestamp(),) * 2)
    report = ingest_file(conn, path, IngestOptions())
    got = conn.execute("SELECT kind, ts FROM events WHERE source_id = ? ORDER BY line", [report.source_id]).fetchall()
    assert got == [
        ("link_down", datetime(2018, 12, 31, 23, 59, 58)),
        ("link_up", datetime(2019, 1, 1, 0, 0, 3)),
    ]
    assert ": 2018-2019; pass --year YEAR" in year_note(report)
    assert basis(conn, report.source_id) == ("store", 2018)


def test_year_option_wins_over_every_evidence(conn, tmp_path):
    path = copied_later(tmp_path, "gh-systemd-1401_journal-short_logs-begin-header_de.log")
    report = ingest_file(conn, path, IngestOptions(year=2016))
    assert years(conn) == [2016]
    assert not [n for n in report.notes if n.startswith("no year")]
    assert basis(conn, report.source_id) == ("option", 2016)


def test_a_journal_header_across_a_new_year(conn, tmp_path):
    # systemd#1401's header and line shapes, across a new year: the last line falls at or before the header's end.
    path = tmp_path / "journal.log"
    path.write_text(
        "-- Logs begin at Fr 2023-12-29 13:03:13 CET, end at Di 2024-01-02 16:29:34 CET. --\n"
        "Dec 31 23:59:44 pc6 systemd[1]: Starting Flush Journal to Persistent Storage...\n"
        "Jan 01 00:00:05 pc6 systemd[1]: Started Flush Journal to Persistent Storage.\n"
    )
    os.utime(path, (COPIED.replace(tzinfo=UTC).timestamp(),) * 2)
    report = ingest_file(conn, path, IngestOptions())
    got = [r[0] for r in conn.execute("SELECT ts FROM events WHERE line > 1 ORDER BY line").fetchall()]
    assert got == [datetime(2023, 12, 31, 23, 59, 44), datetime(2024, 1, 1, 0, 0, 5)]
    assert basis(conn, report.source_id) == ("file", 2023)


SACCT_ON_THE_HOST = (  # sacct --parsable2's layout: Slurm prints the year; the syslog's host and day (May 15 2020)
    "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES\n"
    "4242|train|ana|FAILED|1:0|2020-05-15T22:00:00|2020-05-15T23:10:00|01:10:00|ubuntu-s-1vcpu-2gb-ams3-01|"
    "billing=8,cpu=8,gres/gpu=8,node=1\n"
)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("store", ["path", "connection"])
def test_dated_evidence_ingested_in_the_same_run_dates_a_yearless_log_whatever_the_order(tmp_path, workers, store):
    # The syslog comes first, and both files are small enough to be parsed together: were the log parsed
    # before the sacct export is in the store, its year would be its mtime's. It waits for the run's others.
    inputs = tmp_path / "in"
    inputs.mkdir()
    log = copied_later(inputs, "gh-docker-for-linux-1001_rfc3164_oom-killed-new-format.log")
    log.rename(inputs / "a-messages.log")
    (inputs / "z-sacct.txt").write_text(SACCT_ON_THE_HOST)
    db = tmp_path / "store.duckdb"
    if store == "path":  # the store attached for each commit only, files parsed apart from it
        reports = ingest_paths(db, [inputs], IngestOptions(), workers=workers)
    else:  # the store attached the whole run
        with open_store(db) as conn:
            reports = ingest_paths(conn, [inputs], IngestOptions(), workers=workers)
    assert [(Path(r.path).name, r.status) for r in reports] == [("a-messages.log", "loaded"), ("z-sacct.txt", "loaded")]
    with open_store(db, read_only=True) as conn:
        assert years(conn, reports[0].source_id) == [2020]
        assert basis(conn, reports[0].source_id) == ("store", 2020)
    assert "dated evidence in the store for the same hosts" in year_note(reports[0])


def test_a_yearless_log_is_no_evidence_for_another_whatever_dated_it(tmp_path):
    # The borg line dates one log of the host (2022); another, with no evidence of its own, comes later. Were
    # the first evidence, the second's year would hang on which of two files of one run was committed first
    # (both wait for the run's dated files, then go in any order): a yearless log dates no other.
    dated, plain = tmp_path / "dated.log", tmp_path / "plain.log"
    dated.write_text(
        "Oct 31 16:01:24 backupclient backup.sh[5108]: Keeping archive: etc_backup-2022-10-31_16-01-05"
        "       Mon, 2022-10-31 16:01:07 [f0c...2eea2d]\n"
    )
    plain.write_text("Oct 31 17:01:24 backupclient systemd[1]: Started My backup service.\n")
    for path in (dated, plain):
        os.utime(path, (COPIED.replace(tzinfo=UTC).timestamp(),) * 2)
    db = tmp_path / "store.duckdb"
    [first] = ingest_paths(db, [dated], IngestOptions())
    [second] = ingest_paths(db, [plain], IngestOptions())
    with open_store(db, read_only=True) as conn:
        assert basis(conn, first.source_id) == ("file", 2022)
        assert basis(conn, second.source_id) == ("mtime", 2026)


@pytest.mark.parametrize("workers", [1, 2])
def test_progress_counts_each_file_once_up_to_the_total_when_a_log_waits_for_the_second_pass(
    tmp_path, monkeypatch, workers
):
    from synestra_cli.ingest import units

    monkeypatch.setattr(units, "UNIT_FILES", 1)  # a unit per file: two workers take them
    inputs = tmp_path / "in"
    inputs.mkdir()
    copied_later(inputs, "gh-docker-for-linux-1001_rfc3164_oom-killed-new-format.log").rename(inputs / "a.log")
    (inputs / "z-sacct.txt").write_text(SACCT_ON_THE_HOST)
    seen: list[tuple[str, int, int]] = []
    ingest_paths(
        tmp_path / "s.duckdb",
        [inputs],
        IngestOptions(),
        on_file=lambda p, i, n: seen.append((p.name, i, n)),
        workers=workers,
    )
    assert [i for _, i, _ in seen] == sorted(i for _, i, _ in seen)  # never back
    assert seen[-1] == ("", 2, 2)
    assert sorted(name for name, _, _ in seen[:-1]) == ["a.log", "z-sacct.txt"]  # each once
