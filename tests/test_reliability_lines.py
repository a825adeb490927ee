"""Issue 38, what ingest reads: decompression bombs, samples before year 1, leap seconds and line endings.
Each test failed on the code before it (the defect's number in the issue is in its name).
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from reliability_kit import OPTIONS
from reliability_kit import syslog as _syslog

from synestra_cli.cli.main import cli
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import open_store

pytestmark = pytest.mark.reliability


# ---------------------------------------------------------------- defects 7, 15, 16: lines and clocks

PROM_LINE = 'DCGM_FI_DEV_GPU_TEMP{{gpu="0",Hostname="gpu-017"}} {v} {ms}\n'


def test_7_a_sample_before_year_1_is_one_reject_at_its_line_and_the_good_lines_stay(tmp_path, db_path):
    f = tmp_path / "dump.prom"
    good = [PROM_LINE.format(v=60 + i, ms=1764410400000 + i * 15000) for i in range(100)]
    f.write_text("".join(good[:40]) + PROM_LINE.format(v=1, ms=-62135596800001) + "".join(good[40:]))
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [f], IngestOptions())
        stored = c.execute("SELECT count(*) FROM metrics").fetchone()[0]
        listed = c.execute("SELECT rows, rejected FROM sources").fetchone()
        rejects = c.execute("SELECT line, reason FROM rejects").fetchall()
    assert report.status == "loaded", report.error
    assert (report.rows, report.rejected) == (100, 1)
    assert stored == 100 and listed == (100, 1)  # sources counts what is stored
    assert rejects == [(41, "time outside years 1-9999")]


def test_7_one_good_and_one_bad_line_keeps_the_good_one(tmp_path, db_path):
    f = tmp_path / "two.prom"
    f.write_text(PROM_LINE.format(v=61, ms=1764410400000) + PROM_LINE.format(v=61, ms=-62135596800001))
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [f], IngestOptions())
        assert c.execute("SELECT count(*) FROM metrics").fetchone()[0] == 1
    assert (report.status, report.rows, report.rejected) == ("loaded", 1, 1)
    assert report.reject_samples[0][0] == 2


def test_7_a_row_whose_line_is_not_known_is_never_reported_at_line_none(tmp_path, db_path):
    """Long-form metrics (CSV) rows carry no line in the store: the refusal names none rather than `None`."""
    f = tmp_path / "metrics.csv"
    f.write_text("timestamp,host,entity,metric,value\n-99999999999,gpu-017,gpu0,gpu_temp_celsius,61\n")
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [f], IngestOptions())
    assert report.status == "failed" and "line None" not in report.error, report.error
    assert "time outside years 1-9999" in report.error


LEAP_SYSLOG = (
    "Dec 31 23:59:59 gpu-001 kernel: before\n"
    "Dec 31 23:59:60 gpu-001 kernel: Clock: inserting leap second 23:59:60 UTC\n"
    "Jan  1 00:00:00 gpu-001 kernel: after\n"
)
LEAP_RFC3339 = (
    "2016-12-31T23:59:59.500000+00:00 gpu-001 kernel: before\n"
    "2016-12-31T23:59:60.250000+00:00 gpu-001 kernel: Clock: inserting leap second 23:59:60 UTC\n"
    "2017-01-01T00:59:60.750000+01:00 gpu-001 kernel: the same second, at +01:00\n"
    "2017-01-01T00:00:00.100000+00:00 gpu-001 kernel: after\n"
)


@pytest.mark.parametrize(("text", "year"), [(LEAP_SYSLOG, 2016), (LEAP_RFC3339, None)], ids=["rfc3164", "rfc3339"])
def test_15_a_leap_second_line_is_kept_as_the_last_microsecond_of_its_minute(tmp_path, db_path, text, year):
    f = tmp_path / "messages"
    f.write_text(text)
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [f], IngestOptions(year=year))
        rows = c.execute("SELECT line, strftime(ts, '%Y-%m-%d %H:%M:%S.%f') FROM events ORDER BY line").fetchall()
    assert report.rejected == 0 and report.rows == len(text.splitlines()), report.reject_samples
    assert rows[1] == (2, "2016-12-31 23:59:59.999999")
    times = [t for _, t in rows]
    assert times == sorted(times)  # the log's order is kept


def test_15_a_leap_second_in_a_job_log_is_kept(tmp_path, db_path):
    from conftest import SAMPLE_EXPORTS

    lines = (SAMPLE_EXPORTS / "jobs" / "1001.log").read_text().splitlines(keepends=True)
    lines[99] = re.sub(r"(\d\d:\d\d):\d\d\.\d+\]", r"\1:60.123456]", lines[99], count=1)  # 01:58:60.123456
    assert ":60.123456]" in lines[99]
    log = tmp_path / "1001.log"
    log.write_text("".join(lines))
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [log], IngestOptions())
        t = c.execute("SELECT strftime(ts, '%S.%f') FROM steps WHERE line = 100").fetchall()
    assert report.rejected == 0 and t == [("59.999999",)]


def test_16_cr_only_line_endings_are_lines(tmp_path, db_path):
    f = tmp_path / "classic-mac.log"
    f.write_bytes(_syslog("gpu-001", 10).replace("\n", "\r").encode())
    with open_store(db_path) as c:
        [report] = ingest_paths(c, [f], OPTIONS)
        lines = [r[0] for r in c.execute("SELECT line FROM events ORDER BY line").fetchall()]
    assert (report.rows, report.rejected) == (10, 0)
    assert lines == list(range(1, 11))


def test_16_a_carriage_return_inside_an_lf_file_stays_in_its_line(tmp_path, db_path):
    """tqdm redraws its bar with a CR inside one LF line: the line numbers stay those `sed -n Np` shows."""
    f = tmp_path / "messages"
    f.write_text("Nov 29 10:00:01 gpu-001 kernel: a\rb\nNov 29 10:00:02 gpu-001 kernel: c\n")
    with open_store(db_path) as c:
        ingest_paths(c, [f], OPTIONS)
        assert [r[0] for r in c.execute("SELECT line FROM events ORDER BY line").fetchall()] == [1, 2]


def test_16_the_cli_reports_ten_rows_for_a_cr_only_file(tmp_path):
    f = tmp_path / "classic-mac.log"
    f.write_bytes(_syslog("gpu-001", 10).replace("\n", "\r").encode())
    res = CliRunner().invoke(cli, ["ingest", str(f), "--year", "2026", "--db", str(tmp_path / "s.duckdb")])
    assert res.exit_code == 0 and "syslog, 10 rows, 0 rejected" in res.stderr


def test_15_a_leap_second_in_sacct_and_long_form_metrics_is_kept(tmp_path, db_path):
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES\n"
        "1001|train|ana|COMPLETED|0:0|2016-12-31T23:00:00|2016-12-31T23:59:60|00:59:60|gpu-[001-002]|"
        "billing=16,cpu=16,gres/gpu=16,node=2\n"
    )
    metrics = tmp_path / "metrics.csv"
    metrics.write_text(
        "timestamp,host,entity,metric,value\n"
        "2016-12-31T23:59:59Z,gpu-001,gpu0,gpu_temp_celsius,60\n"
        "2016-12-31T23:59:60Z,gpu-001,gpu0,gpu_temp_celsius,61\n"
        "2017-01-01T00:00:00Z,gpu-001,gpu0,gpu_temp_celsius,62\n"
    )
    with open_store(db_path) as c:
        reports = ingest_paths(c, [sacct, metrics], IngestOptions())
        end = c.execute("SELECT strftime(end_ts, '%H:%M:%S.%f') FROM attempts").fetchall()
        temps = c.execute("SELECT strftime(ts, '%S.%f'), value FROM metrics ORDER BY ts").fetchall()
    assert [(r.status, r.rejected) for r in reports] == [("loaded", 0), ("loaded", 0)], reports
    assert end == [("23:59:59.999999",)]
    assert temps == [("59.000000", 60.0), ("59.999999", 61.0), ("00.000000", 62.0)]
