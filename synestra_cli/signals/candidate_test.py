"""The candidate test of signals/candidates.py as SQL text, one text for one job's read and the fleet's
(signals/fleet_candidates.py): whether a series' (or a host's) summaries over the hours that touch the
read windows could hold an anomaly window."""

from __future__ import annotations

from synestra_cli.signals.thresholds import CLOCK_EVENT_SIGNALS

# A decoded clocks-event bit can vary only if it is set in some sample and, in another, clear or
# overridden by one of its `unless` bits (signals/anomalies.py CLOCK_BITS_SQL).
BIT_VARIES = " OR ".join(
    f"(s.bits_or & {bit} <> 0 AND (s.bits_and & {bit} = 0 OR s.bits_or & {unless} <> 0))"
    for _, bit, unless in CLOCK_EVENT_SIGNALS
)
# A gauge's window of anomalous samples needs two of them in a row inside one read window (unless its
# metric is discrete; signals/anomalies.py), both across the rule: so the level both samples of a pair
# reach (pair_hi, pair_lo) must cross it. Not when the order of a pair is in doubt (repeated times,
# sources that overlap), nor when one sample makes a window ($pairs false: min_samples 1).
CANDIDATE_TEST = """
CASE WHEN s.metric = $bitmask THEN {bits}
     WHEN r.kind = 'counter' THEN s.hi > s.lo AND (r.direction <> 'up' OR s.backwards + s.unordered > 0
          OR (s.rate_hi >= r.floor AND s.rate_hi > s.rate_lo * r.ratio + r.delta))
     WHEN r.direction = 'up' THEN s.hi >= r.floor AND s.hi > s.lo * r.ratio + r.delta
          AND (NOT $pairs OR r.discrete OR s.unordered > 0
               OR coalesce(s.pair_hi >= r.floor AND s.pair_hi > s.lo * r.ratio + r.delta, false))
     ELSE s.lo <= r.floor AND s.lo < s.hi * r.ratio - r.delta
          AND (NOT $pairs OR r.discrete OR s.unordered > 0
               OR coalesce(s.pair_lo <= r.floor AND s.pair_lo < s.hi * r.ratio - r.delta, false)) END
"""
# A bitmask that could not be decoded (NULL bits) is tested on its range.
SERIES_BITS = f"(CASE WHEN s.bits_or IS NULL THEN s.hi > s.lo ELSE {BIT_VARIES} END)"
# A (host, metric)'s hours combined, as the per-series test combines a series' (one text for the per-job host stage
# and the fleet's: signals/fleet_candidates.py).
HOST_SERIES_COLUMNS = """
       bool_or(seen) AS seen, sum(n) FILTER (touches) AS n, min(lo) FILTER (touches) AS lo,
       max(hi) FILTER (touches) AS hi, min(rate_lo) AS rate_lo, max(rate_hi) AS rate_hi,
       sum(backwards) AS backwards, sum(repeats) AS unordered, max(pair_hi) FILTER (touches) AS pair_hi,
       min(pair_lo) FILTER (touches) AS pair_lo, bit_or(bits_or) FILTER (touches) AS bits_or,
       bit_and(bits_and) FILTER (touches) AS bits_and, bool_or(bits_null) FILTER (touches) AS bits_null,
       min(source_id) <> max(source_id) AS several"""
# A host's undecoded entities on their range, the others on their bits.
HOST_BITS = f"(coalesce(s.bits_null AND s.hi > s.lo, false) OR coalesce({BIT_VARIES}, false))"
