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
# them that dates where the training was: a dated step line, a save's start (the training stopped there), or, when
# its start is not dated (NeMo 2.0's Lightning line), its scheduling, less the iterations between at the printed
# step times.
STEP_TIMES_BACK_SQL = """
UPDATE jl_fa SET ts = e.est, ts_precision = 'estimated_back'
FROM (
    WITH anchors AS (
        SELECT sid, attempt, pos, it AS a_it, ts AS a_ts FROM jl_fa
        WHERE ts_precision = 'exact' AND it IS NOT NULL AND fact IN ('step', 'save_start', 'save_sched')
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

# A save between two step lines that only its start dates (DeepSpeed 0.17.1's, Hugging Face's): the time the step
# times were measured over holds it; the next interval's pace (without a save) is the training's.
OPEN_SAVE_PACE_SQL = """
UPDATE jl_fa SET step_time_s = p.next_pace
FROM (
    WITH st AS (
        SELECT sid, attempt, pos, lag(pos) OVER w AS p_pos, lead(step_time_s) OVER w AS next_pace
        FROM jl_fa WHERE fact = 'step' WINDOW w AS (PARTITION BY sid, attempt ORDER BY pos)
    ), open AS (
        SELECT sid, attempt, it, max(ts) = min(ts) AND max(blocking_s) IS NULL AS undated_end
        FROM jl_fa WHERE fact LIKE 'save%' AND ts_precision IN ('exact', 'estimated') AND NOT coalesce(is_async, false)
        GROUP BY ALL
    ), starts AS (
        SELECT f.sid, f.attempt, f.pos FROM jl_fa f JOIN open o USING (sid, attempt, it)
        WHERE f.fact = 'save_start' AND o.undated_end
    )
    SELECT DISTINCT st.sid, st.pos, st.next_pace
    FROM st JOIN starts s ON s.sid = st.sid AND s.attempt = st.attempt AND s.pos > st.p_pos AND s.pos < st.pos
    WHERE st.next_pace > 0
) p
WHERE jl_fa.sid = p.sid AND jl_fa.pos = p.pos AND jl_fa.fact = 'step'
"""

# A save that names no step of its own and took it from the last step line before it (torchtitan's "Saving the
# checkpoint.", when the step it follows was not logged: a reactive or preemption save between two log_freq
# lines): the steps done since that line, at its pace, are the time between them. One step's difference is what
# tells a reactive save from a periodic one.
SAVE_STEPS_SQL = """
UPDATE jl_fa SET it = e.est_it
FROM (
    WITH st AS (
        SELECT sid, attempt, pos, iteration, ts, step_time_s FROM jl_fa
        WHERE fact = 'step' AND ts_precision IN ('exact', 'estimated') AND step_time_s > 0
    ), starts AS (
        SELECT f.sid, f.attempt, f.pos, f.ts, f.it FROM jl_fa f
        WHERE f.fact = 'save_start' AND f.iteration IS NULL AND f.ts_precision = 'exact'
    ), est AS (
        SELECT s.sid, s.attempt, s.pos, s.it,
            st.iteration + CAST(round((epoch(s.ts) - epoch(st.ts)) / st.step_time_s) AS BIGINT) AS est_it
        FROM starts s ASOF JOIN st ON st.sid = s.sid AND st.attempt = s.attempt AND s.pos > st.pos
        WHERE s.it = st.iteration
    ), nxt AS (  -- the save's lines: up to the next step line
        SELECT e.*, (SELECT min(x.pos) FROM st x WHERE x.sid = e.sid AND x.attempt = e.attempt AND x.pos > e.pos)
            AS until_pos
        FROM est e WHERE e.est_it > e.it
    )
    SELECT f.sid, f.pos, n.est_it FROM jl_fa f JOIN nxt n ON f.sid = n.sid AND f.attempt = n.attempt
        AND f.pos >= n.pos AND f.pos < coalesce(n.until_pos, f.pos + 1)
    WHERE f.fact LIKE 'save%' AND f.iteration IS NULL
) e
WHERE jl_fa.sid = e.sid AND jl_fa.pos = e.pos
"""

# A save's start no line of its own dates (NeMo 2.0's Lightning line before NeMo's dated "Scheduled" one): the
# step it follows ended then, when that step's line is dated (estimated) and is the save's step.
SAVE_STARTS_SQL = """
UPDATE jl_fa SET ts = e.ts, ts_precision = 'estimated'
FROM (
    WITH st AS (
        SELECT sid, attempt, pos, iteration, ts FROM jl_fa
        WHERE fact = 'step' AND ts_precision IN ('exact', 'estimated')
    )
    SELECT f.sid, f.pos, st.ts FROM jl_fa f ASOF JOIN st ON st.sid = f.sid AND st.attempt = f.attempt AND f.pos > st.pos
    WHERE f.fact = 'save_start' AND f.ts_precision = 'inferred' AND st.iteration BETWEEN f.it - 1 AND f.it
) e
WHERE jl_fa.sid = e.sid AND jl_fa.pos = e.pos
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

# ... and an undated load bounded by the lines around it (Lightning's alone, NeMo 2.0) ended by the first step's
# start too, when that comes first: its bound may be a quarter of an hour of training later. The first step line
# after a load may cover several steps (NeMo 2's progress line every log_interval): the first step began those
# steps before it, at the line's printed pace, not one.
RESTORE_CAP_SQL = """
UPDATE checkpoints SET end_ts = greatest(e.est, checkpoints.start_ts)
FROM (
    WITH c AS (
        SELECT c.source_id AS sid, c.attempt, c.line, c.end_ts, c.iteration, f.pos
        FROM checkpoints c JOIN jl_fa f ON f.sid = c.source_id AND f.lineno = c.line AND f.fact LIKE 'load%'
        WHERE list_contains($sids, c.source_id) AND c.kind = 'restore' AND c.ts_precision IN ('bounded', 'inferred')
          AND c.blocking_s IS NULL AND c.end_ts IS NOT NULL AND c.start_ts IS NOT NULL
    ), st AS (
        SELECT sid, attempt, pos, ts, it, step_time_s FROM jl_fa
        WHERE fact = 'step' AND ts_precision IN ('exact', 'estimated') AND step_time_s > 0
    )
    SELECT c.sid, c.line,
        st.ts - to_microseconds(CAST(greatest(coalesce(st.it - c.iteration, 1), 1) * st.step_time_s * 1e6 AS BIGINT))
            AS est
    FROM c ASOF JOIN st ON st.sid = c.sid AND st.attempt = c.attempt AND c.pos < st.pos
    WHERE st.ts < c.end_ts  -- the first step line is not already its bound
) e
WHERE checkpoints.source_id = e.sid AND checkpoints.line = e.line AND checkpoints.kind = 'restore'
  AND e.est < checkpoints.end_ts
"""


def date_steps(conn: duckdb.DuckDBPyConnection) -> None:
    """Step times and step dates the lines do not print (jl_fa, before the rows are written)."""
    conn.execute(STEP_PACE_SQL)
    conn.execute(OPEN_SAVE_PACE_SQL)
    conn.execute(STEP_TIMES_SQL)
    conn.execute(STEP_TIMES_BACK_SQL)
    conn.execute(SAVE_STEPS_SQL)
    conn.execute(SAVE_STARTS_SQL)  # not from the steps dated back from that very save (they would date it by itself)
    conn.execute("UPDATE jl_fa SET ts_precision = 'estimated' WHERE ts_precision = 'estimated_back'")


def date_save_ends(conn: duckdb.DuckDBPyConnection, sids: dict[str, list[int]]) -> None:
    """The ends of the group's saves and loads that no line prints (checkpoints, once written; jl_fa still there)."""
    conn.execute(SAVE_ENDS_SQL, sids)
    conn.execute(RESTORE_ENDS_SQL, sids)
    conn.execute(RESTORE_CAP_SQL, sids)
