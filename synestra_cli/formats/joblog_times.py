"""The times a job log does not print, from the times it does (joblog_rows.py calls these on its facts).

- A step line without its step time (torchtitan's, DeepSpeed's `step=N`) but with its own time: the time since the
  step line before, less the saves between, per iteration (STEP_PACE_SQL).
- A step line without its own time but with its step time (NeMo 2's and MaxText's progress lines, Megatron without
  a launcher stamp): dated from the last line that dates the training, forward at the printed step times
  (STEP_TIMES_SQL), or back from the first one after it (STEP_TIMES_BACK_SQL); ts_precision 'estimated'.
- A sync save whose end no line prints (DeepSpeed 0.17.1 on, Hugging Face's Trainer): the first step line after it
  less the iterations between, else the next dated line (SAVE_ENDS_SQL); a load without its end (Orbax since
  2025): the first step's start (RESTORE_ENDS_SQL); ts_precision 'estimated'.
Each is one statement over every log of the group (keyed by `sid`, windows partitioned by it).
"""

from __future__ import annotations

import duckdb

# Step lines printed without a time of their own (NeMo 2's and MaxText's progress lines, Megatron without a
# launcher stamp) but with their step time are dated from the last line before them that dates the training:
# a dated step line, a load's end, a save's return to training (a sync save's end, an async save's last part
# scheduled) or torchtitan's "Training starts at step N", plus the iterations since it at the printed step
# times (each line's average over the iterations it covers). ts_precision 'estimated': never read as a line's
# own time, but far closer than the nearest dated line, which may be a quarter of an hour away.
STEP_TIMES_SQL = """
UPDATE jl_fa SET ts = e.est, ts_precision = 'estimated'
FROM (
    WITH anchors AS (
        SELECT sid, attempt, pos, it AS a_it, ts AS a_ts FROM jl_fa
        WHERE ts_precision = 'exact' AND it IS NOT NULL AND (
              fact IN ('step', 'save_sched', 'load_end')
           OR (fact = 'save_end' AND NOT coalesce(is_async, false))
           OR (fact = 'mark' AND kind = 'loop_start' AND iteration IS NOT NULL))
    ), s AS (
        SELECT f.sid, f.attempt, f.pos, f.iteration, f.step_time_s, a.pos AS a_pos, a.a_it, a.a_ts
        FROM jl_fa f ASOF JOIN anchors a ON a.sid = f.sid AND a.attempt = f.attempt AND f.pos > a.pos
        WHERE f.fact = 'step' AND f.ts_precision = 'inferred' AND f.step_time_s > 0 AND f.iteration IS NOT NULL
    ), n AS (
        SELECT *, greatest(iteration - coalesce(lag(iteration) OVER w, a_it), 0) * step_time_s AS spent
        FROM s WINDOW w AS (PARTITION BY sid, attempt, a_pos ORDER BY pos)
    )
    SELECT sid, pos, a_ts + to_microseconds(CAST(sum(spent) OVER (PARTITION BY sid, attempt, a_pos ORDER BY pos
                                                                  ROWS UNBOUNDED PRECEDING) * 1e6 AS BIGINT)) AS est
    FROM n
) e
WHERE jl_fa.sid = e.sid AND jl_fa.pos = e.pos AND jl_fa.fact = 'step'
"""
# ... and those before any such line in their attempt (the first attempt's first lines) from the first line after
# them that dates where the training was: a dated step line, or a save's start (the training stopped there), less
# the iterations between at the printed step times.
STEP_TIMES_BACK_SQL = """
UPDATE jl_fa SET ts = e.est, ts_precision = 'estimated'
FROM (
    WITH anchors AS (
        SELECT sid, attempt, pos, it AS a_it, ts AS a_ts FROM jl_fa
        WHERE ts_precision = 'exact' AND it IS NOT NULL AND fact IN ('step', 'save_start')
    ), s AS (
        SELECT f.sid, f.attempt, f.pos, f.iteration, f.step_time_s, a.pos AS a_pos, a.a_it, a.a_ts
        FROM jl_fa f ASOF JOIN anchors a ON a.sid = f.sid AND a.attempt = f.attempt AND a.pos > f.pos
        WHERE f.fact = 'step' AND f.ts_precision = 'inferred' AND f.step_time_s > 0 AND f.iteration IS NOT NULL
    ), n AS (  -- the time from each line to the next (the anchor after the last), at the next line's pace
        SELECT *, greatest(coalesce(lead(iteration) OVER w, a_it) - iteration, 0)
                  * coalesce(lead(step_time_s) OVER w, step_time_s) AS until_next
        FROM s WINDOW w AS (PARTITION BY sid, attempt, a_pos ORDER BY pos)
    )
    SELECT sid, pos, a_ts - to_microseconds(CAST(sum(until_next) OVER (PARTITION BY sid, attempt, a_pos ORDER BY pos
                                                                       ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)
                                                 * 1e6 AS BIGINT)) AS est
    FROM n
) e
WHERE jl_fa.sid = e.sid AND jl_fa.pos = e.pos AND jl_fa.fact = 'step'
"""

# Step lines that print no step time (torchtitan's, DeepSpeed's `step=N`) but have their own time: the time since
# the step line before (in the attempt; for the first, since torchtitan's "Training starts at step N") per
# iteration, less the saves between them (their stated or dated blocking time): what the trainer spent per step,
# as Megatron's elapsed time per iteration says it (its timer stops during saves).
STEP_PACE_SQL = """
UPDATE jl_fa SET step_time_s = p.pace
FROM (
    WITH prev AS (
        SELECT sid, attempt, pos, iteration AS it, ts, fact FROM jl_fa
        WHERE ts_precision = 'exact' AND (fact = 'step' OR (fact = 'mark' AND kind = 'loop_start'))
    ), w AS (
        SELECT sid, attempt, pos, it, ts, fact,
            lag(pos) OVER o AS p_pos, lag(ts) OVER o AS p_ts,
            lag(CASE WHEN fact = 'mark' THEN it - 1 ELSE it END) OVER o AS p_it
        FROM prev WINDOW o AS (PARTITION BY sid, attempt ORDER BY pos)
    ), saves AS (  -- each save between two step lines: its stated blocking time, else its dated span
        SELECT w.sid, w.pos, f.it, coalesce(max(f.blocking_s), epoch(max(f.ts) - min(f.ts))) AS save_s
        FROM w JOIN jl_fa f ON f.sid = w.sid AND f.attempt = w.attempt AND f.pos > w.p_pos AND f.pos < w.pos
        WHERE f.fact LIKE 'save%' AND f.ts_precision = 'exact'
          AND NOT (f.fact = 'save_end' AND coalesce(f.is_async, false))
        GROUP BY ALL
    ), blocked AS (SELECT sid, pos, sum(save_s) AS save_s FROM saves GROUP BY ALL)
    SELECT w.sid, w.pos,
        (epoch(w.ts) - epoch(w.p_ts) - coalesce(b.save_s, 0)) / (w.it - w.p_it) AS pace
    FROM w LEFT JOIN blocked b USING (sid, pos)
    WHERE w.fact = 'step' AND w.p_ts IS NOT NULL AND w.it > w.p_it
) p
WHERE jl_fa.sid = p.sid AND jl_fa.pos = p.pos AND jl_fa.fact = 'step' AND jl_fa.step_time_s IS NULL
  AND p.pace > 0
"""

# A sync save whose end no line prints (DeepSpeed since 0.17.1 logs only its start, Hugging Face's Trainer never
# logs the end of its save): the training resumed by the first step line after it, less the iterations between at
# the pace of the line after that one (its own interval holds no save). ts_precision of the save: 'estimated'.
SAVE_ENDS_SQL = """
UPDATE checkpoints SET end_ts = greatest(e.est, checkpoints.start_ts), ts_precision = 'estimated',
    blocking_s = epoch(greatest(e.est, checkpoints.start_ts) - checkpoints.start_ts)
FROM (
    WITH c AS (
        SELECT c.source_id AS sid, c.attempt, c.iteration, c.line, c.start_ts, f.pos
        FROM checkpoints c JOIN jl_fa f ON f.sid = c.source_id AND f.lineno = c.line
        WHERE list_contains($sids, c.source_id) AND c.kind = 'save' AND c.end_ts IS NULL AND c.start_ts IS NOT NULL
          AND NOT coalesce(c.is_async, false)
    ), st AS (
        SELECT sid, attempt, pos, it, ts, step_time_s,
            lead(step_time_s) OVER (PARTITION BY sid, attempt ORDER BY pos) AS next_pace
        FROM jl_fa WHERE fact = 'step' AND ts_precision IN ('exact', 'estimated') AND it IS NOT NULL
    )
    SELECT c.sid, c.line, coalesce(
        st.ts - to_microseconds(CAST(greatest(st.it - c.iteration, 0) * coalesce(st.next_pace, st.step_time_s, 0) * 1e6
                                     AS BIGINT)),
        -- no step after it (the final save): the first later time a line gives ("Training completed"), not the
        -- save's own lines (Hugging Face's "Configuration saved in ...")
        (SELECT min(d.ts_exact) FROM jl_la d
         WHERE d.sid = c.sid AND d.attempt = c.attempt AND d.pos > c.pos AND d.ts_exact > c.start_ts)) AS est
    FROM c ASOF LEFT JOIN st ON st.sid = c.sid AND st.attempt = c.attempt AND c.pos < st.pos
) e
WHERE checkpoints.source_id = e.sid AND checkpoints.line = e.line AND checkpoints.kind = 'save' AND e.est IS NOT NULL
"""


# A load whose end no line prints (Orbax's `Restoring checkpoint from …` alone, since 2025): it was over when the
# first step after it began, the first step line's time less its own step time.
RESTORE_ENDS_SQL = """
UPDATE checkpoints SET end_ts = greatest(e.est, checkpoints.start_ts), ts_precision = 'estimated'
FROM (
    WITH c AS (
        SELECT c.source_id AS sid, c.attempt, c.line, c.start_ts, f.pos
        FROM checkpoints c JOIN jl_fa f ON f.sid = c.source_id AND f.lineno = c.line AND f.fact LIKE 'load%'
        WHERE list_contains($sids, c.source_id) AND c.kind = 'restore' AND c.end_ts IS NULL AND c.start_ts IS NOT NULL
    ), st AS (
        SELECT sid, attempt, pos, ts, step_time_s FROM jl_fa
        WHERE fact = 'step' AND ts_precision IN ('exact', 'estimated') AND step_time_s > 0
    )
    SELECT c.sid, c.line, st.ts - to_microseconds(CAST(st.step_time_s * 1e6 AS BIGINT)) AS est
    FROM c ASOF JOIN st ON st.sid = c.sid AND st.attempt = c.attempt AND c.pos < st.pos
) e
WHERE checkpoints.source_id = e.sid AND checkpoints.line = e.line AND checkpoints.kind = 'restore'
"""


def date_steps(conn: duckdb.DuckDBPyConnection) -> None:
    """Step times and step dates the lines do not print (jl_fa, before the rows are written)."""
    conn.execute(STEP_PACE_SQL)
    conn.execute(STEP_TIMES_SQL)
    conn.execute(STEP_TIMES_BACK_SQL)


def date_save_ends(conn: duckdb.DuckDBPyConnection, sids: dict[str, list[int]]) -> None:
    """The ends of the group's saves and loads that no line prints (checkpoints, once written; jl_fa still there)."""
    conn.execute(SAVE_ENDS_SQL, sids)
    conn.execute(RESTORE_ENDS_SQL, sids)
