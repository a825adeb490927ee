"""Hugging Face Trainer (transformers, Accelerate) training logs.

Wording from transformers' trainer.py (4.45 to 4.57: the line numbers move, the words do not) with the explicit
format the example scripts and LLaMA-Factory turn on (utils/logging.py `enable_explicit_format`), as in the real
excerpts of transformers PR 14946 and PR 27820 (tests/data/real_samples/training):
  [INFO|trainer.py:2033] 2021-12-26 19:42:00,421 >> Saving model checkpoint to finetuned-ro-en-dev/checkpoint-2
  [INFO|trainer.py:2519] 2025-12-18 13:20:01,003 >> ***** Running training *****
  [INFO|trainer.py:2934] … >> Loading model from /out/checkpoint-500.
  [INFO|trainer.py:2551] … >>   Continuing training from global step 500
  … >> Training completed. Do not forget to share your model on huggingface.co/models =)
checkpoint-N holds N optimizer steps (global_step, counted as completed): the iteration as printed. A save's end
is not logged (the weights, optimizer and scheduler are written without a line): joblog_times dates it from the
next step. Under DeepSpeed the same save goes on with DeepSpeed's own lines (`global_stepN`, the same N): one save.
Steps come from tqdm's bar, `  12%|█▏        | 120/1000 [12:00<1:28:00,  6.00s/it]`, redrawn after every step
(joblog splits the redraws a `\\r` glues on one line; the last of each line is read): no time of its own, but its
elapsed time since the bar began, which is when the training began (`***** Running training *****`, or the last
`Continuing training from global step N` of a resume): ts = that line's + elapsed, ts_precision 'estimated', and
the step time the elapsed time between two bars per step.
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

# The bar's training start: the last dated line that begins (or resumes) the training before it.
STEP_SQL = r"""
WITH bars AS (
    SELECT sid, pos, lineno, rank,
        regexp_extract(body, '\d+%\|[^|]*\| (\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<',
                       ['n', 'total', 'h', 'm', 's']) AS b
    FROM jl_lines WHERE contains(body, '%|') AND regexp_matches(body, '\d+%\|[^|]*\| \d+/\d+ \[')
    QUALIFY row_number() OVER (PARTITION BY sid, lineno ORDER BY pos DESC) = 1
), starts AS (
    SELECT sid, pos, ts FROM jl_lines
    WHERE ts_precision = 'exact' AND (contains(body, '***** Running training *****')
                                      OR contains(body, 'Continuing training from global step '))
), dated AS (
    SELECT b.sid, b.pos, b.lineno, b.rank, TRY_CAST(b.b.n AS BIGINT) AS iteration, s.pos AS start_pos,
        coalesce(TRY_CAST(nullif(b.b.h, '') AS INTEGER), 0) * 3600 + TRY_CAST(b.b.m AS INTEGER) * 60
            + TRY_CAST(b.b.s AS INTEGER) AS elapsed_s, s.ts AS begun
    FROM bars b ASOF LEFT JOIN starts s ON s.sid = b.sid AND b.pos > s.pos
)
SELECT sid, pos, lineno, rank, 'step' AS fact, iteration,
    begun + to_microseconds(CAST(elapsed_s AS BIGINT) * 1000000) AS ts, CASE WHEN begun IS NOT NULL THEN 'estimated' END
        AS ts_precision,
    (elapsed_s - lag(elapsed_s) OVER w) / nullif(iteration - lag(iteration) OVER w, 0) AS step_time_s
FROM dated WHERE begun IS NOT NULL AND iteration > 0
WINDOW w AS (PARTITION BY sid, start_pos ORDER BY pos)
"""

CKPT_SQL = r"""
SELECT sid, pos, lineno, ts, ts_precision,
    CASE WHEN contains(body, ' Saving model checkpoint to ') OR starts_with(body, 'Saving model checkpoint to ')
              THEN 'save_start'
         WHEN contains(body, 'Loading model from ') THEN 'load_start'
         ELSE 'load_end' END AS fact,
    TRY_CAST(nullif(coalesce(nullif(regexp_extract(body, 'checkpoint-(\d+)', 1), ''),
                             regexp_extract(body, 'Continuing training from global step (\d+)', 1)), '') AS BIGINT)
        AS iteration,
    nullif(regexp_extract(body, '(?:Saving model checkpoint to|Loading model from) (\S+?)\.?$', 1), '') AS path
FROM jl_lines
WHERE contains(body, 'Saving model checkpoint to ') OR contains(body, 'Loading model from ')
   OR contains(body, 'Continuing training from global step ')
"""

MARKS_SQL = r"""
SELECT sid, pos, lineno, 'mark' AS fact, ts, ts_precision, trim(body) AS message,
    CASE WHEN contains(body, '***** Running training *****') THEN 'loop_start' ELSE 'training_done' END AS kind
FROM jl_lines
WHERE contains(body, '***** Running training *****') OR contains(body, 'Training completed. Do not forget to share')
"""

# A new process (a requeued attempt appended to the same log) begins its training again.
BANNER_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE contains(body, '***** Running training *****')
"""

EXPLICIT = r"^\[(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)\|[\w./-]+:\d+\] \d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} >> "


def sniff(head: str) -> float:
    if joblog_sniff.has_line(head, EXPLICIT, "|trainer.py:", "|configuration_utils.py:", "|modeling_utils.py:"):
        return 0.75
    training = r"^(?:\S+ >> )?(?:\*\*\*\*\* Running training \*\*\*\*\*|Saving model checkpoint to \S*checkpoint-\d+)"
    found = joblog_sniff.has_line(head, training, "***** Running training", "Saving model checkpoint to ")
    return 0.6 if found else 0.0


FORMAT = joblog.job_log_format(
    "hf_trainer",
    "Hugging Face Trainer / Accelerate log (`[INFO|trainer.py:N] ... >>` lines, tqdm bar, checkpoint-N saves)",
    sniff,
    [STEP_SQL, CKPT_SQL, MARKS_SQL, BANNER_SQL],
    top=0.75,
    priority=0,
)
