"""Restarts measured in stages (explain/restarts.py, issue 37 item 4) and restart loops (explain/loops.py, item 5):
each stage dated by the lines that date it, undated ones named, and alike restarts in a row made one incident."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from synestra_cli.accounting.report import tax_report
from synestra_cli.explain.job import explain_job
from synestra_cli.explain.loops import restart_loops
from synestra_cli.explain.reason import Cause
from synestra_cli.explain.restarts import STAGES, Restart
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_file, ingest_paths

# Megatron's wording (megatron/training/training.py, checkpointing.py, core/timers.py), rank 0's lines without a
# launcher stamp (print_rank_0): only print_datetime's marks, iteration lines with `[...]` and the watchdog carry
# a time. Attempt 1 dies in a watchdog timeout after its save at 20; attempt 2 loads 20 (undated: its load
# timer says 61.24 s) and goes on.
LOG = [
    "SLURM_JOB_ID=4242",
    "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8, "
    "pipeline-model-parallel size: 1",
    "[after megatron is initialized] datetime: 2025-03-01 10:00:45.000000 ",
    "[after model, optimizer, and learning rate scheduler are built] datetime: 2025-03-01 10:00:50.000000 ",
    "[before the start of training step] datetime: 2025-03-01 10:00:51.000000 ",
    " [2025-03-01 10:02:00.000000] iteration       10/    1000 | consumed samples:         1280 | "
    "elapsed time per iteration (ms): 6900.0 | lm loss: 5.000000E+00 |",
    " [2025-03-01 10:03:00.000000] iteration       20/    1000 | consumed samples:         2560 | "
    "elapsed time per iteration (ms): 6000.0 | lm loss: 5.000000E+00 |",
    "saving checkpoint at iteration      20 to /ckpt/gpt in torch_dist format",
    "  successfully saved checkpoint from iteration      20 to /ckpt/gpt [ t 1/8, p 1/1 ]",
    "(min, max) time across ranks (ms):",
    "    save-checkpoint ................................: (8123.45, 8450.00)",
    " [2025-03-01 10:04:10.000000] iteration       30/    1000 | consumed samples:         3840 | "
    "elapsed time per iteration (ms): 6000.0 | lm loss: 5.000000E+00 |",
    "[rank3]:[E301 10:15:10.123456789 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=5521, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for "
    "600500 milliseconds before timing out.",
    "SLURM_JOB_ID=4242",
    "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8, "
    "pipeline-model-parallel size: 1",
    "[after megatron is initialized] datetime: 2025-03-01 10:31:40.000000 ",
    " loading distributed checkpoint from /ckpt/gpt at iteration 20",
    "  successfully loaded checkpoint from /ckpt/gpt [ t 1/8, gtp_remat 1/1, p 1/1 ] at iteration 20",
    "(min, max) time across ranks (ms):",
    "    load-checkpoint ................................: (61234.50, 61240.00)",
    "[after model, optimizer, and learning rate scheduler are built] datetime: 2025-03-01 10:34:10.000000 ",
    "[before the start of training step] datetime: 2025-03-01 10:34:11.000000 ",
    " [2025-03-01 10:35:30.000000] iteration       30/    1000 | consumed samples:         3840 | "
    "elapsed time per iteration (ms): 7900.0 | lm loss: 5.000000E+00 |",
    " [2025-03-01 10:36:30.000000] iteration       40/    1000 | consumed samples:         5120 | "
    "elapsed time per iteration (ms): 6000.0 | lm loss: 5.000000E+00 |",
]
SACCT = [
    "JobID|JobName|State|ExitCode|Start|End|NodeList|AllocTRES",
    "4242|gpt|FAILED|1:0|2025-03-01T10:00:30|2025-03-01T10:15:13|gpu-[001-002]|gres/gpu=16",
    "4242|gpt|COMPLETED|0:0|2025-03-01T10:30:40|2025-03-01T10:40:00|gpu-[001-002]|gres/gpu=16",
]


def _store(conn, tmp_path: Path) -> None:
    (tmp_path / "4242.log").write_text("\n".join(LOG) + "\n", encoding="utf-8")
    (tmp_path / "sacct.txt").write_text("\n".join(SACCT) + "\n", encoding="utf-8")
    for name in ("sacct.txt", "4242.log"):
        assert ingest_file(conn, tmp_path / name, IngestOptions()).status == "loaded"


def test_a_requeued_restart_is_dated_stage_by_stage(conn, tmp_path):
    _store(conn, tmp_path)
    doc = explain_job(conn, "4242").to_json()
    (r,) = doc["restarts"]
    t = datetime(2025, 3, 1)
    assert r == {
        "attempt": 2,
        "in_place": False,
        "fault_at": t.replace(hour=10, minute=5, second=9, microsecond=623456),  # the watchdog: log time - ran for
        "noticed_at": t.replace(hour=10, minute=15, second=10, microsecond=123456),  # the watchdog fired
        "ended_at": t.replace(hour=10, minute=15, second=13),  # sacct
        "restarted_at": t.replace(hour=10, minute=30, second=40),  # sacct
        "startup_end": t.replace(hour=10, minute=31, second=40),  # [after megatron is initialized]
        "load_start": t.replace(hour=10, minute=34, second=10) - timedelta(seconds=61.24),  # built - the timer
        "load_end": t.replace(hour=10, minute=34, second=10),  # [after model, optimizer, ... are built]
        # the first line covers 10 iterations since the restored 20, at the next line's pace (6 s)
        "first_step_start": t.replace(hour=10, minute=34, second=30),
        "undated": [],
    }
    assert doc["restart_loops"] == []


def test_the_restore_bucket_is_the_load_not_the_start_up_around_it(conn, tmp_path):
    _store(conn, tmp_path)
    job = tax_report(conn, ["4242"]).jobs[0].buckets
    assert job.buckets_s["checkpoint_restore"] == pytest.approx(61.24)
    # the start-up is charged as start-up: attempt start -> first step, less the load
    first_step = datetime(2025, 3, 1, 10, 34, 30)
    startup_2 = (first_step - datetime(2025, 3, 1, 10, 30, 40)).total_seconds() - 61.24
    assert job.buckets_s["startup"] - job.first_attempt_startup_s == pytest.approx(startup_2, abs=1.0)


def test_stages_the_log_does_not_date_are_named_not_guessed(conn, tmp_path):
    lines = [ln for ln in LOG if "load-checkpoint" not in ln and "time across ranks" not in ln[:40]]
    lines = [ln for ln in lines if "after megatron is initialized" not in ln]
    (tmp_path / "4242.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert ingest_file(conn, tmp_path / "4242.log", IngestOptions()).status == "loaded"
    doc = explain_job(conn, "4242").to_json()
    (r,) = doc["restarts"]
    # no sacct: the log's own first and last dated lines bound the attempts; no dated line before the load and
    # no timer: its start is not dated (its end is: the built mark); no initialised mark
    assert r["undated"] == ["startup_end", "load_start"]
    # and the restore says its lines do not date it (its neighbours' times: no dated line before it)
    assert [c["precision"] for c in doc["checkpoints"] if c["kind"] == "restore"] == ["inferred"]
    assert r["load_start"] is None and r["load_end"] == datetime(2025, 3, 1, 10, 34, 10)
    assert r["ended_at"] == datetime(2025, 3, 1, 10, 15, 10, 123456)


def _restart(attempt: int, restored: int | None, failed: int | None, down_s: float = 600.0) -> Restart:
    t0 = datetime(2025, 3, 1) + timedelta(hours=attempt)
    stages = dict.fromkeys(STAGES)
    stages["fault_at"] = t0
    stages["first_step_start"] = t0 + timedelta(seconds=down_s)
    r = Restart(attempt, False, stages, None, attempt - 1, failed)
    r.restore = None
    return r


def test_restarts_for_one_gpu_in_a_row_are_one_loop():
    rs = [_restart(k, None, None) for k in (2, 3, 4, 5)]
    gpu = Cause("gpu.memory", "gpu-002", "gpu3", None, 0.9)
    other = Cause("network.link_down", "gpu-004", "mlx5_1", None, 0.9)
    for r, c in zip(rs, (gpu, gpu, gpu, other), strict=True):
        r.cause_key = (c.category, c.host, c.component)
    (loop,) = restart_loops(rs, {0: gpu, 1: gpu, 2: gpu, 3: other})
    assert loop["attempts"] == [2, 3, 4] and loop["restarts"] == 3
    assert loop["cause"] == {"category": "gpu.memory", "host": "gpu-002", "component": "gpu3"}
    assert loop["downtime_s"] == pytest.approx(1800.0) and loop["undated_restarts"] == 0


def test_restarts_without_a_cause_loop_on_the_same_checkpoint_failing_at_the_same_step():
    class Ckpt:
        iteration = 1500

    rs = [_restart(k, 1500, 1620) for k in (2, 3, 4)] + [_restart(5, 1500, 1900)]
    for r in rs:
        r.restore = Ckpt()  # type: ignore[assignment]
    (loop,) = restart_loops(rs, {})
    assert loop["attempts"] == [2, 3, 4] and loop["cause"] is None
    assert (loop["restored_iteration"], loop["failed_iteration"]) == (1500, 1620)


@pytest.mark.truth
@pytest.mark.parametrize("scenario", ["gpu-fell-off-bus", "preemption", "software-crash"])
def test_restart_stages_match_the_simulators_truth(tmp_path, scenario):
    """Requeues of the simulator's Megatron jobs: every dated stage within 60 s of the truth, the load within
    5% or 60 s, and the restore bucket the load alone."""
    from synestra_cli.simulate.scenarios import simulate
    from synestra_cli.store.connect import connect

    simulate(tmp_path, scenario, seed=404, nodes=8, hours=4.0, telemetry=False)
    truth = json.loads((tmp_path / "truth.json").read_text())
    conn = connect(tmp_path / "store.duckdb")
    ingest_paths(conn, [tmp_path / "exports"], IngestOptions())
    checked = 0
    for job in (j for j in truth["jobs"] if len(j["attempts"]) > 1):
        got = explain_job(conn, job["job"]).to_json()["restarts"]
        assert len(got) == len(job["attempts"]) - 1
        for r, a in zip(got, job["attempts"][1:], strict=True):
            prev = job["attempts"][a["attempt"] - 2]
            load = next(c for c in job["checkpoints"] if c["kind"] == "restore" and c["attempt"] == a["attempt"])
            want = {
                "fault_at": prev["failure_at"] or prev["sigterm"],
                "ended_at": prev["end"],
                "restarted_at": a["start"],
                "load_start": load["start"],
                "load_end": load["end"],
                "first_step_start": a["first_step"],
            }
            for stage, iso in want.items():
                assert r[stage] is not None, (stage, r["undated"])
                assert abs((r[stage] - _ts(iso)).total_seconds()) <= 60, (stage, r[stage], iso)
            took = (r["load_end"] - r["load_start"]).total_seconds()
            assert abs(took - load["duration_s"]) <= max(60, 0.05 * load["duration_s"])
            checked += 1
    assert checked
    conn.close()


def _ts(iso: str) -> datetime:
    return datetime.fromisoformat(iso.replace("Z", ""))


# torchrun's agent restarting the worker group in place (torch/distributed/elastic/agent/server/api.py, in the glog
# format of torch 2.4+ as the real sample gh-nvidia-resiliency-ext-18 shows it): one Slurm attempt, two segments.
AGENT = "I0301 {hms}.000000 3304089 torch/distributed/elastic/agent/server/api.py:{n}] {msg}"
IN_PLACE = [
    "SLURM_JOB_ID=4343",
    AGENT.format(hms="10:00:30", n=685, msg="[default] Starting worker group"),
    *LOG[1:13],  # attempt 1 of the requeue test above: a save at 20, a step at 30, then its watchdog timeout
    "E0301 10:15:10.223000 3304089 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) "
    "local_rank: 3 (pid: 3304209) of binary: /usr/bin/python3",
    AGENT.format(
        hms="10:15:10", n=884, msg="[default] Worker group FAILED. 2/3 attempts left; will restart worker group"
    ),
    AGENT.format(hms="10:15:10", n=699, msg="[default] Stopping worker group"),
    AGENT.format(hms="10:15:13", n=677, msg="[default] Rendezvous'ing worker group"),
    AGENT.format(hms="10:15:25", n=685, msg="[default] Starting worker group"),
    LOG[14],  # using world size ...
    "[after megatron is initialized] datetime: 2025-03-01 10:15:40.000000 ",
    *LOG[16:20],  # the load and its timer
    "[after model, optimizer, and learning rate scheduler are built] datetime: 2025-03-01 10:17:10.000000 ",
    "[before the start of training step] datetime: 2025-03-01 10:17:11.000000 ",
    LOG[22].replace("10:35:30", "10:18:30"),
    LOG[23].replace("10:36:30", "10:19:30"),
]


def test_torchrun_restarting_in_place_is_a_restart_within_one_attempt(conn, tmp_path):
    (tmp_path / "4343.log").write_text("\n".join(IN_PLACE) + "\n", encoding="utf-8")
    sacct = (
        "JobID|State|ExitCode|Start|End|NodeList|AllocTRES\n"
        "4343|COMPLETED|0:0|2025-03-01T10:00:20|2025-03-01T10:25:00|gpu-[001-002]|gres/gpu=16\n"
    )
    (tmp_path / "sacct.txt").write_text(sacct, encoding="utf-8")
    for name in ("sacct.txt", "4343.log"):
        assert ingest_file(conn, tmp_path / name, IngestOptions()).status == "loaded"
    (r,) = explain_job(conn, "4343").to_json()["restarts"]
    assert (r["attempt"], r["in_place"]) == (1, True)
    assert r["ended_at"] == datetime(2025, 3, 1, 10, 15, 13)  # the agent's next rendezvous: the old group stopped
    assert r["restarted_at"] == datetime(2025, 3, 1, 10, 15, 25)  # "Starting worker group"
    assert r["load_end"] == datetime(2025, 3, 1, 10, 17, 10)
    b = tax_report(conn, ["4343"]).jobs[0].buckets
    assert b.buckets_s["requeue"] == 0  # no requeue: torchrun's stop and rendezvous are start-up
    assert b.buckets_s["checkpoint_restore"] == pytest.approx(61.24)
    assert b.buckets_s["lost_work"] > 0 and b.buckets_s["hang"] > 0


@pytest.mark.truth
@pytest.mark.slow
def test_a_worker_group_restarted_again_and_again_on_a_dead_gpu_is_one_loop(tmp_path):
    """torchrun restarts the worker group three times on the GPU that fell off the bus, then Slurm requeues the
    job: one restart loop of four restarts, for that GPU, its downtime the whole span from the fault to the
    first step after the requeue (the simulator's truth)."""
    from synestra_cli.simulate.scenarios import simulate
    from synestra_cli.store.connect import connect

    simulate(tmp_path, "gpu-fell-off-bus", seed=101, nodes=8, hours=4.0, trainer="megatron", launcher="torchrun")
    job = next(j for j in json.loads((tmp_path / "truth.json").read_text())["jobs"] if j["job"] == "1001")
    conn = connect(tmp_path / "store.duckdb")
    ingest_paths(conn, [tmp_path / "exports"], IngestOptions())
    (loop,) = explain_job(conn, "1001").to_json()["restart_loops"]
    want = job["restarts"]
    assert loop["restarts"] == len(want) >= 3 and loop["in_place"] == [r["in_place"] for r in want]
    cause = job["attempts"][0]["cause"]
    assert (loop["cause"]["category"], loop["cause"]["host"]) == (cause["category"], cause["host"])
    span = (_ts(want[-1]["first_step_start"]) - _ts(want[0]["fault_at"])).total_seconds()
    assert abs(loop["downtime_s"] - span) <= 60
    conn.close()


# ... and restarting it once more when the new workers die in their start-up (a CUDA error as they touch the GPU,
# after Megatron's first banner): the second segment never reaches a step.
_AGAIN = IN_PLACE.index(AGENT.format(hms="10:15:25", n=685, msg="[default] Starting worker group")) + 1
NEVER_TRAINED = [
    *IN_PLACE[:_AGAIN],
    LOG[14],  # using world size ...
    "E0301 10:15:30.000000 3304089 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
    "local_rank: 3 (pid: 3305000) of binary: /usr/bin/python3",
    AGENT.format(
        hms="10:15:30", n=884, msg="[default] Worker group FAILED. 1/3 attempts left; will restart worker group"
    ),
    AGENT.format(hms="10:15:30", n=699, msg="[default] Stopping worker group"),
    AGENT.format(hms="10:15:33", n=677, msg="[default] Rendezvous'ing worker group"),
    AGENT.format(hms="10:15:38", n=685, msg="[default] Starting worker group"),
    *IN_PLACE[_AGAIN:],
]


# ... or die before any trainer banner at all (an import error, a CUDA error at its first touch of the GPU): only
# torchrun's own lines tell the new group from the old one.
NO_BANNER = [line for i, line in enumerate(NEVER_TRAINED) if i != _AGAIN]


@pytest.mark.parametrize("log", [NEVER_TRAINED, NO_BANNER], ids=["after-a-banner", "before-any-banner"])
def test_a_segment_that_never_trained_is_start_up_then_hang_and_its_restart_gap_is_start_up(conn, tmp_path, log):
    assert NEVER_TRAINED[_AGAIN] == LOG[14] and len(NO_BANNER) == len(NEVER_TRAINED) - 1  # only the banner left out
    (tmp_path / "4343.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    sacct = (
        "JobID|State|ExitCode|Start|End|NodeList|AllocTRES\n"
        "4343|COMPLETED|0:0|2025-03-01T10:00:20|2025-03-01T10:25:00|gpu-[001-002]|gres/gpu=16\n"
    )
    (tmp_path / "sacct.txt").write_text(sacct, encoding="utf-8")
    for name in ("sacct.txt", "4343.log"):
        assert ingest_file(conn, tmp_path / name, IngestOptions()).status == "loaded"
    b = tax_report(conn, ["4343"]).jobs[0].buckets
    (seg,) = [c for c in b.attempts if c["seg"] == 2]
    # it begins when the agent starts its workers, its start-up ends at their crash, the stop after it is hang
    assert seg["start_ts"] == datetime(2025, 3, 1, 10, 15, 25) and seg["t_first"] == datetime(2025, 3, 1, 10, 15, 30)
    assert (seg["startup_s"], seg["hang_s"], seg["lost_work_s"]) == (5.0, 3.0, 0.0)
    assert seg["restart_gap_s"] == 5.0  # the next rendezvous to the next "Starting worker group": start-up
    assert not b.notes  # nothing clamped: every second is in a bucket of its own
    assert b.buckets_s["requeue"] == 0
    assert sorted(c["seg"] for c in b.attempts) == [1, 2, 3]
    assert [(r["attempt"], r["in_place"]) for r in explain_job(conn, "4343").to_json()["restarts"]] == [(1, True)] * 2
