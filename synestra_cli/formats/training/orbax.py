"""JAX / Orbax checkpoint lines in absl (glog-style) logs, as MaxText and ml-goodput tests print them.

  I0608 20:54:47.918725 123567287061632 checkpoint_manager.py:1512] [process=0] Saving checkpoint at step 19
  I0608 20:54:47.918797 123567287061632 event_tracking.py:70] [process=0] [async] Started save checkpoint
      @ /dev/shm/goodput/SYNTHETIC_TEST/checkpoints/19.
The absl header has no year: joblog takes it from the surrounding log, else --year / the file's mtime.
A save's end: `[process=0][thread=MainThread][step=749] Finished synchronous save.` (checkpoint_manager.py) or
`... Finished saving checkpoint (finalized tmp dir) to `/…/749`.` (path/atomicity.py); a restore: `Restoring
checkpoint from /…/749.` (checkpointers/checkpointer.py) and, in 2024 releases, `Finished restoring checkpoint
from /…/749.` (google/orbax @ 3ff7b24, 2026-08; the sim-trainers notes cite the 2024 one).
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

CKPT_SQL = r"""
SELECT sid, pos, lineno, ts, ts_precision,
    CASE WHEN regexp_matches(body, '\] \[process=\d+\] Saving checkpoint at step ') THEN 'save_start'
         WHEN contains(body, '[async] Started save checkpoint') THEN 'save_sched'
         WHEN contains(body, '] Finished synchronous save.') THEN 'save_end'
         WHEN contains(body, ' Finished saving checkpoint (finalized tmp dir) to ') THEN 'save_end'
         WHEN regexp_matches(body, '\] Restoring checkpoint from ') THEN 'load_start'
         WHEN regexp_matches(body, '\] Finished restoring checkpoint from ') THEN 'load_end' END AS fact,
    TRY_CAST(nullif(coalesce(
        nullif(regexp_extract(body, 'Saving checkpoint at step (\d+)', 1), ''),
        nullif(regexp_extract(body, '\]\[step=(\d+)\] Finished synchronous save', 1), ''),
        regexp_extract(body, '(?:Started save checkpoint @|finalized tmp dir\) to|[Rr]estoring checkpoint from) '
                             '`?\S*?/(\d+)`?\.?$', 1)), '') AS BIGINT) AS iteration,
    nullif(regexp_extract(body, '(?:Started save checkpoint @|finalized tmp dir\) to|[Rr]estoring checkpoint from) '
                                '`?(\S+?)`?\.?$', 1), '') AS path,
    CASE WHEN contains(body, '[async] Started save checkpoint') THEN true END AS is_async
FROM jl_lines
WHERE (contains(body, '[process=') OR contains(body, 'estoring checkpoint from ')) AND fact IS NOT NULL
"""

# MaxText's step line (docs/guides/monitoring_and_debugging/understand_logs_and_metrics.md), every step, no time of
# its own: `completed step: 749, seconds: 5.667, TFLOP/s/device: 134.924, Tokens/s/device: 8672.758, total_weights:
# 196608, loss: 10.374`. MaxText and Orbax count steps from 0 (the checkpoint of step 749 holds 750 steps): kept as
# printed, the same numbering as the checkpoint lines.
STEP_SQL = r"""
SELECT sid, pos, lineno, rank, 'step' AS fact, ts, ts_precision,
    CAST(regexp_extract(body, 'completed step: (\d+), seconds: ', 1) AS BIGINT) AS iteration,
    TRY_CAST(nullif(regexp_extract(body, ', seconds: ([0-9.]+)', 1), '') AS DOUBLE) AS step_time_s,
    TRY_CAST(nullif(regexp_extract(body, ', TFLOP/s/device: ([0-9.]+)', 1), '') AS DOUBLE) AS tflops_per_gpu,
    TRY_CAST(nullif(regexp_extract(body, ', Tokens/s/device: ([0-9.]+)', 1), '') AS DOUBLE) AS tokens_per_s,
    TRY_CAST(nullif(regexp_extract(body, ', loss: ([0-9.]+)', 1), '') AS DOUBLE) AS loss
FROM jl_lines WHERE contains(body, 'completed step: ') AND regexp_matches(body, 'completed step: \d+, seconds: ')
"""


# XLA's failure of a step on a GPU, before the XlaRuntimeError it raises (jax-ml/jax issues 15628, 22747):
#   2024-04-19 12:00:01.123456: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] Execution of replica 0
#   failed: INTERNAL: Failed to execute XLA Runtime executable: run time error: custom call 'xla.gpu.all_reduce'
#   failed: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclGroupEnd() failed: unhandled cuda error
# -> an nccl_error (a collective's NCCL call failed) or a cuda_error, dated by XLA's own stamp.
XLA_SQL = r"""
SELECT sid, pos, lineno, 'incident' AS fact, ts, ts_precision, rank,
    CASE WHEN contains(body, 'NCCL') THEN 'nccl_error' ELSE 'cuda_error' END AS kind,
    trim(regexp_extract(body, '(Execution of replica \d+ failed: .*)', 1)) AS message,
    json_object('source', 'xla', 'replica', TRY_CAST(regexp_extract(body, 'Execution of replica (\d+) failed', 1)
                                                     AS INTEGER)) AS fields
FROM jl_lines
WHERE contains(body, 'Execution of replica ') AND regexp_matches(body, 'Execution of replica \d+ failed: ')
"""


def sniff(head: str) -> float:
    manager_line = r"^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ checkpoint_manager\.py:\d+\]"
    if joblog_sniff.has_line(head, manager_line, "checkpoint_manager.py:"):
        return 0.6
    return 0.55 if joblog_sniff.has_line(head, r"completed step: \d+, seconds: [0-9.]+, ", "completed step: ") else 0.0


FORMAT = joblog.job_log_format(
    "orbax_log",
    "JAX/Orbax absl log (checkpoint_manager saves and restores, MaxText's `completed step:` lines)",
    sniff,
    [CKPT_SQL, STEP_SQL, XLA_SQL],
    top=0.6,
    priority=150,
)
