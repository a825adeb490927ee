"""NeMo (1 and 2) / PyTorch Lightning training logs (log-formats.md D.3).

  [NeMo I 2025-06-18 21:57:23 nemo_logging:393] Global Checkpoint Save : Rank: 0 : Iteration: 9 :
      Start time: 1750309040.832s : Save duration: 2.746s
  [NeMo I 2025-06-18 21:57:35 nemo_logging:393] Scheduled async checkpoint save for /ckpt/...-last.ckpt
  [NeMo I 2025-06-18 22:03:27 nemo_logging:393] Successfully saved checkpoint from iteration       9 to /ckpt/...
  [NeMo I 2025-06-18 22:03:28 nemo_logging:393] Async checkpoint save for step 10 (/ckpt/...) finalized successfully.
  [NeMo I 2024-04-24 21:32:08 nlp_overrides:1156] Model X was successfully restored from /ckpt.
Iterations are stored Megatron-style: PTL's "step 10" (global_step, steps completed) is Megatron's
"iteration 9" for the same checkpoint, so NeMo/PTL step numbers are stored as step - 1. The save's
start is the log time minus "Save duration" (the line is printed when the blocking part ends; its
"Start time" is epoch seconds, while the log times are local). Finalisation may come minutes later.
The "Successfully saved checkpoint from iteration" line is Megatron-core's (megatron.py reads it).
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

CKPT_SQL = r"""
WITH n AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
        regexp_extract(body, 'Global Checkpoint Save : Rank: \d+ : Iteration: (\d+) : Start time: ([0-9.]+)s : '
                       'Save duration: ([0-9.]+)s', ['it', 'epoch', 'dur']) AS g,
        regexp_extract(body, 'Global Checkpoint Load : Rank ?: \d+ : Start time ?: ([0-9.]+)s : '
                       'Time spent in load_checkpoint: ([0-9.]+)s', ['epoch', 'dur']) AS gload,
        regexp_extract(body, 'Async checkpoint save for step (\d+) \((.*)\) finalized successfully',
                       ['step', 'path']) AS fin,
        regexp_extract(body, 'Epoch \d+, global step (\d+): .* saving model to ''([^'']+)''', ['step', 'path']) AS ptl,
        regexp_extract(body, '(Restoring states from the checkpoint path at|Restored all states from the checkpoint '
                             'at|was successfully restored from) (\S+?)\.?$', ['what', 'path']) AS rest
    FROM jl_lines
    WHERE (contains(body, 'heckpoint') OR contains(body, 'saving model to') OR contains(body, 'restored from'))
      AND regexp_matches(body, 'Global Checkpoint (Save|Load) :|Scheduled async checkpoint save for|'
                               'Async checkpoint save for step|saving model to|successfully restored from|'
                               'Loading distributed checkpoint with|Restoring states from the checkpoint path at|'
                               'Restored all states from the checkpoint at|Preemption detected, saving checkpoint')
)
-- NeMo's Global Checkpoint lines print their start as epoch seconds (UTC, to the millisecond) and are logged at
-- its end: the save's and the load's start to the millisecond, in the log's own clock (the log's stamp less the
-- epoch's end, rounded to a quarter of an hour, is its zone's offset when --timezone was not given: a log's times
-- stay consistent with each other), also where the lines around them carry no time (Lightning's).
, e0 AS (
    SELECT *, TRY_CAST(coalesce(nullif(g.epoch, ''), nullif(gload.epoch, '')) AS DOUBLE) AS epoch_s,
        TRY_CAST(coalesce(nullif(g.dur, ''), nullif(gload.dur, '')) AS DOUBLE) AS dur_s
    FROM n
), e AS (
    SELECT *, make_timestamp(CAST((epoch_s + 900 * round((epoch(ts) - epoch_s - dur_s) / 900)) * 1e6 AS BIGINT))
        AS epoch_ts
    FROM e0
), r AS (
    SELECT * REPLACE (CASE WHEN epoch_ts IS NOT NULL THEN 'exact' ELSE ts_precision END AS ts_precision),
        CASE WHEN g.it <> '' THEN 'save_start' WHEN contains(body, 'Scheduled async checkpoint save for')
                 THEN 'save_sched'
             WHEN fin.step <> '' THEN 'save_end' WHEN ptl.step <> '' THEN 'save_start'
             WHEN contains(body, 'Preemption detected, saving checkpoint') THEN 'save_start'
             WHEN gload.epoch <> '' THEN 'load_start'
             WHEN rest.what IN ('Restored all states from the checkpoint at', 'was successfully restored from')
                  THEN 'load_end'
             WHEN rest.what <> '' OR contains(body, 'Loading distributed checkpoint with') THEN 'load_start'
        END AS fact,
        coalesce(epoch_ts, ts) AS ts1
    FROM e
), rows AS (
    SELECT * FROM r
    UNION ALL  -- the load's end: its start and the time it took
    SELECT * REPLACE ('load_end' AS fact, epoch_ts + to_microseconds(CAST(CAST(gload.dur AS DOUBLE) * 1e6 AS BIGINT))
                      AS ts1)
    FROM r WHERE gload.epoch <> '' AND epoch_ts IS NOT NULL
)
SELECT sid, pos, lineno, ts_precision, fact, ts1 AS ts,
    -- Megatron-core's iteration (zero-based, as NeMo's progress lines) as printed; Lightning's global step as
    -- printed and NeMo's "step N" (steps completed) less one, both snapped to the Megatron-core line next to them
    TRY_CAST(coalesce(nullif(g.it, ''), CAST(TRY_CAST(nullif(fin.step, '') AS BIGINT) - 1 AS VARCHAR),
                      nullif(ptl.step, ''),
                      nullif(regexp_extract(rest.path, '[-_]step=(\d+)', 1), ''),
                      -- a scheduled save's file names its step as the restore's does: a save begun after a step
                      -- whose progress line was never printed (a straggler stop) is that step's, not the last logged
                      CASE WHEN contains(body, 'Scheduled async checkpoint save for') THEN
                          nullif(regexp_extract(body, 'Scheduled async checkpoint save for \S*[-_]step=(\d+)', 1), '')
                      END) AS BIGINT) AS iteration,
    fin.step <> '' OR ptl.step <> '' AS loose,
    nullif(coalesce(nullif(fin.path, ''), nullif(ptl.path, ''),
                    nullif(regexp_extract(body, 'Scheduled async checkpoint save for (\S+)', 1), ''),
                    rest.path), '') AS path,
    CASE WHEN fin.step <> '' OR contains(body, 'Scheduled async') THEN true END AS is_async,
    TRY_CAST(coalesce(nullif(g.dur, ''), nullif(gload.dur, '')) AS DOUBLE) AS blocking_s
FROM rows WHERE fact IS NOT NULL
"""

# NeMo 2 progress printer (one line per step, no time of its own; `0: ` / launcher prefixes allowed):
#   Training epoch 0, iteration 1/9 | lr: 2e-05 | global_batch_size: 1 | global_step: 1 | reduced_train_loss: 1.37
#       | train_step_timing in s: 0.3513 | consumed_samples: 2 [| TFLOPS_per_GPU: 865.7]
#       [| tokens_per_sec_per_gpu: 1.07e+04]
# Its iteration is 0-based, as NeMo's own "Successfully saved checkpoint from iteration 9" (max_steps=10).
STEP_SQL = r"""
SELECT sid, pos, lineno, rank, 'step' AS fact, ts, ts_precision,
    CAST(regexp_extract(body, 'Training epoch \d+, iteration (\d+)/\d+ \|', 1) AS BIGINT) AS iteration,
    TRY_CAST(nullif(regexp_extract(body, '\| train_step_timing in s: ([0-9.e+-]+)', 1), '') AS DOUBLE) AS step_time_s,
    TRY_CAST(nullif(regexp_extract(body, '\| reduced_train_loss: ([0-9.e+-]+)', 1), '') AS DOUBLE) AS loss,
    TRY_CAST(nullif(regexp_extract(body, '\| TFLOPS_per_GPU: ([0-9.e+-]+)', 1), '') AS DOUBLE) AS tflops_per_gpu,
    TRY_CAST(nullif(regexp_extract(body, '\| tokens_per_sec_per_gpu: ([0-9.e+-]+)', 1), '') AS DOUBLE) AS tokens_per_s
FROM jl_lines
WHERE contains(body, 'Training epoch ') AND regexp_matches(body, 'Training epoch \d+, iteration \d+/\d+ \|')
"""


# NeMo 2's PreemptionCallback (lightning/pytorch/callbacks/preemption.py): the signal's arrival, before its save.
SIGNAL_SQL = r"""
SELECT sid, pos, lineno, 'incident' AS fact, ts, ts_precision, 'sigterm' AS kind, rank, trim(body) AS message,
    json_object('source', 'nemo', 'signal', regexp_extract(body, 'Received signal (\d+), initiating graceful stop', 1))
        AS fields
FROM jl_lines
WHERE contains(body, 'initiating graceful stop') AND regexp_matches(body, 'Received signal \d+, initiating')
"""

# Lightning prints its accelerator and, in a distributed run, its rank at every process start (trainer/setup.py
# _log_device_info, fabric strategies/ddp.py): a start-up banner (a requeued attempt appended to the same log).
BANNER_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE (starts_with(body, 'GPU available: ') AND contains(body, ', used: '))
   OR starts_with(body, 'Initializing distributed: GLOBAL_RANK: ')
"""

# Lightning's end of fit (loops/fit_loop.py): training is done, the final save is behind it.
MARKS_SQL = r"""
SELECT sid, pos, lineno, 'mark' AS fact, ts, ts_precision, 'training_done' AS kind, trim(body) AS message
FROM jl_lines WHERE contains(body, '`Trainer.fit` stopped: ')
"""


def sniff(head: str) -> float:
    if joblog_sniff.has_line(head, r"^(?:\[rank\d+\]:)?\[NeMo [IWE] \d{4}-\d\d-\d\d [\d:]{8} ", "[NeMo "):
        return 0.85
    epoch_line = r"^(?:\S+ )?Training epoch \d+, iteration \d+/\d+ \| "
    return 0.8 if joblog_sniff.has_line(head, epoch_line, "Training epoch ") else 0.0


FORMAT = joblog.job_log_format(
    "nemo",
    "NeMo / PyTorch Lightning training log ([NeMo I ...] checkpoint lines, async finalisation)",
    sniff,
    [CKPT_SQL, STEP_SQL, SIGNAL_SQL, BANNER_SQL, MARKS_SQL],
    top=0.85,
    priority=180,
)
