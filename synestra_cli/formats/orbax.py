"""JAX / Orbax checkpoint lines in absl (glog-style) logs, as MaxText and ml-goodput tests print them.

  I0608 20:54:47.918725 123567287061632 checkpoint_manager.py:1512] [process=0] Saving checkpoint at step 19
  I0608 20:54:47.918797 123567287061632 event_tracking.py:70] [process=0] [async] Started save checkpoint
      @ /dev/shm/goodput/SYNTHETIC_TEST/checkpoints/19.
The absl header has no year: joblog takes it from the surrounding log, else --year / the file's mtime.
Only the lines seen in a real capture are read (log-formats.md E).
"""

from __future__ import annotations

from synestra_cli.formats import joblog, joblog_sniff

CKPT_SQL = r"""
SELECT sid, pos, lineno, ts, ts_precision,
    CASE WHEN contains(body, '] Saving checkpoint at step ') THEN 'save_start' ELSE 'save_sched' END AS fact,
    TRY_CAST(nullif(regexp_extract(body, 'Saving checkpoint at step (\d+)|Started save checkpoint @ \S*?/(\d+)\.?$', 1)
             || regexp_extract(body, 'Started save checkpoint @ \S*?/(\d+)\.?$', 1), '') AS BIGINT) AS iteration,
    nullif(regexp_extract(body, 'Started save checkpoint @ (\S+?)\.?$', 1), '') AS path,
    CASE WHEN contains(body, '[async] Started save checkpoint') THEN true END AS is_async
FROM jl_lines
WHERE contains(body, '] [process=') AND regexp_matches(body, '\] \[process=\d+\] Saving checkpoint at step \d+|'
                           '\] \[process=\d+\] \[async\] Started save checkpoint @ ')
"""


def sniff(head: str) -> float:
    manager_line = r"^I\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ checkpoint_manager\.py:\d+\]"
    return 0.6 if joblog_sniff.has_line(head, manager_line, "checkpoint_manager.py:") else 0.0


FORMAT = joblog.job_log_format(
    "orbax_log",
    "JAX/Orbax absl log (checkpoint_manager 'Saving checkpoint at step N', async save start)",
    sniff,
    [CKPT_SQL],
    top=0.6,
)
