"""Saves whose log lines carry no time of their own, above all the preemption save of Megatron's
exit-signal handler: SIGTERM arrives, the iterations in flight finish without an iteration line (one is
printed every --log-interval), the save's lines are undated, and only `[exiting program after receiving
SIGTERM.] datetime: ...` is dated, once the save is done. The attempt's last progress is the end of
that save, not the last iteration line: the time between is training and saving, not hang.

The logs are Megatron-LM's own wording (megatron/training/training.py, checkpointing.py; log-formats.md
D.1, D.2), written here with every second known; sacct is the pipe-separated `sacct -P` layout.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from synestra_cli.accounting.report import tax_report
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store.connect import memory_store

T0 = datetime(2026, 11, 2, 0, 0, 0)
STEP_S = 10.0
INTERVAL = 10  # --log-interval


def _at(s: float) -> str:
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S.%f")


def _stamp(s: float) -> str:  # Megatron's `datetime:` lines print whole seconds
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")


def _iteration(it: int, s: float, ms: float = STEP_S * 1000) -> str:
    return (
        f" [{_at(s)}] iteration {it:>8}/     200 | consumed samples: {it * 128:>12} | elapsed time per "
        f"iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 380.0 | learning rate: 3.000000E-04 | "
        f"global batch size:   128 | lm loss: 2.500000E+00 |"
    )


def _save(it: int, blocking_s: float) -> list[str]:
    ms = blocking_s * 1000
    return [
        f"saving checkpoint at iteration {it:>7} to /lustre/ckpt/run in torch_dist format",
        f"  successfully saved checkpoint from iteration {it:>7} to /lustre/ckpt/run [ t 1/8, p 1/1 ]",
        "(min, max) time across ranks (ms):",
        f"    save-checkpoint ................................: ({ms - 40:.2f}, {ms:.2f})",
    ]


def _start(s: float) -> list[str]:
    return [
        "using world size: 16, data-parallel size: 2, context-parallel size: 1, tensor-model-parallel size: 8, "
        "pipeline-model-parallel size: 1",
        f"[after megatron is initialized] datetime: {_stamp(s)} ",
        f"[before the start of training step] datetime: {_stamp(s + 10)} ",
    ]


def _write(tmp_path, preempt_after: int, exit_delay_s: float, blocking_s: float = 30.0):
    """Attempt 1 trains from 0 at STEP_S a step from 70 s, saves at 50, is preempted after iteration
    `preempt_after` and saves it (undated); its exit line comes `exit_delay_s` after that save, sacct's
    end 3 s later. Attempt 2 restores and finishes. Returns (log, sacct, the seconds truth)."""
    lines = _start(60)
    t = 80.0  # first step starts
    save1_end = None
    for it in range(INTERVAL, 51, INTERVAL):
        t = 80.0 + it * STEP_S + (blocking_s if it > 50 else 0)
        lines.append(_iteration(it, t))
        if it == 50:
            lines += _save(50, blocking_s)
            save1_end = t + blocking_s
    assert save1_end is not None
    t = save1_end
    for it in range(60, preempt_after + 1, INTERVAL):
        t = save1_end + (it - 50) * STEP_S
        lines.append(_iteration(it, t))
    last_line = t
    pre_save_start = save1_end + (preempt_after - 50) * STEP_S  # the unlogged iterations are done
    pre_save_end = pre_save_start + blocking_s
    lines += _save(preempt_after, blocking_s)
    exit_line = pre_save_end + exit_delay_s
    lines.append(f"[exiting program after receiving SIGTERM.] datetime: {_stamp(exit_line)} ")
    end1 = int(exit_line) + 3
    start2 = end1 + 600
    lines += _start(start2 + 60)
    lines += [
        f" loading distributed checkpoint from /lustre/ckpt/run at iteration {preempt_after}",
        f"  successfully loaded checkpoint from /lustre/ckpt/run [ t 1/8, p 1/1 ] at iteration {preempt_after}",
    ]
    t2 = start2 + 100.0
    for it in range((preempt_after // INTERVAL + 1) * INTERVAL, 201, INTERVAL):
        t2 = start2 + 100.0 + (it - preempt_after) * STEP_S
        lines.append(_iteration(it, t2))
    lines += _save(200, blocking_s)
    end2 = int(t2 + blocking_s) + 5
    log = tmp_path / "77.log"
    log.write_text("\n".join(lines) + "\n")
    nodes = "gpu-[01-02]"
    tres = "billing=224,cpu=224,gres/gpu=16,mem=4000G,node=2"
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|JobName|User|State|ExitCode|Start|End|Elapsed|NodeList|AllocTRES\n"
        f"77|pretrain|ana|PREEMPTED|0:15|{_iso(0)}|{_iso(end1)}|00:00:00|{nodes}|{tres}\n"
        f"77|pretrain|ana|COMPLETED|0:0|{_iso(start2)}|{_iso(end2)}|00:00:00|{nodes}|{tres}\n"
    )
    return log, sacct, {"last_line": last_line, "save_end": pre_save_end, "exit_line": int(exit_line), "end1": end1}


def _iso(s: float) -> str:
    return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%dT%H:%M:%S")


def _buckets(tmp_path, **kw):
    log, sacct, truth = _write(tmp_path, **kw)
    conn = memory_store()
    reports = ingest_paths(conn, [log, sacct], IngestOptions(job_id="77"))
    assert all(r.status == "loaded" for r in reports), [r.error for r in reports]
    (job,) = tax_report(conn).jobs
    conn.close()
    return job.buckets, truth


@pytest.mark.parametrize("preempt_after", [67, 70, 79])
def test_the_exit_signal_handler_save_ends_the_attempt_s_progress_not_its_last_iteration_line(tmp_path, preempt_after):
    # 67: seven iterations after the last line (at 60), then the save; 70: the save right after a line
    b, truth = _buckets(tmp_path, preempt_after=preempt_after, exit_delay_s=0.4)
    hang = truth["end1"] - truth["save_end"]  # ~3.4 s: the exit itself
    assert b.buckets_s["hang"] == pytest.approx(hang, abs=1.5)
    assert b.buckets_s["lost_work"] == pytest.approx(0.0, abs=1.5)
    assert b.buckets_s["checkpoint_save"] == pytest.approx(3 * 30.0, abs=0.5)
    assert sum(b.buckets_s.values()) == pytest.approx(b.wall_s, abs=1e-6)


def test_a_slow_exit_after_the_save_is_still_hang(tmp_path):
    # the save ends, then the exit takes 40 s (a teardown that waits): that is hang, the save is not
    b, truth = _buckets(tmp_path, preempt_after=67, exit_delay_s=40.0)
    assert b.buckets_s["hang"] == pytest.approx(truth["end1"] - truth["save_end"], abs=1.5)
    assert b.buckets_s["hang"] > 40.0


def test_an_undated_save_never_ends_after_the_dated_line_that_follows_it(tmp_path):
    # the save's timer says 10 s more than there was before the exit line (clocks, rounding): the
    # dated exit line bounds its end
    b, truth = _buckets(tmp_path, preempt_after=67, exit_delay_s=-10.0)
    assert b.attempts[0]["t_last"] == T0 + timedelta(seconds=truth["exit_line"])
    assert b.buckets_s["hang"] == pytest.approx(truth["end1"] - truth["exit_line"], abs=0.01)
