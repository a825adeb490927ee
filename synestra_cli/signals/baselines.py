"""Each series' baseline and threshold, as SQL text shared by the per-job read (signals/anomalies.py) and
the fleet's (signals/many_jobs/telemetry.py), so that a job gets the same answer either way.

The baseline is first the quartile of the series' healthiest read window (the lowest lower quartile for
what is bad going up, the highest upper quartile for what is bad going down), not of all windows
pooled: a fault that persists through the job's later windows (a ghost link stays for hours) would
otherwise become its own baseline. A window needs MIN_BASELINE_SAMPLES to speak; else all pooled. Only
the job's comparable samples count (signals/anomalies.py COMPARABLE_SQL), where it has any.

Then the samples before the fault: a fault inside a read window lifts that window's quartile (a job's
windows merge into one span when its effects are close together). The series' comparable samples taken
before it first crossed that threshold are healthy by that very test; when their quartile is healthier,
it is the baseline and the threshold is set again from it. Job 1003 of sample_data: the read window's
lower quartile of gpu-002 gpu0's memory temperature was 83 C with the fault's 95s in it, the samples
before the fault read 81-84 (quartile 82); from 83 a 93 C sample amid the 95s fell below the threshold,
cut the thermal run in two and dated a 40-minute-old condition 2 minutes before the GPU fell off the bus.
"""

from __future__ import annotations

# Fewer samples than this in a read window (a 2-sample tail), or before a fault, say nothing of a baseline.
MIN_BASELINE_SAMPLES = 4


def limits_sql(cand: str) -> str:
    """A series' threshold from its baseline b (the rows of `cand`), kept when its range crosses it."""
    return f"""CASE WHEN direction = 'up' THEN greatest(floor, b * ratio + delta)
                   ELSE least(floor, b * ratio - delta) END AS threshold
    FROM {cand}
    WHERE CASE WHEN direction = 'up' THEN hi >= floor AND hi > b * ratio + delta
               ELSE lo <= floor AND lo < b * ratio - delta END"""


ONSET_SQL = """CASE WHEN prev0 IS NULL THEN first_bad
            WHEN kind = 'counter' AND len(rest) >= 1 AND list_median(rest) > b
                 THEN greatest(prev0, first_bad - to_microseconds(CAST(
                      least(1.0, greatest(0.0, (x0 - b) / (list_median(rest) - b)))
                      * (epoch_us(first_bad) - epoch_us(prev0)) AS BIGINT)))
            ELSE first_bad - (first_bad - prev0) / 2 END AS onset"""  # see ANOMALIES_SQL's comment on the onset
# Each quartile comes with where it came from (`p1` for the lower, `p2` for the upper: the first and last
# comparable sample it was taken over, and their count), so that a reader can check it against the
# samples. Pooled: over the comparable samples of all windows, else (none) over all of them.
_PROV = "{'f': min(ts) FILTER (WHERE ok), 't': max(ts) FILTER (WHERE ok), 'n': count(*) FILTER (WHERE ok)}"
POOLED_SQL = f"""quantile_cont(x, [0.25, 0.75]) AS q_all, quantile_cont(x, [0.25, 0.75]) FILTER (WHERE ok) AS q_ok,
    max(x) AS hi, min(x) AS lo, {_PROV} AS p_ok, {{'f': min(ts), 't': max(ts), 'n': count(*)}} AS p_all"""
PER_WINDOW_SQL = "quantile_cont(x, [0.25, 0.75]) AS q, {'f': min(ts), 't': max(ts), 'n': count(*)} AS p"
# The healthiest window; of two equally healthy ones, the first (a total order: the same rows, the same
# baseline, whatever the threads did).
HEALTHIEST_SQL = """min(q[1]) AS q1, max(q[2]) AS q2, arg_min(p, [q[1], w::DOUBLE]) AS p1,
    arg_max(p, [q[2], -w::DOUBLE]) AS p2"""
BASE_SQL = """[coalesce(h.q1, p.q_ok[1], p.q_all[1]), coalesce(h.q2, p.q_ok[2], p.q_all[2])] AS q,
    CASE WHEN h.q1 IS NOT NULL THEN h.p1 WHEN p.q_ok IS NOT NULL THEN p.p_ok ELSE p.p_all END AS p1,
    CASE WHEN h.q2 IS NOT NULL THEN h.p2 WHEN p.q_ok IS NOT NULL THEN p.p_ok ELSE p.p_all END AS p2"""
# A sample `s` past the threshold of its series' limits `l`.
BAD_SQL = """coalesce(CASE WHEN l.direction = 'up' THEN s.x >= l.floor AND s.x > l.b * l.ratio + l.delta
                         ELSE s.x <= l.floor AND s.x < l.b * l.ratio - l.delta END, false)"""
BAD_SAMPLE_SQL = BAD_SQL + " AS bad"


def pre_onset_sql(sig: str, keys: tuple[str, ...]) -> str:
    """The CTEs `crossed`, `pre`, `cand` and `limits` that follow `limits0` (limits_sql over the
    healthiest-window baselines): each series' first sample past that threshold, the quartile of its
    comparable samples before it, and the limits again from the healthier of the two baselines (with the
    provenance of the one taken). `sig`: the samples (ts, x, ok and the `keys` naming a series)."""

    def on(a: str, b: str) -> str:
        return " AND ".join(f"{a}.{k} IS NOT DISTINCT FROM {b}.{k}" for k in keys)

    def cols(a: str) -> str:
        return ", ".join(f"{a}.{k}" for k in keys)

    healthier = "CASE WHEN l.direction = 'up' THEN p.q[1] < l.b ELSE p.q[2] > l.b END"
    return f"""crossed AS (
    SELECT {cols("l")}, min(s.ts) FILTER (WHERE {BAD_SQL}) AS t
    FROM {sig} s JOIN limits0 l ON {on("s", "l")} GROUP BY ALL
), pre AS (
    SELECT {cols("c")}, quantile_cont(s.x, [0.25, 0.75]) AS q, {{'f': min(s.ts), 't': max(s.ts), 'n': count(*)}} AS p
    FROM {sig} s JOIN crossed c ON {on("s", "c")}
    WHERE s.ok AND s.x IS NOT NULL AND s.ts < c.t GROUP BY ALL HAVING count(*) >= {MIN_BASELINE_SAMPLES}
), cand AS (
    SELECT l.* EXCLUDE (threshold, b, prov),
           CASE WHEN p.q IS NOT NULL AND {healthier} THEN p.q[CASE WHEN l.direction = 'up' THEN 1 ELSE 2 END]
                ELSE l.b END AS b,
           CASE WHEN p.q IS NOT NULL AND {healthier} THEN p.p ELSE l.prov END AS prov
    FROM limits0 l LEFT JOIN pre p ON {on("l", "p")}
), limits AS (
    SELECT *, {limits_sql("cand")}
)"""
