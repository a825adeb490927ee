"""Migration 004_job_views (job_views.sql): the raw sacct rows table and the reconciled job views.

sacct is authoritative for when an attempt ran, how it ended and where; a training log knows what
happened inside it. The views join the two at query time, so sacct and logs may be ingested in any
order. `attempt_map` maps each log attempt segment (source, log attempt) to a sacct attempt: by the
largest time overlap when both have times (`overlap`; `nearest` start when nothing overlaps), else by
order aligned on the last attempt (`order`: a log written in truncate mode holds only the last one);
without sacct the log's own numbering stands (`log`). Only the latest sacct export of a job counts.
Steps and checkpoints of a log with no timestamps get times spread uniformly by iteration over the
sacct attempt (`ts_precision = 'estimated'`).
"""

from __future__ import annotations

from synestra_cli.store.sql import sql_file

JOB_VIEWS = sql_file(__package__, "job_views.sql")

# Migration 008_bounded_restores: a restore printed undated is bounded by the dated lines around it in
# its attempt (ts_precision 'bounded', formats/training/joblog_rows.py); without a dated line before it in the
# log, the sacct attempt's start is its lower bound. Both bounded by the sacct attempt.
BOUNDED_RESTORES = sql_file(__package__, "bounded_restores.sql")

# Migration 023 (with the job marks): a restore's stated duration bounds its start (restore_durations.sql).
RESTORE_DURATIONS = sql_file(__package__, "restore_durations.sql")
