"""Small files parsed together (Format.load_group, issue 14 item 2): the same rows as each file alone,
and still one source per file, all or nothing per file, rejects at their own file's line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths, run
from synestra_cli.store.connect import memory_store

DATA = Path(__file__).parent / "data"
SYSLOG = DATA / "real_samples" / "syslog"  # real exports of every envelope (PROVENANCE.md)
LOGHUB = DATA / "real_data" / "loghub-2k"
ROWS = {
    "events": "source_id, line, ts, host, component, kind, code, severity, message, CAST(fields AS VARCHAR)",
    "rejects": "source_id, line, reason, text",
    "source_years": "*",
    "host_names": "*",
    "sources": "source_id, format, rows, rejected, first_ts, last_ts, hosts",
    "metrics": "source_id, ts, host, entity, metric, value",
}


def _real_logs() -> list[Path]:
    logs = sorted(p for p in SYSLOG.iterdir() if p.suffix == ".log")
    return logs + [LOGHUB / "Linux" / "Linux_2k.log", LOGHUB / "Thunderbird" / "Thunderbird_2k.log"]


def _store(paths: list[Path], monkeypatch: pytest.MonkeyPatch, unit_files: int, **options) -> dict[str, list]:
    monkeypatch.setattr(run, "UNIT_FILES", unit_files)
    monkeypatch.setattr(run, "BATCH_SECONDS", 1e9)  # one batch: the same evidence for every file's year
    conn = memory_store()
    reports = ingest_paths(conn, paths, IngestOptions(**options), workers=1)
    assert [r.status for r in reports].count("failed") == 0, [r.error for r in reports if r.error]
    return {t: conn.execute(f"SELECT {cols} FROM {t} ORDER BY ALL").fetchall() for t, cols in ROWS.items()}


def test_real_logs_parsed_together_give_each_file_its_own_rows(monkeypatch):
    """Every real syslog sample (RFC 3164 and 3339, journal, dmesg -T/raw, kmsg, fabric manager,
    loghub): parsed in groups, every table holds what parsing each file alone gives, row for row."""
    logs = _real_logs()
    alone = _store(logs, monkeypatch, unit_files=1)
    together = _store(logs, monkeypatch, unit_files=64)
    assert len(alone["sources"]) == len(logs) and alone["events"]
    for table in ROWS:
        assert together[table] == alone[table], table


def test_metrics_csv_files_with_different_headers_parsed_together(tmp_path, monkeypatch):
    """Long-form CSV files whose columns come in different orders: each staged with its own header."""
    a = tmp_path / "a.csv"
    a.write_text("timestamp,host,entity,metric,value\n2026-11-29T00:00:00Z,gpu-1,mlx5_0,optics_rx_power_dbm,-7.9\n")
    b = tmp_path / "b.csv"
    b.write_text(
        "host,metric,value,timestamp,entity,extra\n"
        "gpu-2,optics_rx_power_dbm,-8.1,2026-11-29T00:01:00Z,mlx5_1,x\n"
        "gpu-2,optics_rx_power_dbm,oops,2026-11-29T00:02:00Z,mlx5_1,x\n"
    )
    alone = _store([a, b], monkeypatch, unit_files=1)
    together = _store([a, b], monkeypatch, unit_files=64)
    assert together == alone
    assert [r[1:3] for r in together["rejects"]] == [(3, "value is not a number")]
    assert together["rejects"][0][0] == together["sources"][1][0]  # b's reject, at b's line 3


def _copies(tmp_path: Path, n: int) -> list[Path]:
    src = SYSLOG / "gh-gpu-operator-1146_rfc3164_xid48_xid64.log"
    out = []
    for i in range(n):
        dst = tmp_path / f"node{i}.log"
        shutil.copy(src, dst)
        with open(dst, "a") as f:
            f.write(f"Dec  2 11:40:0{i} worker{i} kernel: message of file {i}\n")  # each its own content
        out.append(dst)
    return out


def test_a_bad_file_among_good_ones_fails_alone_with_its_line(tmp_path, monkeypatch):
    """With --strict a reject fails its file: in a group of good files, only that one fails, its error
    names its own file and line, and every other file loads whole."""
    good = _copies(tmp_path, 5)
    bad = good[2]
    lines = bad.read_text().splitlines(keepends=True)
    lines.insert(2, "this line has no syslog envelope\n")
    bad.write_text("".join(lines))
    monkeypatch.setattr(run, "UNIT_FILES", 64)
    conn = memory_store()
    reports = ingest_paths(conn, good, IngestOptions(strict=True), workers=1)
    by_path = {Path(r.path).name: r for r in reports}
    assert by_path["node2.log"].status == "failed"
    assert by_path["node2.log"].error.startswith(f"{bad}:3: does not match the rfc3164 envelope")
    loaded = [r for r in reports if r.status == "loaded"]
    assert len(loaded) == 4 and all(r.rejected == 0 and r.rows == 10 for r in loaded)
    assert conn.execute("SELECT count(*), count(DISTINCT source_id) FROM events").fetchone() == (40, 4)
    assert conn.execute("SELECT count(*) FROM sources").fetchone() == (4,)

    # without --strict the same file loads, its reject kept at its own line, none on the others
    conn = memory_store()
    reports = ingest_paths(conn, good, IngestOptions(), workers=1)
    assert [(Path(r.path).name, r.status, r.rejected) for r in reports if r.rejected] == [("node2.log", "loaded", 1)]
    rows = conn.execute("SELECT s.path, r.line, r.text FROM rejects r JOIN sources s USING (source_id)").fetchall()
    assert rows == [(str(bad.resolve()), 3, "this line has no syslog envelope")]


def test_a_file_that_breaks_its_group_leaves_the_others_loaded(tmp_path, monkeypatch):
    """--format syslog forced on a folder with a CSV file among syslog files: the group's load fails on
    it, so each file is loaded alone: the CSV fails with its own message, the others load."""
    good = _copies(tmp_path, 4)
    csv = tmp_path / "node1b.csv"
    csv.write_text("timestamp,host,entity,metric,value\n2026-11-29T00:00:00Z,gpu-1,mlx5_0,x,1\n")
    monkeypatch.setattr(run, "UNIT_FILES", 64)
    conn = memory_store()
    reports = ingest_paths(conn, [*good[:2], csv, *good[2:]], IngestOptions(format="syslog"), workers=1)
    assert [(Path(r.path).name, r.status) for r in reports] == [
        ("node0.log", "loaded"),
        ("node1.log", "loaded"),
        ("node1b.csv", "failed"),
        ("node2.log", "loaded"),
        ("node3.log", "loaded"),
    ]
    assert reports[2].error.startswith(f"{csv}: does not look like syslog")
    assert conn.execute("SELECT count(DISTINCT source_id), count(*) FROM events").fetchone() == (4, 40)
