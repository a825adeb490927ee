"""A file that grows, ingested after each step (as `ingest --follow` does), ends with the rows a one-shot
ingest of its final content gives, row for row, for every format (issue 16 item 3).

Line-oriented formats whose lines load on their own (syslog with wall-clock times, journald JSON, a
metrics CSV, gnmic JSON Lines) load only the new lines at each step: one source per step. The others
(job logs: times inferred from neighbouring lines, attempts and saves spanning lines; a dmesg placed from
its last line; sacct and other snapshots) are read again whole, the new source replacing the old.
The inputs are real samples of tests/data, cut at line ends into steps.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import FileReport, ingest_paths
from synestra_cli.store import open_store
from synestra_cli.store.sources import BOOKKEEPING_TABLES, sourced_tables

DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "real_samples"
OPTIONS = IngestOptions(year=2026)


def _rows(db: Path) -> dict[str, list[tuple]]:
    """Every row of every sourced table, with its file's path instead of its source id."""
    with open_store(db, read_only=True) as c:
        return {
            t.name: c.execute(
                f"SELECT s.path, t.* EXCLUDE (source_id) FROM {t.name} t JOIN sources s USING (source_id) ORDER BY ALL"
            ).fetchall()
            for t in sourced_tables(c)
            if t.name not in BOOKKEEPING_TABLES
        }


def _cuts(data: bytes, steps: int) -> list[int]:
    """`steps` prefix lengths, each at a line end, the last the whole file."""
    ends = [m.end() for m in re.finditer(rb"\n", data)]
    picks = sorted({ends[min(len(ends) - 1, (len(ends) * k) // steps)] for k in range(1, steps)})
    return [*[c for c in picks if c < len(data)], len(data)]


def _grow(data: bytes, where: Path, name: str, steps: int, options: IngestOptions = OPTIONS) -> list[FileReport]:
    """Write `data` to where/name in `steps` appends, ingesting it after each (into where/../grown.duckdb);
    then ingest the final content once into one-shot.duckdb. Returns the grown file's reports."""
    where.mkdir()
    path, db, reports, written = where / name, where.parent / "grown.duckdb", [], 0
    for cut in _cuts(data, steps):
        with open(path, "ab") as f:
            f.write(data[written:cut])
        written = cut
        reports += ingest_paths(db, [path], options)
    assert [r.status for r in reports] == ["loaded"] * len(reports), [r.error for r in reports]
    copy = where.parent / "final"
    copy.mkdir()
    shutil.copy2(path, copy / name)  # the same mtime: formats that place lines by it place them alike
    assert all(r.status == "loaded" for r in ingest_paths(where.parent / "one-shot.duckdb", [copy], options))
    return reports


def _assert_same_rows(tmp_path: Path) -> dict[str, list[tuple]]:
    here, there = str(tmp_path / "watched"), str(tmp_path / "final")
    grown = {t: sorted(rs, key=repr) for t, rs in _rows(tmp_path / "grown.duckdb").items()}
    one = {
        t: sorted(((r[0].replace(there, here), *r[1:]) for r in rs), key=repr)
        for t, rs in _rows(tmp_path / "one-shot.duckdb").items()
    }
    assert grown == one
    assert sum(map(len, grown.values())) > 0
    return grown


def _sources(tmp_path: Path) -> list[tuple]:
    with open_store(tmp_path / "grown.duckdb", read_only=True) as c:
        return c.execute("SELECT source_id, offset_bytes, first_line, rows FROM sources ORDER BY 1").fetchall()


def _appended(reports: list[FileReport], tmp_path: Path) -> None:
    """Every step after the first loaded only its new lines: one source per step, each from where the
    one before ended."""
    assert all(any("only its new lines" in n for n in r.notes) for r in reports[1:]), [r.notes for r in reports]
    sources = _sources(tmp_path)
    assert len(sources) == len(reports) and sources[0][1] == 0 and all(s[1] > 0 for s in sources[1:])


def _read_again_whole(reports: list[FileReport], tmp_path: Path) -> None:
    again = ("read again whole", "replaces them")  # the latter: recognised as another format once grown
    assert all(any(a in n for n in r.notes for a in again) for r in reports[1:]), [r.notes for r in reports]
    assert len(_sources(tmp_path)) == 1  # each step replaced the one before


# --- loaded by their new lines --------------------------------------------------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize(
    "sample",
    [
        DATA / "real_data/loghub-2k/Linux/Linux_2k.log",  # RFC 3164, no year
        SAMPLES / "syslog/gh-grc-202_rsyslog-rfc3339-default.log",
        SAMPLES / "syslog/gpud_dmesg-ctime_xid119_gsp.log",  # dmesg -T: wall-clock times
        SAMPLES / "syslog/gpud_dev-kmsg-raw.log",
    ],
    ids=lambda p: p.name[:40],
)
def test_a_grown_syslog_loads_its_new_lines_with_the_rows_of_a_one_shot(tmp_path, sample):
    reports = _grow(sample.read_bytes(), tmp_path / "watched", sample.name, 4)
    _assert_same_rows(tmp_path)
    if "kmsg" in sample.name:  # /dev/kmsg: seconds since boot, placed from the mtime: read again whole
        _read_again_whole(reports, tmp_path)
    else:
        _appended(reports, tmp_path)


def test_a_grown_journald_json_loads_its_new_lines(tmp_path):
    """`journalctl -o json` (one object per line, every value a string) of the lines of two real kernel
    journals (Xid 120/62/154/45 on one GPU; Xid 45 after 149 on several), a second apart."""
    lines = []
    for name in (
        "nvidia-forum-364958_journal_xid120_xid62_xid154_xid45.log",
        "gh-cubecos-733_journal_mlx5e-link-up-flap.log",
    ):
        for line in (SAMPLES / "syslog" / name).read_text().splitlines():
            m = re.match(r"\w{3} +\d+ [\d:]+ (?:([^\s:]+) )?([^\s:\[]+)(?:\[(\d+)\])?: (.*)", line)
            if not m:
                continue
            usec = str(1_764_410_400_000_000 + len(lines) * 1_000_000)
            rec = {"__REALTIME_TIMESTAMP": usec, "_HOSTNAME": m[1] or "gpu-017", "SYSLOG_IDENTIFIER": m[2]}
            lines.append(
                json.dumps({**rec, "PRIORITY": "3", **({"_PID": m[3]} if m[3] else {}), "MESSAGE": m[4]}) + "\n"
            )
    assert len(lines) >= 10
    reports = _grow("".join(lines).encode(), tmp_path / "watched", "journal.json", 3)
    grown = _assert_same_rows(tmp_path)
    _appended(reports, tmp_path)
    assert len(grown["events"]) == len(lines)


PROM_LINE = re.compile(r"^(\w+)\{([^}]*)\} (\S+)$")


def _dcgm_samples() -> list[tuple[str, str, str, str]]:
    """(host, entity, metric, value) of every sample of a real dcgm-exporter scrape (A800 MIG)."""
    out = []
    for line in (SAMPLES / "dcgm/notes-a800-mig_dcgm-exporter_process-name-label.prom").read_text().splitlines():
        m = PROM_LINE.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m[2]))
            entity = f"gpu{labels['gpu']}/{labels.get('GPU_I_ID', '')}"
            out.append((labels["Hostname"], entity, m[1], m[3]))
    return out


@pytest.mark.heavy
def test_a_grown_metrics_csv_reads_its_new_lines_with_the_header_and_drops_what_repeats_earlier_lines(tmp_path):
    """The long CSV a site exports every scrape (here the samples of a real dcgm-exporter scrape, once a
    minute). An exporter restarted mid-scrape writes some of the last scrape's lines again: same value
    (dropped) or another (rejected, the first kept), across the steps as within one file."""
    samples = _dcgm_samples()
    assert len(samples) > 10
    rows = ["timestamp,host,entity,metric,value\n"]
    for minute in range(6):
        ts = f"2026-11-29T10:{minute:02d}:00Z"
        rows += [f"{ts},{h},{e},{m},{float(v) + minute}\n" for h, e, m, v in samples]
        if minute in (2, 4):  # the restart: the last scrape's first lines again, the second one changed
            rows += [f"{ts},{h},{e},{m},{float(v) + minute + (k == 1)}\n" for k, (h, e, m, v) in enumerate(samples[:3])]
    data = "".join(rows).encode()
    # cut just before each restart's repeated lines: they load in the next step, against the earlier ones
    reports = _grow(data, tmp_path / "watched", "dcgm-long.csv", 6)
    grown = _assert_same_rows(tmp_path)
    _appended(reports, tmp_path)
    assert len(grown["metrics"]) == 6 * len(samples)
    with open_store(tmp_path / "grown.duckdb", read_only=True) as c:
        grown_rejected = c.execute("SELECT sum(rejected) FROM sources").fetchone()[0]
    with open_store(tmp_path / "one-shot.duckdb", read_only=True) as c:
        assert grown_rejected == c.execute("SELECT sum(rejected) FROM sources").fetchone()[0] == 2


def test_a_grown_metrics_csv_whose_repeat_falls_across_steps_keeps_the_earlier_sample(tmp_path):
    header = "timestamp,host,entity,metric,value\n"
    at, temp = "2026-11-29T10:00:00Z,gpu-001", "DCGM_FI_DEV_GPU_TEMP"
    first = f"{at},gpu0,{temp},61\n{at},gpu1,{temp},62\n"
    again = f"{at},gpu0,{temp},61\n{at},gpu1,{temp},70\n"  # the same sample, and one changed
    later = f"2026-11-29T10:01:00Z,gpu-001,gpu0,{temp},63\n"
    where = tmp_path / "watched"
    where.mkdir()
    path, db = where / "m.csv", tmp_path / "grown.duckdb"
    path.write_text(header + first)
    ingest_paths(db, [path], OPTIONS)
    with open(path, "a") as f:
        f.write(again + later)
    (report,) = ingest_paths(db, [path], OPTIONS)
    assert report.rows == 1 and report.rejected == 1  # the new sample; the changed repeat rejected
    assert "kept the first, 62.0; rejected 70.0" in report.reject_samples[0][1]
    assert any("repeat the earlier lines'" in n for n in report.notes)
    with open_store(db, read_only=True) as c:
        assert c.execute("SELECT entity, value FROM metrics ORDER BY ts, entity").fetchall() == [
            ("gpu0", 61.0),
            ("gpu1", 62.0),
            ("gpu0", 63.0),
        ]


def test_a_grown_gnmic_json_lines_file_loads_its_new_lines(tmp_path):
    """gnmic's file output with `multiline: false`: one event per line (the real event of the sample,
    one a second, its value moving)."""
    (event,) = json.loads((SAMPLES / "fabric/gh-gnmic-613_event-format_psu.json").read_text())
    lines = []
    for i in range(12):
        values = {k: v + i / 10 for k, v in event["values"].items()}
        lines.append(json.dumps({**event, "timestamp": event["timestamp"] + i * 10**9, "values": values}) + "\n")
    reports = _grow("".join(lines).encode(), tmp_path / "watched", "gnmic.json", 4)
    grown = _assert_same_rows(tmp_path)
    _appended(reports, tmp_path)
    assert len(grown["metrics"]) == 12


# --- read again whole: the rows of a line depend on other lines -------------------------------------------


def test_an_indented_gnmic_array_file_is_read_again_whole(tmp_path):
    event = json.loads((SAMPLES / "fabric/gh-gnmic-613_event-format_psu.json").read_text())[0]
    arrays = [json.dumps([{**event, "timestamp": event["timestamp"] + i * 10**9}], indent=2) + "\n" for i in range(4)]
    reports = _grow("".join(arrays).encode(), tmp_path / "watched", "gnmic.json", 2)
    _assert_same_rows(tmp_path)
    _read_again_whole(reports, tmp_path)


@pytest.mark.parametrize(
    "sample",
    [
        SAMPLES / "syslog/gh-dxvk-1027_dmesg_xid31_xid13_xid32.log",  # seconds since boot
        DATA / "real_data/mlperf-training-v4.0/Dell__XE9680x8H100-SXM-80GB__llama2_70b_lora__result_0.txt",
        SAMPLES / "training/gh-torchtitan-pr1287_steps_and_checkpoint_async.log",
        SAMPLES / "training/gh-mmdetection-6779_torchelastic-restart_pylogging-format.log",
        SAMPLES / "training/tdhock-slurm_sacct-P_array-steps_pending-range.txt",
    ],
    ids=lambda p: p.name[:40],
)
def test_a_grown_file_whose_lines_need_the_others_is_read_again_whole_with_the_rows_of_a_one_shot(tmp_path, sample):
    reports = _grow(sample.read_bytes(), tmp_path / "watched", sample.name, 3)
    _assert_same_rows(tmp_path)
    _read_again_whole(reports, tmp_path)


def test_a_grown_parquet_metrics_file_is_not_read_by_lines(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from synestra_cli.formats.telemetry import metrics_long

    path = tmp_path / "m.parquet"
    pq.write_table(
        pa.table(
            {"timestamp": ["2026-11-29T10:00:00Z"], "host": ["a"], "entity": ["b"], "metric": ["c"], "value": [1.0]}
        ),
        path,
    )
    assert not metrics_long.FORMAT.resumes(path)
    csv = tmp_path / "m.csv"
    csv.write_text("timestamp,host,entity,metric,value\n")
    assert metrics_long.FORMAT.resumes(csv)


@pytest.mark.parametrize("rotation", ["rename", "copytruncate"])
def test_a_file_rotated_while_it_loads_fails_and_its_content_loads_at_the_next_ingest(tmp_path, monkeypatch, rotation):
    """logrotate renames the file (or copies and truncates it) while a poll reads it: the rows parsed
    were of the new file under the old content's sha256, so the moved content was then skipped as
    already in the store and its lines were lost (issue 16's 25-minute follow run). Now the file fails,
    nothing of it is kept, and the next ingest loads every line."""
    from synestra_cli.ingest import parse

    lines = (DATA / "real_data/loghub-2k/Linux/Linux_2k.log").read_bytes().splitlines(keepends=True)[:302]
    watched = tmp_path / "watched"
    watched.mkdir()
    log, moved = watched / "messages", watched / "messages.1"
    log.write_bytes(b"".join(lines[:200]))
    db = tmp_path / "store.duckdb"
    assert [r.status for r in ingest_paths(db, [log], OPTIONS)] == ["loaded"]
    with log.open("ab") as f:
        f.write(b"".join(lines[200:300]))

    digest_for = parse.digest_for

    def rotated_after_hashing(*args):
        digest = digest_for(*args)
        if rotation == "rename":
            log.rename(moved)
        else:
            shutil.copy2(log, moved)
        log.write_bytes(b"".join(lines[300:]))  # the writer's first lines in the new file
        return digest

    monkeypatch.setattr(parse, "digest_for", rotated_after_hashing)
    (report,) = ingest_paths(db, [log], OPTIONS)
    assert report.status == "failed" and "while it loaded" in report.error
    monkeypatch.setattr(parse, "digest_for", digest_for)
    ingest_paths(db, [moved, log], OPTIONS)
    with open_store(db, read_only=True) as c:
        kept = c.execute("SELECT count(*) FROM events").fetchone()[0]
    clean = tmp_path / "clean.duckdb"
    ingest_paths(clean, [tmp_path / "watched"], OPTIONS)
    with open_store(clean, read_only=True) as c:
        assert kept == c.execute("SELECT count(*) FROM events").fetchone()[0] >= 250  # every line's event
