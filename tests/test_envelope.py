"""How text reached the user, taken off before sniffing (formats/envelope.py), on real pastes: a prompt and
echoed command, a quote, an indentation, a launcher's or collector's prefix (its host, rank, stream and time
kept as columns), lines wrapped at a terminal's width, CRI containers' lines; every file:line still the
user's line, and what no format reads refused naming the nearest one."""

from __future__ import annotations

import gzip
from pathlib import Path

import duckdb
import pytest
from conftest import REAL_SAMPLES

from synestra_cli.errors import UnknownFormatError
from synestra_cli.formats import envelope, envelope_sql
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.reading import lines_to_table
from synestra_cli.ingest import ingest_file
from synestra_cli.ingest.plan import recognise
from synestra_cli.store.connect import memory_store

TRAINING, SYSLOG, FABRIC = REAL_SAMPLES / "training", REAL_SAMPLES / "syslog", REAL_SAMPLES / "fabric"
ENVELOPES = REAL_SAMPLES / "envelopes"


def _ingest(path: Path, **options):
    conn = memory_store()
    report = ingest_file(conn, path, IngestOptions(year=2025, **options))
    assert report.status == "loaded", report.error
    return conn, report


def _columns(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    env = envelope.detect(text)
    assert env is not None
    return envelope_sql.normalise(duckdb.connect(), lines_to_table(text, 1), env).to_pylist()


def test_a_root_prompt_is_taken_off_and_names_the_host_and_lines_keep_their_numbers():
    path = SYSLOG / "gh-akash-support-244_root-prompt_dmesg-T-grep-nvrm.log"
    fmt, env = recognise(path)
    assert fmt.name == "syslog" and env is not None
    assert env.prompt_lines == (1,) and env.command == "dmesg -T |grep NVRM" and env.host == "node4"
    conn, report = _ingest(path)
    assert report.rejected == 0
    # the Xid of line 5 of the user's file is event line 5
    assert conn.execute("SELECT line, host FROM events WHERE kind = 'xid' ORDER BY line LIMIT 1").fetchone() == (
        5,
        "node4",
    )


def test_a_user_at_host_prompt_before_sacct_is_not_a_reject():
    conn, report = _ingest(TRAINING / "sacct_gh-desispec-2744_user-host-prompt_sacct-j_fixed-width.txt")
    assert report.format == "sacct"
    # the two JobIDs cut with `+` (lines 5, 6) are the only rejects; the prompt (line 1) is none
    assert [r[0] for r in report.reject_samples] == [5, 6]


def test_an_echoed_ethtool_command_the_envelope_took_off_still_names_the_interface(tmp_path):
    path = tmp_path / "eth.txt"
    src = (FABRIC / "gh-netdata-17015_prompt-ethtool-S_virtio-rx-queue-N.txt").read_text()
    path.write_text(src.replace("# ethtool -S eth0", "root@gpu-node-7:~# ethtool -S ens1f0np0"))
    conn, report = _ingest(path)
    assert report.rejected == 0
    # the prompt's host is the host: ethtool does not name it
    assert conn.execute("SELECT DISTINCT host FROM metrics").fetchall() == [("gpu-node-7",)]
    assert conn.execute("SELECT count(*) FROM metrics WHERE entity = 'ens1f0np0/q3'").fetchone() == (4,)


def test_a_markdown_quote_is_taken_off_dmesg():
    conn, _ = _ingest(SYSLOG / "gpud-pr46_xid-readme_markdown-quoted_dmesg-ctime.log", host="n")
    assert conn.execute("SELECT count(*) FROM events WHERE kind = 'xid'").fetchone() == (4,)


def test_an_indented_rank_traceback_is_refused_naming_torch_log_and_reads_when_forced():
    path = TRAINING / "gh-saforem2-mmm-docs_markdown-indented-6_rank-traceback_mpiexec.log"
    env = envelope.detect(path.read_text(encoding="utf-8"))
    assert env is not None and env.indent == " " * 6 and env.prefix == "rank"
    with pytest.raises(UnknownFormatError, match=r"nearest: torch_log \(try --input-format torch_log\)"):
        recognise(path)
    conn, _ = _ingest(path, format="torch_log")
    row = conn.execute("SELECT rank, line, message FROM job_incidents WHERE kind = 'python_exception'").fetchone()
    assert row == (0, 38, "AssertionError: Torch not compiled with CUDA enabled")


def test_a_host_and_stream_prefix_is_kept_as_columns_and_its_wrapped_lines_rejoined():
    path = TRAINING / "gh-milabench-pr269_host-stderr-prefix_watchdog-word-wrapped.log"
    rows = _columns(path)
    assert rows[0]["stream"] == "stderr" and rows[0]["host"] == "dinov2-giant-nodes.cn-d004"
    assert rows[0]["line"].endswith(
        "timeout: WorkNCCL(SeqNum=2070, OpType=REDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600034 milliseconds before timing out."
    )
    assert rows[1]["line"] == ""  # the continuation: joined, its number kept empty
    # the companion line was word-wrapped: joined with the blank the wrap took
    assert "detected by watchdog at work: 2070" in rows[8]["line"]
    conn, _ = _ingest(path)
    assert conn.execute(
        "SELECT line, rank, seq, ran_for_ms FROM job_incidents WHERE kind = 'nccl_timeout' ORDER BY line"
    ).fetchall() == [(1, 14, 2070, 600034), (3, 12, 2070, 600036), (5, 11, 2070, 600036), (7, 15, 2070, 600040)]


def test_lines_cut_at_a_terminal_width_are_rejoined_mid_word():
    path = TRAINING / "gh-open-r1-620_watchdog_wrapped-at-terminal-width.log"
    env = envelope.detect(path.read_text(encoding="utf-8"))
    assert env is not None and env.wrap_width == 137 and env.prefix is None
    conn, _ = _ingest(path)
    assert conn.execute(
        "SELECT line, rank, collective, timeout_ms FROM job_incidents WHERE kind = 'nccl_timeout' ORDER BY line"
    ).fetchall() == [
        (1, 2, "BROADCAST", 1800000),
        (3, 3, "BROADCAST", 1800000),
        (5, 6, "BROADCAST", 1800000),
        (7, 5, "BROADCAST", 1800000),
    ]


def test_lines_padded_to_a_width_are_not_wrapped():
    # megatron's progress printer pads its lines with blanks to the terminal's width: no record is cut
    text = (TRAINING / "gh-megatron-lm-1880_torchrun-glog_exitcode-11.log").read_text(encoding="utf-8")
    env = envelope.detect(text)
    assert env is None or env.wrap_width == 0


def test_a_cri_container_log_gives_each_line_its_stream_and_time():
    rows = _columns(ENVELOPES / "gh-cri-o-3181_root-prompt_cri-log-stderr-F.log")
    assert rows[0]["line"] == ""  # the prompt and its `head -5` command
    assert rows[1]["line"].startswith("2020/01/26 03:17:29 provider.go:117: Defaulting client-id")
    assert rows[1]["stream"] == "stderr" and str(rows[1]["ts"]) == "2020-01-26 03:17:29.346494"


def test_a_cri_partial_line_is_joined_with_the_lines_that_finish_it():
    # the CRI format's own words (kubelet-cri-logging.md): a `P` line goes on in the next one, to its `F`
    text = (
        "2016-02-17T00:04:05.931087621Z stdout P [info:2016-02-16T16:04:05.930-08:00] Some log \n"
        "2016-02-17T00:04:05.931087622Z stdout F text here\n"
    )
    env = envelope.detect(text)
    assert env is not None and env.prefix == "cri"
    rows = envelope_sql.normalise(duckdb.connect(), lines_to_table(text, 1), env).to_pylist()
    assert [r["line"] for r in rows] == ["[info:2016-02-16T16:04:05.930-08:00] Some log text here", ""]


def test_a_file_as_the_tool_wrote_it_has_no_envelope():
    for path in (
        SYSLOG / "gh-gpu-operator-1146_rfc3164_xid48_xid64.log",
        FABRIC / "gh-ethq-8_ethtool-S_mlx5_connectx4_head.txt",
        REAL_SAMPLES / "dcgm" / "gh-dcgm-exporter-250_metrics_v100_no-pci-bus-id.prom",
        REAL_SAMPLES / "training" / "tdhock-slurm_sacct-P_array-steps_pending-range.txt",
    ):
        assert envelope.detect(path.read_text(encoding="utf-8")) is None, path.name


@pytest.mark.parametrize("wrap", ["gzip", "utf-16"])
def test_a_compressed_or_utf16_paste_is_read_through_its_envelope_too(tmp_path, wrap):
    src = SYSLOG / "gh-akash-support-244_root-prompt_dmesg-T-grep-nvrm.log"
    path = tmp_path / (src.name + (".gz" if wrap == "gzip" else ""))
    text = src.read_text(encoding="utf-8")
    path.write_bytes(gzip.compress(text.encode()) if wrap == "gzip" else text.encode("utf-16"))
    conn, report = _ingest(path)
    assert report.rejected == 0
    assert conn.execute("SELECT line, host, code FROM events WHERE kind = 'xid' ORDER BY line LIMIT 1").fetchone() == (
        5,
        "node4",
        43,
    )


NEMO_RUN = TRAINING / "nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix.log"


def test_nemo_runs_task_prefix_and_torchruns_local_rank_prefix_are_taken_off_and_kept_as_columns():
    rows = _columns(NEMO_RUN)
    assert rows[0] == {
        "lineno": 1,
        "line": "Launching training run ...",
        "host": None,
        "rank": None,
        "local_rank": None,
        "stream": None,
        "ts": None,
        "tag": None,
    }  # NeMo-Run's own console lines before the task's: as written
    agent, worker = rows[19], rows[42]  # ft_launcher's line (no torchrun prefix), a worker's behind `[default0]:`
    assert agent["line"].startswith("[2025-03-07 22:36:48,816] [INFO] [ft_launcher@4809917ea058] [default] starting")
    assert (agent["tag"], agent["local_rank"], agent["rank"]) == ("ining-demo/0", None, None)
    assert worker["line"].startswith("[NeMo W 2025-03-07 22:37:09 nemo_logging:361]")
    # a local rank is no global rank: kept apart (a multi-node job's replica 1 also has a `[default0]:`)
    assert (worker["tag"], worker["local_rank"], worker["rank"]) == ("ining-demo/0", 0, None)
    assert rows[173]["line"].startswith("[rank2]: Traceback") and rows[173]["local_rank"] == 2


def test_nemo_runs_prefix_in_colour_with_a_short_task_name_and_torchruns_alone_are_the_same_class():
    # nemo_run/run/logs.py: `{GREEN}{role_name[-10:]}/{replica_id}{ENDC} ` (green on a terminal); torchrun --tee:
    # `[${role_name}${local_rank}]:` (local_elastic_agent.py), here a `--role trainer`
    lines = [
        "[NeMo I 2025-03-07 22:39:50 distrib_optimizer:705] Loading distributed optimizer sharded state",
        "Training epoch 0, iteration 10/19 | lr: 1.649e-06 | global_step: 10 | reduced_train_loss: 11.03",
    ]
    coloured = "".join(f"\x1b[32mpretrain/1\x1b[0m [trainer{r}]:{line}\n" for r in (3, 0) for line in lines)
    alone = "".join(f"[default{r}]:{line}\n" for r in (3, 0) for line in lines)
    for text, kind, tag in ((coloured, "nemo_run", "pretrain/1"), (alone, "torchrun_tee", None)):
        env = envelope.detect(text)
        assert env is not None and env.prefix == kind
        rows = envelope_sql.normalise(duckdb.connect(), lines_to_table(text, 1), env).to_pylist()
        assert [r["line"] for r in rows] == lines * 2
        assert [(r["tag"], r["local_rank"], r["rank"]) for r in rows] == [(tag, 3, None)] * 2 + [(tag, 0, None)] * 2


def test_a_pdsh_bracketed_host_is_not_taken_for_torchruns_role_and_rank():
    text = (
        "[gpu3]: NVRM: Xid (PCI:0000:9b:00): 79, GPU has fallen off the bus.\n[gpu4]: NVRM: Xid (PCI:0000:1b:00): 48\n"
    )
    env = envelope.detect(text)
    assert env is not None and env.prefix == "host_bracket" and env.hosts == ("gpu3", "gpu4")
    # Keras' progress bar (`{current}/{target} [====>…]`) is no NeMo-Run task's `name/replica `
    bars = "".join(f"{k}/100 [==>...........................] - ETA: 1s - loss: 0.3{k}\n" for k in range(10, 15))
    assert (envelope.detect(bars) or envelope.Envelope()).prefix != "nemo_run"
