"""DeepSpeed training logs (log-formats.md D.5; deepspeed/utils/logging.py, runtime/engine.py).

  [2025-03-25 18:12:45,948] [INFO] [logging.py:96:log_dist] [Rank -1] DeepSpeed info: version=0.14.0, ...
  [...] [INFO] [logging.py:96:log_dist] [Rank 0] step=1000, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]
  [...] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Checkpoint global_step1000 is about to be saved!
  [...] [INFO] [engine.py:3488:_save_zero_checkpoint] Saving model checkpoint: /ckpt/global_step1000/...
  [...] [INFO] [torch_checkpoint_engine.py:33:commit] [Torch] Checkpoint global_step1000 is ready now!
Older releases say "Checkpoint {tag} is begin to save!". The iteration is taken from the tag
(`global_step<N>`). "DeepSpeed info: version=" marks a process start.
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

STEP_SQL = r"""
SELECT sid, pos, lineno, rank, 'step' AS fact, ts, ts_precision,
    CAST(regexp_extract(body, '\] step=(\d+), skipped=', 1) AS BIGINT) AS iteration
FROM jl_lines WHERE contains(body, '] step=') AND regexp_matches(body, '\] step=\d+, skipped=\d+')
"""

CKPT_SQL = r"""
SELECT sid, pos, lineno, ts, ts_precision,
    CASE WHEN regexp_matches(body, 'Checkpoint \S+ is (about to be saved|begin to save)!|Saving model checkpoint: ')
         THEN 'save_start' WHEN regexp_matches(body, 'Checkpoint \S+ is ready now!') THEN 'save_end'
         WHEN regexp_matches(body, '\[Torch\] (Begin Load|Loading) checkpoint from ') THEN 'load_start'
         WHEN regexp_matches(body, '\[Torch\] (End Load|Loaded) checkpoint from ') THEN 'load_end' END AS fact,
    TRY_CAST(nullif(regexp_extract(body, 'global_step(\d+)', 1), '') AS BIGINT) AS iteration,
    nullif(regexp_extract(body, '(?:Saving model checkpoint: |checkpoint from )(\S+?)(?:\.\.\.|\.)?$', 1), '') AS path
FROM jl_lines WHERE contains(body, 'heckpoint') AND fact IS NOT NULL
"""

BANNER_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE contains(body, '] DeepSpeed info: version=')
"""


DIST_LINE = r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[(?:INFO|WARNING|ERROR|DEBUG)\] \[[\w.]+:\d+:\w+\] "


def sniff(head: str) -> float:
    if not joblog_sniff.has_line(head, DIST_LINE, "] [INFO] [", "] [WARNING] [", "] [ERROR] [", "] [DEBUG] ["):
        return 0.0
    # DLRover and others reuse DeepSpeed's logger format: claim it firmly only when DeepSpeed speaks.
    return 0.8 if "DeepSpeed" in head or "log_dist" in head else 0.5


FORMAT = joblog.job_log_format(
    "deepspeed",
    "DeepSpeed training log ([ts] [LEVEL] [file:line:func] lines, step= and checkpoint lines)",
    sniff,
    [STEP_SQL, CKPT_SQL, BANNER_SQL],
    top=0.8,
    priority=160,
)
