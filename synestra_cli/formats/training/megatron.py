"""Megatron-LM training logs (stdout of pretrain_gpt.py & co.) and its `--log-progress` progress.txt.

Wording follows megatron/training/training.py and checkpointing.py (log-formats.md D.1, D.2):
  [2024-04-06 02:59:36] iteration       43/     100 | consumed samples: 5504 | elapsed time per
      iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): 239.8 | ... | lm loss: 1.825991E+00 | ...
  saving checkpoint at iteration     500 to /ckpt in torch_dist format
  scheduled an async checkpoint save at iteration     500 to /ckpt
  successfully saved checkpoint from iteration     500 to /ckpt [ t 1/8, p 1/1 ]
  successfully saved checkpoint at iteration     500 to /ckpt                 (before 2024-05, Megatron-DeepSpeed)
  loading distributed checkpoint from /ckpt at iteration 500
  successfully loaded checkpoint from /ckpt [ t 1/8, p 1/1 ] at iteration 500
  (min, max) time across ranks (ms):
      save-checkpoint ................................: (8123.45, 8130.02)
  (min, max) time across ranks (ms):
      load-checkpoint ................................: (48123.45, 48130.02)     (the load's duration)
  (`max time across ranks (ms):` / `    load-checkpoint ...: 48130.02` with --timing-log-option max)
  [after megatron is initialized] datetime: 2024-04-06 02:58:10.123456
  [after model, optimizer, and learning rate scheduler are built] datetime: ...   (after the load)
  [before the start of training step] datetime: ...
  [after training is done] datetime: ...                                          (before the final save)
  [exiting program after receiving SIGTERM.] datetime: 2024-04-06 03:10:00
The iteration line is printed by the last rank once per --log-interval; its values are averages over
the interval (step_time_s as printed), and the first one after a (re)start includes start-up time.
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

ITER_RE = r" iteration\s+(\d+)/\s*\d+ \|"

STEP_SQL = rf"""
SELECT sid, pos, lineno, rank, 'step' AS fact, ts, ts_precision,
    CAST(regexp_extract(body, '{ITER_RE}', 1) AS BIGINT) AS iteration,
    TRY_CAST(regexp_extract(body, 'elapsed time per iteration \(ms\): ([0-9.]+)', 1) AS DOUBLE) / 1000 AS step_time_s,
    TRY_CAST(nullif(regexp_extract(body, 'throughput per GPU \(TFLOP/s/GPU\): ([0-9.]+)', 1), '') AS DOUBLE)
        AS tflops_per_gpu,
    TRY_CAST(nullif(coalesce(nullif(regexp_extract(body, '\| lm loss: ([0-9.Ee+-]+)', 1), ''),
                             regexp_extract(body, '\| [a-z ]*loss: ([0-9.Ee+-]+) \|', 1)), '') AS DOUBLE) AS loss
FROM jl_lines
WHERE contains(body, ' iteration') AND regexp_matches(body, '{ITER_RE}')
  AND regexp_matches(body, 'elapsed time per iteration \(ms\): [0-9.]+')
"""

# An iteration line cut short (no elapsed time): a broken framework line, counted as a reject. (NeMo 2's
# `Training epoch 0, iteration 3/19 | ...` is nemo.py's step line, not a cut Megatron one.)
REJECT_SQL = rf"""
SELECT sid, pos, lineno, 'reject' AS fact, 'Megatron iteration line without its elapsed time (truncated?)' AS message
FROM jl_lines
WHERE contains(body, ' iteration') AND regexp_matches(body, '{ITER_RE}')
  AND NOT regexp_matches(body, 'elapsed time per iteration \(ms\): [0-9.]+') AND NOT contains(body, 'Training epoch ')
"""

CKPT_SQL = r"""
WITH m AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
        regexp_extract(body, 'saving checkpoint at iteration\s+(\d+) to (\S+)', ['it', 'path']) AS save,
        regexp_extract(body, 'scheduled an async checkpoint save at iteration\s+(\d+) to (\S+)',
                       ['it', 'path']) AS sched,
        regexp_extract(body, 'successfully saved (?:local )?checkpoint (?:from|at) iteration\s+(\d+)(?: to (\S+))?',
                       ['it', 'path']) AS saved,
        regexp_extract(body, 'loading (?:dist |distributed )?checkpoint from (\S+) at iteration (\d+)',
                       ['path', 'it']) AS load,
        regexp_extract(body, 'successfully loaded checkpoint from (\S+).* at iteration (\d+)',
                       ['path', 'it']) AS loaded,
        regexp_extract(body, '^\s+(save|load)-checkpoint \.*: \(?([0-9.]+)(?:, ([0-9.]+))?\)?\s*$',
                       ['what', 'first', 'max']) AS timer
    FROM jl_lines
    WHERE contains(body, 'checkpoint')
      AND regexp_matches(body, 'checkpoint (at|from) iteration|checkpoint save at iteration|'
                               'checkpoint from \S+ .*at iteration|(save|load)-checkpoint \.')
), t AS (
    SELECT *, TRY_CAST(coalesce(nullif(timer.max, ''), nullif(timer.first, '')) AS DOUBLE) AS timer_ms FROM m
)
SELECT sid, pos, lineno, ts, ts_precision,
    CASE WHEN sched.it <> '' THEN 'save_sched' WHEN saved.it <> '' THEN 'save_end' WHEN save.it <> '' THEN 'save_start'
         WHEN loaded.it <> '' THEN 'load_end' WHEN load.it <> '' THEN 'load_start'
         WHEN timer.what = 'save' AND timer_ms IS NOT NULL THEN 'save_block'
         WHEN timer.what = 'load' AND timer_ms IS NOT NULL THEN 'load_block' END AS fact,
    TRY_CAST(coalesce(nullif(sched.it, ''), nullif(saved.it, ''), nullif(save.it, ''), nullif(loaded.it, ''),
                      nullif(load.it, '')) AS BIGINT) AS iteration,
    nullif(coalesce(nullif(sched.path, ''), nullif(saved.path, ''), nullif(save.path, ''), nullif(loaded.path, ''),
                    load.path), '') AS path,
    CASE WHEN sched.it <> '' THEN true END AS is_async,
    timer_ms / 1000 AS blocking_s
FROM t WHERE fact IS NOT NULL
"""

# Start-up banners (one per process start) and the SIGTERM exit line.
BANNER_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE (contains(body, 'world size: ') OR contains(body, 'megatron ')) AND regexp_matches(body,
          '(^\s*|\] )using world size: \d+|time to initialize megatron \(seconds\)|'
          '\[after megatron is initialized\] datetime:')
   OR contains(body, 'Job ID: ')
      AND regexp_matches(body, '^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\tJob ID: \d+\t# GPUs: \d+\tStarting job')
"""

# print_datetime's marks of a (re)start, each with its own time (megatron/training/training.py): initialised,
# model and optimizer built (after the checkpoint load), the training loop entered, training done (before the
# final save).
MARKS_SQL = r"""
SELECT sid, pos, lineno, 'mark' AS fact, ts, ts_precision, trim(body) AS message,
    CASE WHEN contains(body, '[after megatron is initialized]') THEN 'initialized'
         WHEN contains(body, '[after model, optimizer, and learning rate scheduler are built]') THEN 'built'
         WHEN contains(body, '[before the start of training step]') THEN 'loop_start'
         WHEN contains(body, '[after training is done]') THEN 'training_done' END AS kind
FROM jl_lines WHERE contains(body, '] datetime: ') AND kind IS NOT NULL
"""

# Megatron prints the world size (one rank per GPU) at every start: the job's GPU count.
WORLD_SQL = r"""
SELECT sid, pos, lineno, 'job' AS fact, TRY_CAST(regexp_extract(body, 'using world size: (\d+)', 1) AS INTEGER) AS gpus
FROM jl_lines WHERE contains(body, 'using world size: ') AND regexp_matches(body, '(^\s*|\] )using world size: \d+')
"""

SIGTERM_SQL = r"""
SELECT sid, pos, lineno, 'incident' AS fact, ts, ts_precision, 'sigterm' AS kind, rank, trim(body) AS message,
    json_object('source', 'megatron') AS fields
FROM jl_lines WHERE contains(body, '[exiting program after receiving SIGTERM.]')
"""

# progress.txt: `<ts>\tJob ID: N\t# GPUs: G\t<message>[\tIteration: I\tJob throughput: X TFLOP/s/GPU...]`.
PROGRESS_SQL = r"""
WITH p AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
        regexp_extract(body, '\tJob ID: (\d+)\t# GPUs: (\d+)\t([^\t]*)', ['job', 'gpus', 'msg']) AS h,
        TRY_CAST(nullif(regexp_extract(body, '\tIteration: (\d+)', 1), '') AS BIGINT) AS it,
        TRY_CAST(nullif(regexp_extract(body, '\tJob throughput: ([0-9.]+) TFLOP/s/GPU', 1), '') AS DOUBLE) AS tflops
    FROM jl_lines
    WHERE contains(body, 'Job ID: ')
      AND regexp_matches(body, '^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\tJob ID: \d+\t# GPUs: \d+\t')
)
SELECT sid, pos, lineno, 'job' AS fact, h.job AS job_id, TRY_CAST(h.gpus AS INTEGER) AS gpus FROM p
UNION ALL BY NAME
SELECT sid, pos, lineno, 'save_start' AS fact, ts, ts_precision, it AS iteration,
    CASE WHEN contains(lower(h.msg), 'async') THEN true END AS is_async
FROM p WHERE contains(lower(h.msg), 'checkpoint') AND it IS NOT NULL
UNION ALL BY NAME
SELECT sid, pos, lineno, 'step' AS fact, ts, ts_precision, it AS iteration, tflops AS tflops_per_gpu
FROM p WHERE tflops IS NOT NULL AND it IS NOT NULL
"""


def sniff(head: str) -> float:
    if joblog_sniff.has_line(
        head,
        r"^(?:\[rank\d+\]:)?\s*(?:\[[\d\- :.]+\]\s*)?iteration\s+\d+/\s*\d+ "
        r"\| consumed samples:",
        "| consumed samples:",
    ):
        return 0.9
    if joblog_sniff.has_line(head, r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\tJob ID: \d+\t# GPUs: \d+\t", "\tJob ID: "):
        return 0.9
    if joblog_sniff.has_line(
        head,
        r"^\s*(?:\[[\d\- :.]+\]\s*)?(saving|loading (dist |distributed )?|successfully saved )checkpoint "
        r"(at|from \S+ at) iteration",
        "checkpoint ",
    ):
        return 0.7
    # A job that died (or ended) before its first logged iteration still printed Megatron's banner.
    if joblog_sniff.has_line(
        head,
        r"^\s*(?:\[[\d\- :.]+\]\s*)?(using world size: \d+, data-parallel size|"
        r"\[after megatron is initialized\] datetime:)",
        "using world size: ",
        "[after megatron is initialized] datetime:",
    ):
        return 0.6
    return 0.0


FORMAT = joblog.job_log_format(
    "megatron",
    "Megatron-LM training log (iteration lines, checkpoint save/load, timers) or progress.txt",
    sniff,
    [STEP_SQL, REJECT_SQL, CKPT_SQL, BANNER_SQL, WORLD_SQL, SIGTERM_SQL, PROGRESS_SQL, MARKS_SQL],
    top=0.9,
    priority=190,
)
