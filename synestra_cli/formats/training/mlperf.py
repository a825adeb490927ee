"""MLPerf Training result logs: `:::MLLOG {json}` lines (mlperf-logging), often inside launcher stdout.

  :::MLLOG {"namespace": "", "time_ms": 1709183798091, "event_type": "POINT_IN_TIME",
            "key": "init_checkpoint_step", "value": 3000, "metadata": {"file": "...", "lineno": 50}}
time_ms is epoch milliseconds (UTC). Rows:
- `init_checkpoint_step` -> a restore at that step, from the first `init_start` to `init_stop`
  (start-up including the checkpoint load);
- `tracked_stats` with metadata.step -> a step (value.throughput as samples_per_s);
- `init_start` marks a process start (every rank logs one; they make one attempt);
- `submission_benchmark` -> the job's name.
An MLLOG line whose JSON does not parse is a reject. Other lines of the file (NeMo, torch) are read
by the other job-log rules.
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

EVENTS_SQL = r"""
CREATE OR REPLACE TEMP VIEW jl_mllog AS
SELECT sid, pos, lineno, ts, ts_precision, j->>'$.key' AS key, j->'$.value' AS value, j->'$.metadata' AS meta
FROM (SELECT *, TRY_CAST(substr(body, strpos(body, ':::MLLOG ') + 9) AS JSON) AS j
      FROM jl_lines WHERE contains(body, ':::MLLOG {'))
WHERE json_valid(j)
"""

REJECT_SQL = r"""
SELECT sid, pos, lineno, 'reject' AS fact, 'MLLOG line whose JSON does not parse (truncated?)' AS message
FROM jl_lines WHERE contains(body, ':::MLLOG {')
    AND NOT coalesce(json_valid(substr(body, strpos(body, ':::MLLOG ') + 9)), false)
"""

# Each log's first init_checkpoint_step: the restore's step, in that log only.
RESTORE_SQL = r"""
WITH s AS (
    SELECT sid, TRY_CAST(value AS BIGINT) AS step FROM jl_mllog WHERE key = 'init_checkpoint_step'
    QUALIFY row_number() OVER (PARTITION BY sid ORDER BY pos) = 1
)
SELECT m.sid, pos, lineno, ts, ts_precision, 'load_start' AS fact, s.step AS iteration
FROM jl_mllog m JOIN s USING (sid) WHERE key = 'init_start'
QUALIFY row_number() OVER (PARTITION BY m.sid ORDER BY pos) = 1
UNION ALL BY NAME
SELECT m.sid, pos, lineno, ts, ts_precision, 'load_end' AS fact, s.step AS iteration
FROM jl_mllog m JOIN s USING (sid) WHERE key = 'init_stop'
"""

OTHER_SQL = r"""
SELECT sid, pos, lineno, ts, ts_precision, 'step' AS fact, TRY_CAST(meta->>'$.step' AS BIGINT) AS iteration,
    TRY_CAST(value->>'$.throughput' AS DOUBLE) AS samples_per_s
FROM jl_mllog WHERE key = 'tracked_stats' AND meta->>'$.step' IS NOT NULL
UNION ALL BY NAME
SELECT sid, pos, lineno, ts, ts_precision, 'banner' AS fact FROM jl_mllog WHERE key = 'init_start'
UNION ALL BY NAME
SELECT sid, pos, lineno, 'job' AS fact, value->>'$' AS job_name FROM jl_mllog WHERE key = 'submission_benchmark'
"""


def sniff(head: str) -> float:
    return 0.95 if joblog_sniff.has_line(head, r"^(?:\S+: )?:::MLLOG \{", ":::MLLOG {") else 0.0


FORMAT = joblog.job_log_format(
    "mlperf",
    "MLPerf Training :::MLLOG result log (init/restore, blocks, tracked_stats)",
    sniff,
    [REJECT_SQL, RESTORE_SQL, OTHER_SQL],
    prepare=[EVENTS_SQL],
    inside_syslog=True,
    top=0.95,
    priority=200,
)
