"""Syslog lines the envelope does not fit (formats/kernel/syslog.py, step 2): a continuation line (indented, or
any line of an envelope whose messages run on: the fabric manager's dumps) is folded into the message
before it; a journal marker (`-- Boot ... --`) is kept as its own line, with the time and host of the
message after it (at the end of a file: before it); anything else is rejected with its line number,
as is a continuation line before any message."""

from __future__ import annotations

from collections import Counter

import duckdb

from synestra_cli.formats.base import MAX_REJECT_SAMPLES, LoadResult
from synestra_cli.formats.kernel import syslog_envelope as env
from synestra_cli.store.sql import one_row

# Lines the envelope does not fit: continuation (folded into the message before), marker, or reject.
LOOSE_SQL = """
SELECT count(*) FROM _syslog_stage WHERE NOT ok
"""
MARK_LOOSE_SQL = """
CREATE OR REPLACE TEMP TABLE _syslog_loose AS
SELECT c.sid, c.lineno, c.msg, h.lineno AS head,
    CASE WHEN starts_with(c.msg, '-- ') AND ends_with(rtrim(c.msg), '--') THEN 'marker'
         WHEN h.lineno IS NULL THEN 'orphan'
         WHEN $loose OR regexp_matches(c.msg, '^\\s') THEN 'continuation'
         ELSE 'reject' END AS what
FROM (SELECT sid, lineno, msg FROM _syslog_stage WHERE NOT ok) c
ASOF LEFT JOIN (SELECT sid, lineno FROM _syslog_stage WHERE ok) h ON c.sid = h.sid AND c.lineno > h.lineno
"""
FOLD_SQL = """
UPDATE _syslog_stage s SET msg = s.msg || chr(10) || f.txt
FROM (SELECT sid, head, string_agg(msg, chr(10) ORDER BY lineno) AS txt FROM _syslog_loose
      WHERE what = 'continuation' GROUP BY sid, head) f
WHERE s.sid = f.sid AND s.lineno = f.head
"""
# A journal marker takes the time and host of the message that follows it (at the end: the one before).
MARKER_SQL = """
UPDATE _syslog_stage s SET ok = true, ts = n.ts, up = n.up, host = n.host
FROM (SELECT c.sid, c.lineno, coalesce(nx.ts, pv.ts) AS ts, coalesce(nx.up, pv.up) AS up,
             CASE WHEN nx.nl IS NULL THEN pv.host ELSE nx.host END AS host
      FROM (SELECT sid, lineno FROM _syslog_loose WHERE what = 'marker') c
      ASOF LEFT JOIN (SELECT sid, lineno AS nl, ts, up, host FROM _syslog_stage WHERE ok) nx
          ON c.sid = nx.sid AND c.lineno <= nx.nl
      ASOF LEFT JOIN (SELECT sid, lineno AS pl, ts, up, host FROM _syslog_stage WHERE ok) pv
          ON c.sid = pv.sid AND c.lineno >= pv.pl) n
WHERE s.sid = n.sid AND s.lineno = n.lineno
"""
REJECT_COUNT_SQL = "SELECT sid, count(*) FROM _syslog_loose WHERE what IN ('reject', 'orphan') GROUP BY sid"
REJECT_SAMPLE_SQL = f"""
SELECT sid, lineno, what, msg FROM _syslog_loose WHERE what IN ('reject', 'orphan')
QUALIFY row_number() OVER (PARTITION BY sid ORDER BY lineno) <= {MAX_REJECT_SAMPLES}
ORDER BY sid, lineno
"""
DELETE_LOOSE_SQL = "DELETE FROM _syslog_stage WHERE NOT ok"


def resolve_loose(conn: duckdb.DuckDBPyConnection, envelope: env.Envelope, results: dict[int, LoadResult]) -> None:
    """Fold continuation lines into the message before them, place journal markers, and report the rest
    (each file's result by its staged id) as rejects with their line numbers."""
    (n,) = one_row(conn, LOOSE_SQL)
    if not n:
        return
    conn.execute(MARK_LOOSE_SQL, {"loose": envelope.loose})
    conn.execute(FOLD_SQL)
    conn.execute(MARKER_SQL)
    reasons = {
        "reject": f"does not match the {envelope.name} envelope of this file",
        "orphan": "continuation line before any message",
    }
    sampled: Counter[int] = Counter()
    for sid, lineno, what, text in conn.execute(REJECT_SAMPLE_SQL).fetchall():
        results[sid].reject(lineno, reasons[what], text)
        sampled[sid] += 1
    for sid, counted in conn.execute(REJECT_COUNT_SQL).fetchall():
        results[sid].rejected += counted - sampled[sid]
    conn.execute(DELETE_LOOSE_SQL)
