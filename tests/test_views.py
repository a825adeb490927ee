"""Answers that travel (issue 34): one evidence set in every view, output that survives pipes, a picture
and a packet that stand alone, annotations that can be re-posted."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import copy_sample_store

from synestra_cli.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
TRUTH = json.loads((ROOT / "sample_data" / "truth.json").read_text())
SYNESTRA = shutil.which("synestra") or str(Path(sys.executable).parent / "synestra")


@pytest.fixture(scope="module")
def db(tmp_path_factory, sample_store_template) -> str:
    return str(copy_sample_store(sample_store_template, tmp_path_factory.mktemp("views")))


def run(db: str, *args: str, width: str = "400") -> str:
    res = CliRunner().invoke(cli, [*args, "--db", db], env={"COLUMNS": width, "SYNESTRA_KEPT": "0"})
    assert res.exit_code == 0, res.output
    return res.stdout


def figures(chain: list[dict]) -> list[tuple]:
    """What a reader compares between views: each metric link's where, values and baseline."""
    out = []
    for lk in chain:
        ev = lk["evidence"]
        if ev.get("type") == "metric":
            out.append((lk["host"], lk["entity"], ev["metric"], ev["before"], ev["after"], str(lk["time"])))
    return out


def noted(before: float, after: float) -> str:
    def num(v: float) -> str:
        return f"{v:.3g}"

    return f"{num(before)} -> {num(after)}"


@pytest.mark.heavy
def test_every_view_of_every_sample_checkpoint_gives_the_same_figures(db):
    whole = {j["job"]: json.loads(run(db, "explain", "--job", j["job"], "--format", "json")) for j in TRUTH["jobs"]}
    compared = 0
    for job, doc in whole.items():
        tree = run(db, "explain", "--job", job)
        ticket = run(db, "explain", "--job", job, "--format", "markdown")
        notes = json.loads(run(db, "annotations", "--job", job))["annotations"]
        for cp in (c for c in doc["checkpoints"] if c["cause"]):
            one = json.loads(run(db, "explain", "--job", job, "--checkpoint", str(cp["iteration"]), "--format", "json"))
            same = next(c for c in one["checkpoints"] if c["kind"] == cp["kind"] and c["start"] == cp["start"])
            assert same["cause"]["first_signal"] == cp["cause"]["first_signal"], (job, cp["iteration"])
            assert figures(same["chain"]) == figures(cp["chain"]), (job, cp["iteration"])
            one_tree = run(db, "explain", "--job", job, "--checkpoint", str(cp["iteration"]))
            for lk in cp["chain"][:3]:
                ev = lk["evidence"]
                if ev.get("type") == "metric" and lk["layer"] != "throughput" and ev["unit"] != "per_second":
                    words = lk["signal"]
                    assert words in tree and words in one_tree and words in ticket, (job, words)
            ms = round(datetime.fromisoformat(cp["cause"]["first_signal"].replace("Z", "+00:00")).timestamp() * 1000)
            assert any(a["time"] == ms and "cause" in a["tags"] for a in notes), (job, cp["iteration"])
            compared += 1
    assert compared >= 10


@pytest.mark.heavy
def test_job_1003_s_save_at_1802_reads_what_its_samples_say(db):
    doc = json.loads(run(db, "explain", "--job", "1003", "--checkpoint", "1802", "--format", "json"))
    cp = doc["checkpoints"][0]
    hot = next(
        lk
        for lk in cp["chain"]
        if lk["host"] == "gpu-001"
        and lk["entity"] == "gpu0"
        and lk["evidence"].get("metric") == "gpu_memory_temp_celsius"
    )
    ev = hot["evidence"]
    assert (
        81 <= ev["before"] <= 84
    )  # the samples before the event read 81-84 (not the hang's 74, nor 61 between attempts)
    assert ev["peak"] == 95 or ev["peak"] >= 94
    base = ev["baseline"]
    # taken before the fault: the samples before the series first crossed its threshold
    assert base["samples"] >= 20 and base["from"] < base["to"] < hot["time"]
    assert noted(ev["before"], ev["after"]) in hot["signal"].replace(" C", "")
    # the tree, the ticket and the picture's data say the same
    assert hot["signal"] in run(db, "explain", "--job", "1003")
    assert hot["signal"] in run(db, "explain", "--job", "1003", "--format", "markdown")


@pytest.mark.heavy
def test_the_watchdog_timeouts_follow_the_xid_that_caused_them(db):
    doc = json.loads(run(db, "explain", "--job", "1003", "--checkpoint", "1950", "--format", "json"))
    # iteration 1950 is both the routine save before the Xid and the restart's restore: the restore's chain
    restore = next(c for c in doc["checkpoints"] if c["kind"] == "restore")
    layers = [lk["layer"] for lk in restore["chain"]]
    assert layers.index("gpu") < layers.index("collective")
    ticket = run(db, "explain", "--job", "1003", "--checkpoint", "1950", "--format", "markdown")
    assert ticket.index("Xid 79") < ticket.index("nccl_timeout")
    assert str(ROOT) not in ticket and "anchors.md" not in ticket


# Every command that reads the store, in every format a script may pipe: (args, an id its whole output must
# hold). The binary ones by their magic bytes: a PNG, a gzip stream (the packet).
WALK: list[tuple[list[str], str | bytes]] = [
    (["sources"], "sacct.txt"),
    (["sources", "--format", "csv"], "source_id"),
    (["sources", "--format", "json"], "source_id"),
    (["jobs"], "1003"),
    (["jobs", "--format", "csv"], "1003"),
    (["jobs", "--format", "json"], "1003"),
    (["jobs", "--job", "1003"], "1003"),
    (["jobs", "--job", "1003", "--format", "csv"], "1003"),
    (["jobs", "--job", "1003", "--format", "json"], "synestra.attempts/"),
    (["explain", "--job", "1003"], "rack-01"),
    (["explain", "--job", "1003", "--format", "json"], "rack-01"),
    (["explain", "--job", "1003", "--format", "jsonl"], "rack-01"),
    (["explain", "--job", "1003", "--format", "csv"], "cooling.thermal"),
    (["explain", "--job", "1003", "--format", "markdown"], "GPU-5c36f096"),
    (["explain", "--all"], "1008"),
    (["explain", "--all", "--format", "jsonl"], "1008"),
    (["tax-report", "--all"], "1003"),
    (["tax-report", "--all", "--format", "csv"], "1003"),
    (["tax-report", "--all", "--format", "json"], "1003"),
    (["fleet"], "cooling.thermal"),
    (["fleet", "--format", "csv"], "gpu-004:mlx5_0"),
    (["fleet", "--format", "json"], "gpu-004:mlx5_0"),
    (["fleet", "--format", "slurm"], "NodeName=gpu-004"),
    (["fleet", "--format", "kubernetes"], "kubectl cordon gpu-004"),
    (["fleet", "--format", "hostlist"], "gpu-[001-004]"),
    (["risks", "--at", "2026-11-03T05:19:00"], "gpu-004:mlx5_0"),
    (["risks", "--at", "2026-11-03T05:19:00", "--format", "csv"], "gpu-004:mlx5_0"),
    (["risks", "--at", "2026-11-03T05:19:00", "--format", "json"], "gpu-004:mlx5_0"),
    (["annotations", "--job", "1003"], "synestra-id:"),
    (["annotations", "--job", "1003", "--format", "jsonl"], "synestra-id:"),
    (["annotations", "--job", "1003", "--format", "json-datasource"], "isRegion"),
    (["sql", "SELECT source_id, path FROM sources"], "sacct.txt"),
    (["sql", "SELECT source_id, path FROM sources", "--format", "csv"], "sacct.txt"),
    (["sql", "SELECT source_id, path FROM sources", "--format", "json"], "sacct.txt"),
    (["sql", "SELECT source_id, path FROM sources", "--format", "jsonl"], "sacct.txt"),
    (["formats"], "sacct"),
    (["formats", "--format", "csv"], "sacct"),
    (["formats", "--format", "json"], "sacct"),
    (["timeline", "--job", "1003", "-o", "-"], "Job 1003"),
    (["timeline", "--job", "1003", "-o", "-", "--format", "svg"], "Job 1003"),
    (["timeline", "--job", "1003", "-o", "-", "--format", "png"], b"\x89PNG\r\n\x1a\n"),
    (["packet", "--job", "1003", "-o", "-"], b"\x1f\x8b"),
]


def walk(args: list[str], ident: str | bytes, env: dict[str, str], where: str = "stdout", fresh=None) -> None:
    """The command whole (exit 0, no traceback, the id in its output), then piped into head -1 (exit 0
    and quiet: SIGPIPE is no error). `fresh` prepares what a writing command changes, before each run."""
    if fresh:
        fresh()
    whole = subprocess.run([SYNESTRA, *args], env=env, capture_output=True, timeout=300)
    stderr = whole.stderr.decode(errors="replace")
    assert whole.returncode == 0 and "Traceback" not in stderr, stderr
    out = whole.stdout if where == "stdout" else whole.stderr
    if isinstance(ident, bytes):
        assert out.startswith(ident), (args, out[:20])
    else:
        assert ident in out.decode(), (args, out[:500])
    if fresh:
        fresh()
    line = " ".join(subprocess.list2cmdline([a]) for a in [SYNESTRA, *args])
    piped = subprocess.run(
        ["bash", "-c", f'{line} | head -1 >/dev/null; echo "rc=${{PIPESTATUS[0]}}"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.stdout.rstrip().endswith("rc=0"), (args, piped.stdout[-300:], piped.stderr)
    assert "Traceback" not in piped.stderr and "Broken pipe" not in piped.stderr, piped.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("args,ident", WALK, ids=[" ".join(a[:5]) for a, _ in WALK])
def test_every_command_and_format_at_80_columns_and_into_head(db, args, ident):
    walk(args, ident, {**os.environ, "COLUMNS": "80", "SYNESTRA_DB": db})


EXPORTS = ROOT / "sample_data" / "exports"
SACCT, TOPOLOGY = str(EXPORTS / "sacct.txt"), str(EXPORTS / "topology.csv")
# The commands that write (a store, a lake, a simulation) in each format: (args, the id, where it is: the
# table reports go to stderr, the documents to stdout; what to make afresh before each run).
WRITES: list[tuple[list[str], str, str, str]] = [
    (["ingest", SACCT, TOPOLOGY, "--db", "{tmp}/w.duckdb"], "sacct.txt", "stderr", "nothing"),
    (
        ["ingest", SACCT, TOPOLOGY, "--db", "{tmp}/w.duckdb", "--format", "json"],
        "synestra.ingest/1",
        "stdout",
        "nothing",
    ),
    (["ingest", SACCT, TOPOLOGY, "--db", "{tmp}/w.duckdb", "--format", "csv"], "sacct.txt", "stdout", "nothing"),
    (["forget", TOPOLOGY, "--db", "{tmp}/w.duckdb"], "topology.csv", "stderr", "store"),
    (["forget", TOPOLOGY, "--db", "{tmp}/w.duckdb", "--format", "json"], "synestra.forget/1", "stdout", "store"),
    (["forget", TOPOLOGY, "--db", "{tmp}/w.duckdb", "--format", "csv"], "topology.csv", "stdout", "store"),
    (["compact", "--db", "{tmp}/lake/"], "compacted", "stderr", "lake"),
    (["compact", "--db", "{tmp}/lake/", "--format", "json"], "synestra.compact/1", "stdout", "lake"),
    (
        ["simulate", "{tmp}/sim", "--scenario", "routine", "--nodes", "4", "--hours", "1"],
        "synestra.simulate/1",
        "stdout",
        "nothing",
    ),
]


@pytest.mark.heavy
@pytest.mark.parametrize("args,ident,where,made", WRITES, ids=[" ".join(a[:1] + a[-2:]) for a, *_ in WRITES])
def test_every_writing_command_and_format_at_80_columns_and_into_head(tmp_path, args, ident, where, made):
    def fresh() -> None:
        for old in (tmp_path / n for n in ("w.duckdb", "w.duckdb.wal", "lake", "sim")):
            if old.is_dir():
                shutil.rmtree(old)
            old.unlink(missing_ok=True)
        if made != "nothing":
            into = str(tmp_path / "w.duckdb") if made == "store" else f"{tmp_path}/lake/"  # the / makes a lake
            res = CliRunner().invoke(cli, ["ingest", SACCT, TOPOLOGY, "--db", into])
            assert res.exit_code == 0, res.output
        if made == "lake":  # a second load: small parts to compact
            res = CliRunner().invoke(cli, ["ingest", str(EXPORTS / "syslog"), "--db", into])
            assert res.exit_code == 0, res.output

    env = {k: v for k, v in os.environ.items() if not k.startswith("SYNESTRA_")}
    walk([a.replace("{tmp}", str(tmp_path)) for a in args], ident, {**env, "COLUMNS": "80"}, where, fresh)


def test_an_unknown_extension_or_a_missing_folder_is_one_line_and_exit_2(tmp_path):
    for target, words in ((tmp_path / "x.jpg", "unknown extension"), (tmp_path / "no" / "x.html", "does not exist")):
        res = CliRunner().invoke(
            cli, ["timeline", "--job", "1003", "-o", str(target), "--db", str(tmp_path / "s.duckdb")]
        )
        assert res.exit_code == 2 and words in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert not target.exists()


def test_a_store_file_named_as_a_folder_is_one_line_not_a_traceback(tmp_path):
    store = tmp_path / "s.duckdb"
    assert CliRunner().invoke(cli, ["ingest", TOPOLOGY, "--db", str(store)]).exit_code == 0
    for args in (["sources"], ["compact"], ["ingest", TOPOLOGY]):
        res = CliRunner().invoke(cli, [*args, "--db", f"{store}/"])
        assert res.exit_code == 8 and "drop the trailing /" in res.stderr, res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)


def test_a_mistyped_command_gets_a_suggestion():
    res = CliRunner().invoke(cli, ["explian", "--job", "1"])
    assert res.exit_code == 2 and "Did you mean explain?" in res.stderr


def test_since_24h_is_a_day_ago():
    from synestra_cli.cli.options import parse_time

    now = datetime(2026, 11, 3, 12, 0)
    assert parse_time("24h", now) == datetime(2026, 11, 2, 12, 0) == parse_time("-24h", now)
    assert parse_time("30m", now) == datetime(2026, 11, 3, 11, 30)
    assert parse_time("7d", now) == datetime(2026, 10, 27, 12, 0)


@pytest.mark.heavy
def test_the_packet_holds_the_job_s_evidence_and_nothing_else_and_is_the_same_twice(db, tmp_path):
    a, b = tmp_path / "a.tar.gz", tmp_path / "b.tar.gz"
    for out in (a, b):
        res = CliRunner().invoke(cli, ["packet", "--job", "1003", "--checkpoint", "1950", "-o", str(out), "--db", db])
        assert res.exit_code == 0, res.output
    assert a.read_bytes() == b.read_bytes()  # deterministic: sorted members, fixed times
    with tarfile.open(a) as tar:
        names = tar.getnames()
        assert names == sorted(names)
        assert {n.split("/", 1)[1] for n in names} == {
            "README.txt",
            "ticket.md",
            "timeline.png",
            "explain.json",
            "evidence.txt",
            "assets.json",
            "sources.json",
        }
        assert all(m.mtime == tar.getmembers()[0].mtime and m.uname == "" for m in tar.getmembers())
        read = {n.split("/", 1)[1]: tar.extractfile(n).read() for n in names}  # type: ignore[union-attr]
    evidence = read["evidence.txt"].decode()
    assert re.search(r"^>\s+20  .*Xid \(PCI:0000:18:00\): 79", evidence, re.M)  # the cited line, marked, with context
    assets = json.loads(read["assets.json"])["assets"]
    assert any(x.get("uuid") == "GPU-5c36f096-d9c7-237f-03e1-ec96ac7910c0" and x.get("serial") for x in assets)
    sources = json.loads(read["sources.json"])["sources"]
    assert sources and all(len(s["sha256"]) == 64 for s in sources)
    assert all(set(s["hosts"] or []) <= {"gpu-001", "gpu-002"} for s in sources)  # the job's hosts only
    assert "Left out, and why" in read["README.txt"].decode()
    assert read["timeline.png"][:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.heavy
def test_the_packet_hashes_the_files_the_figures_come_from(db):
    """The thermal cause of job 1003's save at 1802 is DCGM samples, not log lines: the packet's sources
    are those files too (the ones holding the chains' series), and only the job's hosts'."""
    from synestra_cli.accounting.checkpoint_tax import explain_with_tax
    from synestra_cli.explain import packet
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        job = explain_with_tax(conn, "1003")
        series = packet.metric_series(job, 1802)
        paths = packet.metric_sources(conn, series)
        rows, _ = packet.sources(conn, paths)
    assert {(h, m) for h, _, m, _, _ in series} >= {("gpu-001", "gpu_memory_temp_celsius")}
    assert [Path(p).name for p in paths] == ["gpu-001.prom.gz", "gpu-002.prom.gz"]
    assert all(set(r["hosts"]) <= {"gpu-001", "gpu-002"} and len(r["sha256"]) == 64 for r in rows)


@pytest.mark.heavy
def test_the_picture_s_title_spans_the_job_not_its_saves(db):
    """Job 1003 started at 09:05 (its start-up is drawn there) and saved first at 09:23: the title says
    when the job ran, from its first attempt's start to its last attempt's end."""
    from synestra_cli.explain.timeline import build
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        tl = build(conn, "1003")
    first, last = min(a["start"] for a in tl.attempts), max(a["end"] for a in tl.attempts)
    assert tl.headline["title"].endswith(f"{first:%Y-%m-%dT%H:%M:%S}Z .. {last:%Y-%m-%dT%H:%M:%S}Z"), tl.headline
    assert "T09:05:00Z .. " in tl.headline["title"]


@pytest.mark.heavy
def test_annotations_carry_a_stable_id_and_a_dashboard(db):
    first = json.loads(run(db, "annotations", "--job", "1003", "--dashboard-uid", "abc", "--panel-id", "2"))[
        "annotations"
    ]
    again = json.loads(run(db, "annotations", "--job", "1003", "--dashboard-uid", "abc", "--panel-id", "2"))[
        "annotations"
    ]
    ids = [next(t for t in a["tags"] if t.startswith("synestra-id:")) for a in first]
    assert len(set(ids)) == len(ids) and first == again
    assert all(a["dashboardUID"] == "abc" and a["panelId"] == 2 for a in first)
    listed = json.loads(run(db, "annotations", "--job", "1003", "--format", "json-datasource"))
    assert all({"time", "timeEnd", "title", "text", "tags", "isRegion"} <= set(a) for a in listed)


MARKUP = "[bold]x[/]"  # what rich would style (and swallow) if a table took store text as markup


@pytest.mark.heavy
def test_fleet_and_risks_show_store_text_as_text_not_markup(db, capsys, monkeypatch):
    """A host, a cause or a reason is the store's text (from logs anyone can write): the human views show
    its brackets as they are. The documents are the sample's own, with that text put into them."""
    from synestra_cli.cli import fleet, risks
    from synestra_cli.cli.render import console
    from synestra_cli.fleet.lemons import fleet_report
    from synestra_cli.fleet.risks import risks_at
    from synestra_cli.store import open_store

    with open_store(db, read_only=True) as conn:
        doc = fleet_report(conn, None, None).to_json()
        risk = risks_at(conn).to_json()  # the known lemons of the past week
    c = next(c for c in doc["components"] if c["lemon"])
    c["asset"]["id"] += MARKUP
    c["categories"][0] += MARKUP
    c["lemon_reasons"][0] += MARKUP
    c["hits"][0]["what"] += MARKUP
    r = risk["risks"][0]
    r["asset"]["id"] += MARKUP
    r["categories"][0] += MARKUP
    r["action"] += MARKUP
    r["lemon_reasons"][0] += MARKUP
    monkeypatch.setenv("COLUMNS", "400")
    capsys.readouterr()
    out = console()
    fleet._print_table(out, doc)
    fleet._print_evidence(out, c)
    risks._print(risk)
    shown = capsys.readouterr().out
    # the table's asset id and cause (a narrow column may fold it after the tag), the evidence's id, reason
    # and hit, the risk's id, cause, reason and action
    assert shown.count("[bold]x") >= 9, shown
