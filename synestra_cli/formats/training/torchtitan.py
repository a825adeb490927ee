"""torchtitan training logs (log-formats.md D.4).

  [rank0]:[titan] 2025-06-25 12:56:09,436 - root - INFO - step: 20  loss:  8.5802  memory: 49.66GiB(52.28%)
      tps: 5,917  tflops: 342.67  mfu: 34.65%
  ... - Saving the checkpoint (or staging if async is enabled).            (2025 wording)
  ... - Finished saving the checkpoint (or staging if async is enabled)in 0.02 seconds.
  ... - Saving the checkpoint. | Staging the checkpoint.                   (current wording; staging = async)
  ... - Finished saving|staging the checkpoint in 0.02 seconds.
  [rank0]:[0] ... - Received async checkpoint request with id=./outputs/checkpoint/step-800
  [rank0]:[0] ... - Submitted checkpoint save request for checkpoint_id=...step-1...
The `[rankN]:` prefix and ANSI colour codes are removed by joblog. `tps` (tokens per second per device,
with thousands separators) -> tokens_per_s; torchtitan prints no step time. A checkpoint line without
a step number belongs to the step logged just before it. "Finished ... (or staging ...)" ends the
blocking part: the save's end if nothing says it was async, its scheduled phase if the checkpoint
process then receives the request; "Submitted checkpoint save request" is that process done (finalized).
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

STEP_SQL = r"""
SELECT sid, pos, lineno, rank, 'step' AS fact, ts, ts_precision,
    CAST(regexp_extract(body, ' - step:\s*(\d+)\s', 1) AS BIGINT) AS iteration,
    TRY_CAST(regexp_extract(body, '\sloss:\s*([0-9.]+)', 1) AS DOUBLE) AS loss,
    TRY_CAST(replace(regexp_extract(body, '\stps:\s*([0-9,]+)', 1), ',', '') AS DOUBLE) AS tokens_per_s,
    TRY_CAST(nullif(regexp_extract(body, '\stflops:\s*([0-9.]+)', 1), '') AS DOUBLE) AS tflops_per_gpu
FROM jl_lines WHERE contains(body, ' - step:') AND regexp_matches(body, ' - step:\s*\d+\s+loss:')
"""

CKPT_SQL = r"""
WITH c AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
        TRY_CAST(nullif(regexp_extract(body, '(?:step-|at last step, step |Loading the checkpoint at step )(\d+)', 1),
                        '') AS BIGINT) AS it,
        nullif(regexp_extract(body, '(?:id=|checkpoint_id=''|Loading the checkpoint from )'
                                    '([^\s'',]+?)\.?(?:''|$|\s)', 1), '')
            AS path,
        TRY_CAST(nullif(coalesce(nullif(regexp_extract(body, 'the checkpoint(?: \(or staging if async is enabled\))? ?'
                                                              'in ([0-9.]+) seconds', 1), ''),
                                 regexp_extract(body, 'Last step checkpoint completed in ([0-9.]+)s', 1)), '')
            AS DOUBLE) AS secs
    FROM jl_lines WHERE contains(body, 'checkpoint')
)
SELECT sid, pos, lineno, ts, ts_precision, it AS iteration, path,
    CASE WHEN regexp_matches(body, ' - (Saving the checkpoint|Saving a (full|model only) checkpoint .*at last step)')
              THEN 'save_start'
         WHEN contains(body, ' - Staging the checkpoint.') THEN 'save_start'
         WHEN contains(body, ' - Finished saving the checkpoint (or staging') THEN 'save_sched'
         WHEN contains(body, ' - Finished staging the checkpoint') THEN 'save_sched'
         WHEN contains(body, ' - Finished saving the checkpoint in') THEN 'save_end'
         WHEN contains(body, ' - Last step checkpoint completed in ') THEN 'save_end'
         WHEN contains(body, ' - Received async checkpoint request with id=') THEN 'save_sched'
         WHEN contains(body, ' - Submitted checkpoint save request for checkpoint_id=') THEN 'save_end'
         WHEN regexp_matches(body, ' - Loading the checkpoint (from|at step)') THEN 'load_start'
         WHEN contains(body, ' - Finished loading the checkpoint in') THEN 'load_end' END AS fact,
    CASE WHEN regexp_matches(body, ' - (Staging the checkpoint|Finished staging|'
                                   'Received async checkpoint|Submitted checkpoint save)')
         THEN true END AS is_async,
    CASE WHEN regexp_matches(body, ' - (Finished |Last step checkpoint completed)') AND NOT contains(body, 'loading')
         THEN secs END AS blocking_s,
    -- the checkpoint process's lines: the write goes on beside the training, which its trainer already resumed
    CASE WHEN regexp_matches(body, ' - (Received async checkpoint|Submitted checkpoint save)') THEN 'process'
    END AS kind
FROM c WHERE fact IS NOT NULL
"""

# trainer.py: "Training starts at step N" after the load (N - 1 steps were done: the loop's start), "Training
# completed" at its end.
MARKS_SQL = r"""
SELECT sid, pos, lineno, 'mark' AS fact, ts, ts_precision, trim(body) AS message,
    CASE WHEN contains(body, ' - Training starts at step ') THEN 'loop_start' ELSE 'training_done' END AS kind,
    TRY_CAST(nullif(regexp_extract(body, ' - Training starts at step (\d+)', 1), '') AS BIGINT) AS iteration
FROM jl_lines WHERE contains(body, ' - Training starts at step ') OR regexp_matches(body, ' - Training completed\s*$')
"""

BANNER_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE contains(body, ' - INFO - Starting job: ') AND regexp_matches(body, '\] .* - INFO - Starting job: ')
"""


def sniff(head: str) -> float:
    step_line = r"^(?:\[rank\d+\]:)?(?:\[titan\] )?\d{4}-.* - step:\s*\d+\s+loss:"
    return 0.9 if joblog_sniff.has_line(head, step_line, " - step:") else 0.0


FORMAT = joblog.job_log_format(
    "torchtitan",
    "torchtitan training log (step lines, checkpoint save/stage/load)",
    sniff,
    [STEP_SQL, CKPT_SQL, BANNER_SQL, MARKS_SQL],
    top=0.9,
    priority=170,
)
