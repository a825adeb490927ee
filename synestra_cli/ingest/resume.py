"""The new lines of a grown file, checked against the sources they continue (its *chain*: the earlier
sources of its path, read the same way), so that they keep the rows a one-shot ingest of the whole file
keeps.

The duplicate-sample rule of store/checks.py (one series, one time: the first sample stored is kept, a
later one with another value rejected, one with the same value dropped) holds within a source. A
metrics CSV that grows is one file in several sources: a sample of its new lines that repeats one of an
earlier chunk is dropped or rejected here, at commit (the store attached), as it would have been in one
source. The chain's rows are read only over the new rows' sources and time span (zonemaps prune the rest).
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb

from synestra_cli.store.checks import SAMPLES, CheckResult
from synestra_cli.store.sources import qualified

CHAIN_DUPS_SQL = """
CREATE OR REPLACE TEMP TABLE _chain_dups AS
SELECT m.rowid AS rid, m.source_id, m.metric, m.host, m.entity, m.ts, m.value, first(s.value) AS kept
FROM {new} m
JOIN (SELECT unnest($sids) AS sid, unnest($olds) AS old) c ON m.source_id = c.sid
JOIN {old} s ON s.source_id = c.old AND s.metric = m.metric AND s.ts = m.ts
 AND s.host IS NOT DISTINCT FROM m.host AND s.entity IS NOT DISTINCT FROM m.entity
WHERE s.source_id BETWEEN $lo AND $hi AND s.ts BETWEEN $t0 AND $t1 AND list_contains($sids, m.source_id)
GROUP BY ALL
"""
SPAN_SQL = "SELECT min(ts), max(ts) FROM {new} WHERE list_contains($sids, source_id)"
COUNT_SQL = """
SELECT source_id, count(*) FILTER (WHERE value IS DISTINCT FROM kept),
       count(*) FILTER (WHERE value IS NOT DISTINCT FROM kept)
FROM _chain_dups GROUP BY source_id
"""
SAMPLE_SQL = f"""
SELECT source_id, metric, coalesce(host, '') || CASE WHEN entity IS NULL THEN '' ELSE ':' || entity END,
       ts::VARCHAR, kept, value
FROM _chain_dups WHERE value IS DISTINCT FROM kept
QUALIFY row_number() OVER (PARTITION BY source_id ORDER BY ts, metric, host, entity) <= {SAMPLES}
ORDER BY source_id, ts, metric, host, entity
"""
DELETE_SQL = "DELETE FROM {new} WHERE rowid IN (SELECT rid FROM _chain_dups)"


def chain_duplicates(
    conn: duckdb.DuckDBPyConnection, stage: str, store: str, chains: Sequence[tuple[int, list[int]]]
) -> dict[int, CheckResult]:
    """Remove from the stage's metrics the samples of each grown source (source id, its chain's source
    ids in the store) that repeat one of its chain; say per source what was removed."""
    out: dict[int, CheckResult] = {}
    pairs = [(sid, old) for sid, olds in chains for old in olds]
    if not pairs:
        return out
    new, old = qualified(stage, "metrics"), qualified(store, "metrics")
    sids = [sid for sid, _ in chains]
    t0, t1 = conn.execute(SPAN_SQL.format(new=new), {"sids": sids}).fetchone() or (None, None)
    if t0 is None:
        return out
    olds = [o for _, o in pairs]
    params = {"sids": [s for s, _ in pairs], "olds": olds, "lo": min(olds), "hi": max(olds), "t0": t0, "t1": t1}
    conn.execute(CHAIN_DUPS_SQL.format(new=new, old=old), params)
    try:
        for sid, metric, series, ts, kept, value in conn.execute(SAMPLE_SQL).fetchall():
            reason = (
                f"duplicate sample for timestamp: {metric} {series} at {ts} (kept the first, {kept}; rejected {value})"
            )
            out.setdefault(sid, CheckResult()).rejects.append((None, reason, ""))
        for sid, conflicting, identical in conn.execute(COUNT_SQL).fetchall():
            found = out.setdefault(sid, CheckResult())
            found.deleted += conflicting + identical
            found.rejected += conflicting
            if identical:
                found.notes.append(
                    f"{identical} sample(s) of the new lines repeat the earlier lines' (same series, time and "
                    "value): stored once"
                )
        conn.execute(DELETE_SQL.format(new=new))
    finally:
        conn.execute("DROP TABLE IF EXISTS _chain_dups")
    return out
