"""What the launcher adds to a job's output: torchrun's elastic agent (one per node, its worker group
restarted in place), and `srun -l`'s task labels.

torchrun wording (torch.distributed.elastic; docs/simulator.md cites each), in two logging generations:
- current (torch 2.4+, glog-style TorchLogsFormatter, every line of a message prefixed):
  `I1102 03:15:12.345000 41234 torch/distributed/elastic/agent/server/api.py:884] [default] Worker group
  FAILED. 3/3 attempts left; will restart worker group`; `W0227 17:39:41.936000 293817 …/agent/server/
  api.py:719] Received 15 death signal, shutting down workers` and `…/multiprocessing/api.py:766] Closing
  process 293866 via signal SIGTERM` are real (gh-nvidia-resiliency-ext-18); the line numbers of the other
  agent lines are placed from api.py's layout around line 719 (torch @ 00a1abb) and are not checked
  against one release;
- previous (torch 2.1-2.3): `[2024-03-12 08:22:45,549] torch.distributed.elastic.agent.server.api: [INFO]
  [default] …` (the elastic_operator block of pytorch issue threads, every line prefixed).
The message texts are api.py's: `[%s] Worker group %s. %s/%s attempts left; will restart worker group`
(the count before it is decremented: the first restart of --max-restarts 3 says 3/3), `[%s] Stopping worker
group`, `[%s] Rendezvous'ing worker group`, `[%s] Rendezvous complete for workers. Result:` and its
restart_count/master_addr/… block, `[%s] Starting worker group`, `[%s] Detected %s new nodes from
group_rank=%s; will restart worker group`, and launcher/api.py's `Starting elastic_operator with launch
configs:` block. When no restart is left the agent stops and torchrun raises ChildFailedError, whose
summary block (`Root Cause (first observed failure):`, time/host/rank/exitcode/error_file/traceback) is
as in the real samples gh-cppo-6 and gh-llamafactory-7032.
"""

from __future__ import annotations

from datetime import timedelta

from synestra_cli.simulate.failures import worker_pid
from synestra_cli.simulate.logfmt import EPOCH
from synestra_cli.simulate.model import Rendering
from synestra_cli.simulate.timeline import Attempt, JobTimeline, Launch
from synestra_cli.simulate.trainers.common import NO_TASK, Out, py_asctime, seed_of

ELASTIC = "torch/distributed/elastic"
AGENT = {  # message -> (module for the 2.1-2.3 header, file:line for the glog header)
    "failed": ("torch.distributed.elastic.multiprocessing.api", f"{ELASTIC}/multiprocessing/api.py:869"),
    "failed_group": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:884"),
    "stopping": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:699"),
    "rdzv": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:677"),
    "rdzv_done": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:543"),
    "starting": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:685"),
    "detected": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:907"),
    "signal": ("torch.distributed.elastic.agent.server.api", f"{ELASTIC}/agent/server/api.py:719"),
    "closing": ("torch.distributed.elastic.multiprocessing.api", f"{ELASTIC}/multiprocessing/api.py:766"),
    "operator": ("torch.distributed.launcher.api", "torch/distributed/launcher/api.py:212"),
}
LEVEL = {"signal": "W", "closing": "W", "failed": "E"}
TORCH = "/usr/local/lib/python3.12/dist-packages/torch"


def _agent_pid(tl: JobTimeline, node: int) -> int:
    return 30_000 + (seed_of(tl) + 7919 * node) % 9_000


def agent(tl: JobTimeline, node: int, us: int, key: str, text: str, render: Rendering, order: int = 0) -> list[Out]:
    """One agent message, every line of it prefixed with the logging header (torch's formatter does)."""
    level = LEVEL.get(key, "I")
    module, where = AGENT[key]
    if render.trainer_version == "current":
        t = EPOCH + timedelta(microseconds=us)
        head = f"{level}{t:%m%d %H:%M:%S}.{t.microsecond // 1000 * 1000:06d} {_agent_pid(tl, node)} {where}]"
    else:
        name = {"I": "INFO", "W": "WARNING", "E": "ERROR"}[level]
        head = f"[{py_asctime(us)}] {module}: [{name}]"
    # one logging record is one write: its lines stay together (the merge sort is stable)
    return [(us, order, f"{head} {line}", node) for line in text.split("\n")]


def attempt_start(tl: JobTimeline, a: Attempt, render: Rendering) -> list[Out]:
    """Each node's agent at the attempt's start: its launch configs, the first rendezvous."""
    if render.launcher != "torchrun":
        return []
    spec, out = tl.spec, []
    for node in range(len(spec.hosts)):
        config = (
            "Starting elastic_operator with launch configs:\n"
            f"  entrypoint       : {_entrypoint(render)}\n"
            f"  min_nodes        : {len(spec.hosts)}\n"
            f"  max_nodes        : {len(spec.hosts)}\n"
            f"  nproc_per_node   : {spec.gpus_per_node}\n"
            f"  run_id           : {spec.job_id}\n"
            "  rdzv_backend     : c10d\n"
            f"  rdzv_endpoint    : {spec.hosts[0]}:29500\n"
            "  rdzv_configs     : {'timeout': 900}\n"
            f"  max_restarts     : {spec.elastic_restarts}\n"
            "  monitor_interval : 0.1\n"
            "  log_dir          : /tmp/torchelastic_lq0k1w3b\n"
            "  metrics_cfg      : {}\n"
        )
        out += agent(tl, node, a.start, "operator", config, render, -50)
        out += agent(tl, node, a.start, "rdzv", "[default] Rendezvous'ing worker group", render, -40)
        out += _rendezvous_done(tl, node, a.start, 0, render, -30)
        out += agent(tl, node, a.start, "starting", "[default] Starting worker group", render, -20)
    return out


def _entrypoint(render: Rendering) -> str:
    return {"megatron": "pretrain_gpt.py", "nemo2": "pretrain.py", "torchtitan": "torchtitan/train.py"}.get(
        render.trainer, "train.py"
    )


def _rendezvous_done(tl: JobTimeline, node: int, us: int, restarts: int, render: Rendering, order: int) -> list[Out]:
    g = tl.spec.gpus_per_node
    world = len(tl.spec.hosts) * g
    ranks = list(range(node * g, node * g + g))
    text = (
        "[default] Rendezvous complete for workers. Result:\n"
        f"  restart_count={restarts}\n"
        f"  master_addr={tl.spec.hosts[0]}\n"
        "  master_port=29500\n"
        f"  group_rank={node}\n"
        f"  group_world_size={len(tl.spec.hosts)}\n"
        f"  local_ranks={list(range(g))}\n"
        f"  role_ranks={ranks}\n"
        f"  global_ranks={ranks}\n"
        f"  role_world_sizes={[world] * g}\n"
        f"  global_world_sizes={[world] * g}\n"
    )
    return agent(tl, node, us, "rdzv_done", text, render, order)


def launch_end(tl: JobTimeline, x: Launch, nxt: Launch | None, render: Rendering) -> list[Out]:
    """The agents' lines after a launch ends: a restart in place, the last failure (ChildFailedError), or a
    signal from Slurm."""
    if render.launcher != "torchrun":
        return []
    if x.state in ("PREEMPTED", "TIMEOUT") or (x.failure is not None and x.failure.incident == "node_failure"):
        return _signalled(tl, x, render)
    if x.state != "FAILED" or x.failure is None or x.failure.incident is None:
        return []
    rank = x.failure.rank if x.failure.rank is not None else 0
    node = rank // tl.spec.gpus_per_node
    noticed = (x.noticed if x.noticed is not None else x.failure.at) + 200_000  # the worker has exited
    local = rank % tl.spec.gpus_per_node
    text = (
        f"failed (exitcode: {_exitcode(x)}) local_rank: {local} (pid: {worker_pid(tl, local)}) "
        "of binary: /usr/bin/python3"
    )
    out = agent(tl, node, noticed, "failed", text, render)
    if nxt is not None and nxt.attempt == x.attempt:
        return out + _restart(tl, x, nxt, node, noticed, render)
    return out + _child_failed(tl, x, node, rank, render)


def _exitcode(x: Launch) -> int:
    """NCCL's watchdog takes its process down with abort() (SIGABRT: -6); an exception exits 1."""
    return -6 if x.failure is not None and x.failure.incident == "nccl_timeout" else 1


def _restart(tl: JobTimeline, x: Launch, nxt: Launch, node: int, noticed: int, render: Rendering) -> list[Out]:
    """The failed node's agent counts the restart; the others see a node waiting and follow it."""
    k = sum(1 for y in tl.launches if y.attempt == x.attempt and y.number < x.number)
    total = tl.spec.elastic_restarts
    t = noticed + 100_000  # the next monitor tick (monitor_interval 0.1 s)
    out = agent(
        tl,
        node,
        t,
        "failed_group",
        f"[default] Worker group FAILED. {total - k}/{total} attempts left; will restart worker group",
        render,
        1,
    )
    out += agent(tl, node, t, "stopping", "[default] Stopping worker group", render, 2)
    for local in range(tl.spec.gpus_per_node):
        if local != (x.failure.rank or 0) % tl.spec.gpus_per_node:  # type: ignore[union-attr]
            out += agent(
                tl,
                node,
                t + 1000 * local,
                "closing",
                f"Closing process {worker_pid(tl, local)} via signal SIGTERM",
                render,
                3,
            )
    for n in range(len(tl.spec.hosts)):
        if n != node:
            out += agent(
                tl,
                n,
                x.end,
                "detected",
                f"[default] Detected 1 new nodes from group_rank={node}; will restart worker group",
                render,
                4,
            )
            out += agent(tl, n, x.end, "stopping", "[default] Stopping worker group", render, 5)
        out += agent(tl, n, x.end, "rdzv", "[default] Rendezvous'ing worker group", render, 6)
        out += _rendezvous_done(tl, n, nxt.start, k + 1 if n == node else 0, render, -30)
        out += agent(tl, n, nxt.start, "starting", "[default] Starting worker group", render, -20)
    return out


def _signalled(tl: JobTimeline, x: Launch, render: Rendering) -> list[Out]:
    """Slurm's SIGTERM reaches every agent; each stops its workers."""
    at = x.sigterm if x.sigterm is not None else (x.noticed if x.noticed is not None else x.end)
    out: list[Out] = []
    for node in range(len(tl.spec.hosts)):
        out += agent(tl, node, at, "signal", "Received 15 death signal, shutting down workers", render, 1)
        for local in range(tl.spec.gpus_per_node):
            out += agent(
                tl,
                node,
                at + 1000 * local,
                "closing",
                f"Closing process {worker_pid(tl, local)} via signal SIGTERM",
                render,
                2,
            )
    return out


def _child_failed(tl: JobTimeline, x: Launch, node: int, rank: int, render: Rendering) -> list[Out]:
    """torchrun gives up: its ChildFailedError traceback and summary, on the failed node's output."""
    f = x.failure
    assert f is not None
    when = (EPOCH + timedelta(microseconds=f.at)).strftime("%Y-%m-%d_%H:%M:%S")
    local = rank % tl.spec.gpus_per_node
    body = [
        "Traceback (most recent call last):",
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        "    sys.exit(main())",
        f'  File "{TORCH}/distributed/elastic/multiprocessing/errors/__init__.py", line 357, in wrapper',
        "    return f(*args, **kwargs)",
        f'  File "{TORCH}/distributed/run.py", line 918, in main',
        "    run(args)",
        f'  File "{TORCH}/distributed/run.py", line 909, in run',
        "    elastic_launch(",
        f'  File "{TORCH}/distributed/launcher/api.py", line 138, in __call__',
        "    return launch_agent(self._config, self._entrypoint, list(args))",
        f'  File "{TORCH}/distributed/launcher/api.py", line 269, in launch_agent',
        "    raise ChildFailedError(",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        f"{_entrypoint(render)} FAILED",
        "------------------------------------------------------------",
        "Failures:",
        "  <NO_OTHER_FAILURES>",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        f"  time      : {when}",
        f"  host      : {tl.spec.hosts[node]}",
        f"  rank      : {rank} (local_rank: {local})",
        f"  exitcode  : {_exitcode(x)} (pid: {worker_pid(tl, local)})",
        "  error_file: <N/A>",
        (
            f"  traceback : Signal 6 (SIGABRT) received by PID {worker_pid(tl, local)}"
            if _exitcode(x) == -6
            else "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        ),
        "============================================================",
    ]
    return [(x.end, 30 + i, text, node) for i, text in enumerate(body)]


def label(lines: list[Out], tl: JobTimeline, render: Rendering) -> list[str]:
    """`srun -l`: each task's line gets `N: ` (right-aligned to the widest task id, src/common/
    write_labelled_message.c); srun's and slurmstepd's own lines are not a task's."""
    if not render.srun_label:
        return [text for _, _, text, _ in lines]
    tasks = len(tl.spec.hosts) * (tl.spec.gpus_per_node if render.launcher == "srun" else 1)
    width = len(str(max(tasks - 1, 0)))
    return [text if task == NO_TASK else f"{task:>{width}}: {text}" for _, _, text, task in lines]
