"""How a simulated attempt ends in its log: watchdog timeouts, tracebacks, SIGTERM, Slurm's notices.

Formats as the real samples show them (log-formats.md D.6, D.7; real_samples/training/): the
ProcessGroupNCCL watchdog pair of the current generation, `[PG ID 0 PG GUID 0(default_pg) Rank r]`,
fires Timeout(ms) after the collective that never completes was enqueued, i.e. after the fault struck,
so "log time - ran for" is the fault time; every waiting rank logs it, the culprit with the lowest
"last completed" work. torch's C++ glog header has no year and an unpadded month (`E626 06:24:44.9`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import timedelta

from synestra_cli.simulate.logfmt import EPOCH, Line, mega, stamp
from synestra_cli.simulate.timeline import EXIT_US, US, Attempt, JobTimeline, Launch

MEGATRON = "/workspace/megatron-lm"
TRAIN_STACK = [
    (f"{MEGATRON}/pretrain_gpt.py", 330, "<module>", "pretrain("),
    (
        f"{MEGATRON}/megatron/training/training.py",
        804,
        "pretrain",
        "iteration, num_floating_point_operations_so_far = train(",
    ),
    (f"{MEGATRON}/megatron/training/training.py", 2169, "train", ") = train_step("),
    (f"{MEGATRON}/megatron/training/training.py", 1370, "train_step", "losses_reduced = forward_backward_func("),
]
CUDA_STACK = [
    (
        f"{MEGATRON}/megatron/core/pipeline_parallel/schedules.py",
        505,
        "forward_backward_no_pipelining",
        "config.finalize_model_grads_func(",
    ),
    (
        f"{MEGATRON}/megatron/core/distributed/finalize_model_grads.py",
        290,
        "finalize_model_grads",
        "model_chunk.finish_grad_sync()",
    ),
]
CUDA_TAIL = [
    "RuntimeError: CUDA error: unspecified launch failure",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]
DATA_STACK = [
    (
        f"{MEGATRON}/pretrain_gpt.py",
        192,
        "forward_step",
        "tokens, labels, loss_mask, attention_mask, position_ids = get_batch(",
    ),
    (f"{MEGATRON}/megatron/core/datasets/gpt_dataset.py", 178, "__getitem__", "idx = self.shuffle_index[idx]"),
]


@dataclass(frozen=True)
class Stacks:
    """A trainer's Python frames: the training loop down to the step, then where a CUDA error and a
    data-loader error surface, and where a restarted worker first touches its GPU."""

    train: list[tuple[str, int, str, str]]
    cuda: list[tuple[str, int, str, str]]
    data: list[tuple[str, int, str, str]]
    init: list[tuple[str, int, str, str]]


MEGATRON_INIT = [
    (f"{MEGATRON}/pretrain_gpt.py", 330, "<module>", "pretrain("),
    (f"{MEGATRON}/megatron/training/training.py", 293, "pretrain", "initialize_megatron("),
    (f"{MEGATRON}/megatron/training/initialize.py", 102, "initialize_megatron", "finish_mpu_init()"),
    (f"{MEGATRON}/megatron/training/initialize.py", 297, "_initialize_distributed", "torch.cuda.set_device(device)"),
]
MEGATRON_STACKS = Stacks(TRAIN_STACK, CUDA_STACK, DATA_STACK, MEGATRON_INIT)


def _seed(tl: JobTimeline) -> int:
    return zlib.crc32(tl.spec.job_id.encode())


def glog_cpp(us: int, level: str = "E") -> str:
    """torch C++ header time: unpadded month, padded day, nanoseconds, no year."""
    t = EPOCH + timedelta(microseconds=us)
    return f"{level}{t.month}{t.day:02d} {t:%H:%M:%S}.{t.microsecond:06d}{us % 997:03d}"


def glog_py(us: int, level: str = "E") -> str:
    """torchrun's Python-logging glog header: padded month, microseconds."""
    t = EPOCH + timedelta(microseconds=us)
    return f"{level}{t:%m%d %H:%M:%S}.{t.microsecond:06d}"


def ending_lines(
    tl: JobTimeline,
    a: Attempt | Launch,
    say=mega,
    slurm_notice: bool = True,
    stacks: Stacks = MEGATRON_STACKS,
    agent_line: bool = True,
    timeout_notice: bool = True,
) -> list[Line]:
    """What the log shows at the end of the launch (`say` writes a rank-0 line; `slurm_notice`: Slurm's
    cancellation notice reaches this log, as in a batch script's own stdout; `agent_line`: torchrun's
    `failed (exitcode: 1)` line is printed here)."""
    spec = tl.spec
    saves = [c.end for c in tl.checkpoints if c.attempt == a.number and c.kind == "save"]
    if a.state == "COMPLETED":
        done = max(saves, default=a.end)
        return [say(done, f"[after training is done] datetime: {stamp(done)[:19]} ", 5)]
    if a.state == "PREEMPTED":
        assert a.sigterm is not None
        notice = [_slurm(spec.job_id, spec.hosts[0], a.sigterm, "PREEMPTION")] if slurm_notice else []
        # the exit-signal handler saved, then prints this as it exits: the signal itself is not logged
        return notice + [
            say(max(saves), f"[exiting program after receiving SIGTERM.] datetime: {stamp(max(saves))[:19]} ", 5)
        ]
    if a.state == "TIMEOUT":
        return [_slurm(spec.job_id, spec.hosts[0], a.end, "TIME LIMIT")] if timeout_notice else []
    return crash_lines(tl, a, stacks, agent_line)


def _slurm(job: str, host: str, us: int, why: str) -> Line:
    when = (EPOCH + timedelta(microseconds=us)).strftime("%Y-%m-%dT%H:%M:%S")
    return us, 0, f"slurmstepd: error: *** JOB {job} ON {host} CANCELLED AT {when} DUE TO {why} ***"


def worker_pid(tl: JobTimeline, local_rank: int) -> int:
    """The pid of a worker process (the same in the traceback, torchrun's lines and ChildFailedError)."""
    return 40_000 + _seed(tl) % 20_000 + 7 + local_rank


def agent_failed_line(tl: JobTimeline, rank: int, us: int) -> Line:
    """torchrun's (torch 2.4+ glog header) line when a worker process exits non-zero."""
    pid, local = 40_000 + _seed(tl) % 20_000, rank % tl.spec.gpus_per_node
    return (
        us,
        0,
        f"{glog_py(us)} {pid} torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) "
        f"local_rank: {local} (pid: {worker_pid(tl, local)}) of binary: /usr/bin/python3",
    )


def crash_lines(
    tl: JobTimeline, a: Attempt | Launch, stacks: Stacks = MEGATRON_STACKS, agent_line: bool = True
) -> list[Line]:
    """The failing rank's traceback (CUDA error, data-loader exception, or a restarted worker dying on its
    lost GPU), torchrun's `failed (exitcode: 1)` line, the NCCL watchdog pairs of the ranks left waiting."""
    assert a.failure is not None
    f, world = a.failure, len(tl.spec.hosts) * tl.spec.gpus_per_node
    if f.incident == "node_failure":  # Slurm ends the job (its lines: simulate/slurmlines.py); nothing else
        return []
    culprit = f.rank if f.rank is not None else 0
    lines: list[Line] = []
    if f.incident in ("cuda_error", "python_exception"):
        if f.message:  # a worker restarted on a GPU that is gone
            tail, stack = [f"RuntimeError: CUDA error: {f.message}", *CUDA_TAIL[1:]], stacks.init
        elif f.incident == "cuda_error":
            tail, stack = CUDA_TAIL, stacks.train + stacks.cuda
        else:
            size = _seed(tl) % 90_000_000 + 10_000_000
            tail = [f"IndexError: index {size} is out of bounds for axis 0 with size {size}"]
            stack = stacks.train + stacks.data
        lines += _traceback(culprit, f.at + (0 if f.message else 400_000), stack, tail)
        if f.message:
            return lines  # it died in its start-up: nobody was waiting in a collective yet
        if agent_line:
            lines.append(agent_failed_line(tl, culprit, f.at + 2 * US))
    if f.incident == "nccl_timeout" or a.end - f.at >= 60 * US:  # else torchrun/Slurm end it before the watchdog
        waiting = sorted({0, world // 2, world - 1} - {culprit})
        ranks = ([culprit] if f.incident == "nccl_timeout" and f.rank is not None else []) + waiting
        lines += _watchdog(tl, a, ranks, culprit if f.rank is not None else None)
    return lines


def _traceback(rank: int, us: int, stack: list[tuple[str, int, str, str]], tail: list[str]) -> list[Line]:
    body = ["Traceback (most recent call last):"]
    for path, line, func, code in stack:
        body += [f'  File "{path}", line {line}, in {func}', f"    {code}"]
    return [(us, i, f"[rank{rank}]: {text}") for i, text in enumerate(body + tail)]


def _watchdog(tl: JobTimeline, a: Attempt | Launch, ranks: list[int], culprit: int | None) -> list[Line]:
    """The watchdog pair per rank; it fires Timeout(ms) + a few ms after the fault."""
    assert a.failure is not None
    at, seed = a.failure.at, _seed(tl)
    timeout_s = max(1, round((a.end - EXIT_US - at) / US))  # the crash's hang_s
    done = tl.steps.iteration[tl.steps.launch == a.number]
    seq = 40 * (int(done[-1]) + 1 if len(done) else a.resume_iteration + 1) + 3
    numel = 9_000_000 + seed % 1_000_000
    lines: list[Line] = []
    for k, rank in enumerate(ranks):
        work = seq - 1 if rank == culprit else seq
        ran_for = timeout_s * 1000 + 20 + (seed + 37 * rank) % 80
        us = at + ran_for * 1000 + 137 * k
        lines.append(
            (
                us,
                10 + 2 * k,
                f"[rank{rank}]:[{glog_cpp(us)} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog "
                f"caught collective operation timeout: WorkNCCL(SeqNum={work}, OpType=ALLREDUCE, "
                f"NumelIn={numel}, NumelOut={numel}, Timeout(ms)={timeout_s * 1000}) ran for {ran_for} "
                "milliseconds before timing out.",
            )
        )
        lines.append(
            (
                us + 2_500,
                11 + 2 * k,
                f"[rank{rank}]:[{glog_cpp(us + 2_500)} ProcessGroupNCCL.cpp:1785] "
                f"[PG ID 0 PG GUID 0(default_pg) Rank {rank}] Exception (either an error or timeout) detected "
                f"by watchdog at work: {work}, last enqueued NCCL work: {work + 2}, last completed NCCL work: "
                f"{work - 1}.",
            )
        )
    return lines
