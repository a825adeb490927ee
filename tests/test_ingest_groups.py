"""Small files parsed together (Format.load_group, issue 14 item 2): the same rows as each file alone,
and still one source per file, all or nothing per file, rejects at their own file's line."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths, parse, run, units
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
    monkeypatch.setattr(units, "UNIT_FILES", unit_files)
    monkeypatch.setattr(run, "BATCH_SECONDS", 1e9)  # one batch: the same evidence for every file's year
    conn = memory_store()
    reports = ingest_paths(conn, paths, IngestOptions(**options), workers=1)
    assert [r.status for r in reports].count("failed") == 0, [r.error for r in reports if r.error]
    return {t: conn.execute(f"SELECT {cols} FROM {t} ORDER BY ALL").fetchall() for t, cols in ROWS.items()}


@pytest.mark.heavy
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
    monkeypatch.setattr(units, "UNIT_FILES", 64)
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
    monkeypatch.setattr(units, "UNIT_FILES", 64)
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


# --- job logs (every job-log format shares one load_group) ---------------------------------------------

TRAINING = DATA / "real_samples" / "training"  # real job logs (PROVENANCE.md)
JOB_LOGS = [
    TRAINING / "gh-megatron-lm-756_iteration-lines_ts-seconds.log",  # megatron, dated steps
    TRAINING / "gh-epfllm-megatron-llm-11_iteration-lines_no-timestamp.log",  # megatron, no time at all
    TRAINING / "gh-HuangSeedFund_Evo2_nemo2-async-checkpoint.log",  # nemo
    TRAINING / "gh-mmr-2_deepspeed-log_dist-format.log",  # deepspeed
    TRAINING / "gh-torchtitan-pr1287_steps_and_checkpoint_async.log",  # torchtitan, ranks, async saves
    TRAINING / "gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log",  # orbax, glog stamps without a year
    TRAINING / "gh-cppo-6_childfailederror_sigkill.log",  # torch_log: ChildFailedError block
    TRAINING / "gh-llamafactory-6269_nccl-watchdog-timeout_reduce-scatter.log",  # torch_log: watchdog, glog
    TRAINING / "gh-swiss-ai-megatron-pr46_progress-txt.log",  # megatron progress.txt, job id in the content
    DATA / "real_data" / "mlperf-training-v4.0" / "Google__cloud-tpu-v5p-1024-maxtext__gpt3__result_0.txt",  # mlperf
]
JOB_TABLES = {
    "jobs": "t.job_id, t.name, t.gpus",
    "attempts": "t.job_id, t.attempt, t.start_ts, t.end_ts",
    "steps": "t.* EXCLUDE (source_id)",
    "checkpoints": "t.* EXCLUDE (source_id)",
    "job_incidents": "t.* EXCLUDE (source_id, fields), CAST(t.fields AS VARCHAR)",
    "host_names": "t.host, t.name",
    "rejects": "t.line, t.reason, t.text",
}
JOB_SOURCES = "SELECT path, format, rows, rejected, first_ts, last_ts, hosts, options, source_key FROM sources"


def _job_rows(conn) -> dict[str, dict[str, list]]:
    """Every table a job log writes, by the file (its path) that wrote each row."""
    out: dict[str, dict[str, list]] = {}
    queries = {t: f"SELECT s.path, {c} FROM {t} t JOIN sources s USING (source_id)" for t, c in JOB_TABLES.items()}
    for table, sql in {**queries, "sources": JOB_SOURCES}.items():
        for path, *row in conn.execute(f"{sql} ORDER BY ALL").fetchall():
            out.setdefault(path, {}).setdefault(table, []).append(tuple(row))
    return out


def _ingest_jobs(paths: list[Path], monkeypatch: pytest.MonkeyPatch, unit_files: int = 256, **options) -> tuple:
    """Ingest with one worker, unit_files files per unit: the store's rows by file, the reports, and the
    groups tried (their sizes, and whether the group's load held)."""
    monkeypatch.setattr(units, "UNIT_FILES", unit_files)
    groups: list[tuple[int, bool]] = []
    stage_group = parse._stage_group

    def spy(cur, stores, stage, group, opts):
        staged = stage_group(cur, stores, stage, group, opts)
        groups.append((len(group), staged is not None))
        return staged

    monkeypatch.setattr(parse, "_stage_group", spy)
    conn = memory_store()
    reports = ingest_paths(conn, paths, IngestOptions(**options), workers=1)
    return _job_rows(conn), {Path(r.path).name: r for r in reports}, groups


def _alone(paths: list[Path], monkeypatch: pytest.MonkeyPatch, **options) -> dict[str, dict[str, list]]:
    """Each file parsed on its own (a unit of one file: no group), all into one store."""
    rows, reports, groups = _ingest_jobs(paths, monkeypatch, unit_files=1, **options)
    assert groups == [] and {r.status for r in reports.values()} == {"loaded"}
    return rows


@pytest.mark.heavy
def test_job_logs_of_every_format_parsed_together_give_each_file_its_own_rows(monkeypatch):
    """Real job logs of seven formats, in one group: one load for all of them, and every table holds for
    each file what ingesting it alone gives, row for row (attempts, steps, saves, incidents, notes)."""
    alone = _alone(JOB_LOGS, monkeypatch)
    together, reports, groups = _ingest_jobs(JOB_LOGS, monkeypatch)
    assert groups == [(len(JOB_LOGS), True)]
    assert {r.status for r in reports.values()} == {"loaded"}
    assert len({r.format for r in reports.values()}) == 7
    assert together == alone
    assert sum(len(t.get("steps", [])) for t in together.values()) >= 15  # the comparison compares something
    assert sum(len(t.get("job_incidents", [])) for t in together.values()) >= 2
    # each file's own notes: the year of its glog stamps, its job id taken from its name
    orbax = reports["gh-ml-goodput-pr4_orbax-absl-checkpoint-save.log"]
    assert any("glog time stamps carry no year" in n for n in orbax.notes)
    assert not any("glog" in n for n in reports["gh-mmr-2_deepspeed-log_dist-format.log"].notes)


def _overflowing(tmp_path: Path) -> Path:
    """A Megatron log whose last iteration number does not fit a BIGINT: its parse fails (a parse error)."""
    src = JOB_LOGS[0]
    bad = tmp_path / "bad-iteration.log"
    text = src.read_text()
    last = text.splitlines()[-1]
    bad.write_text(text + last.replace("iteration       ", "iteration 99999999999999999999", 1) + "\n")
    return bad


@pytest.mark.heavy
def test_a_job_log_that_fails_its_group_adds_nothing_and_the_others_load(tmp_path, monkeypatch):
    """One log of the group cannot be parsed: the group's load is rolled back and each file loads alone,
    so the bad one fails with its own message, adds nothing, and the others get their own rows."""
    bad = _overflowing(tmp_path)
    _, reports, _ = _ingest_jobs([bad], monkeypatch)
    assert reports[bad.name].status == "failed" and reports[bad.name].error.startswith(f"{bad}: could not be loaded")
    paths = [*JOB_LOGS[:3], bad, *JOB_LOGS[3:]]
    together, reports, groups = _ingest_jobs(paths, monkeypatch)
    assert groups == [(len(paths), False)]  # tried together, then one by one
    assert reports[bad.name].status == "failed" and reports[bad.name].error.startswith(f"{bad}: could not be loaded")
    assert str(bad.resolve()) not in together
    assert together == _alone(JOB_LOGS, monkeypatch)
    assert [r.status for r in reports.values()].count("loaded") == len(JOB_LOGS)


@pytest.mark.heavy
def test_a_rejected_job_log_fails_alone_in_its_group(tmp_path, monkeypatch):
    """--strict: a log with a cut iteration line fails on its reject, at its own line; the group's other
    files load whole, their rows those of each file alone."""
    cut = tmp_path / "cut-iteration.log"
    lines = JOB_LOGS[0].read_text().splitlines(keepends=True)
    lines.insert(2, lines[2].split("| elapsed time")[0] + "\n")
    cut.write_text("".join(lines))
    paths = [*JOB_LOGS, cut]
    together, reports, groups = _ingest_jobs(paths, monkeypatch, strict=True)
    assert groups == [(len(paths), True)]
    assert reports[cut.name].status == "failed"
    assert reports[cut.name].error.startswith(f"{cut}:3: Megatron iteration line without its elapsed time")
    assert str(cut.resolve()) not in together
    assert together == _alone(JOB_LOGS, monkeypatch, strict=True)
    # without --strict it loads, its reject at its own line 3 and none on the others
    together, reports, _ = _ingest_jobs(paths, monkeypatch)
    assert [(name, r.rejected) for name, r in reports.items() if r.rejected] == [(cut.name, 1)]
    assert together[str(cut.resolve())]["rejects"][0][0] == 3


def test_job_logs_ingested_again_in_a_group_add_nothing(monkeypatch):
    """Each grouped log keeps its own source key: ingesting the same logs again skips every one."""
    monkeypatch.setattr(units, "UNIT_FILES", 256)
    conn = memory_store()
    assert {r.status for r in ingest_paths(conn, JOB_LOGS, IngestOptions(), workers=1)} == {"loaded"}
    before = _job_rows(conn)
    again = ingest_paths(conn, JOB_LOGS, IngestOptions(), workers=1)
    assert {r.status for r in again} == {"skipped"}
    assert _job_rows(conn) == before


def test_units_are_cut_by_text_so_gzipped_files_share_units_as_their_lines_weigh(tmp_path, monkeypatch):
    """A unit's memory is its lines: a gzip file counts what its trailer says it holds, not its bytes on
    disk (~9x fewer); a FIFO is not opened."""
    monkeypatch.setattr(units, "UNIT_TEXT_BYTES", 100_000)
    lines = "".join(f"2026-11-02T00:00:{i % 60:02d}Z,gpu-001,mlx5_0,optics_rx_power_dbm,-1.5\n" for i in range(1000))
    plain, packed = [], []
    for k in range(4):
        (p := tmp_path / f"plain-{k}.csv").write_text(lines)  # ~60 kB of text each
        (g := tmp_path / f"packed-{k}.csv.gz").write_bytes(gzip.compress(lines.encode()))
        plain.append(p)
        packed.append(g)
    assert all(g.stat().st_size < 10_000 for g in packed)  # on disk, ten would fit in a unit
    assert units.work_units(plain) == [[0], [1], [2], [3]]
    assert units.work_units(packed) == [[0], [1], [2], [3]]  # as their lines weigh
    monkeypatch.setattr(units, "UNIT_TEXT_BYTES", 130_000)
    assert units.work_units(packed) == [[0, 1], [2, 3]]
    os.mkfifo(fifo := tmp_path / "fifo")
    assert units._sizes(fifo) == (0, 0)  # answered without opening it (which would block)
