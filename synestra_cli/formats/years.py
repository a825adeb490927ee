"""The year of yearless time stamps (RFC 3164, journal short): dated evidence first, the file's mtime last.

A syslog file without years is first placed from a base year (its lines after each new year, where the month
goes down, one year later: formats/kernel/syslog.py). Which base year is right is then decided, in this order:

1. `--year`: the year the file starts in.
2. Dated evidence in the file itself: messages that carry a full date on their own line's day (`ts=2024-02-08T09:10`,
   `Mon, 2022-10-31 16:01:07`: the year is that date's), else a journalctl header
   (`-- Logs begin at Fr 2015-08-07 13:03:13 CEST, end at Mi 2015-09-30 16:29:34 CEST. --`, systemd 246+
   `-- Journal begins at ..., ends at ... --`): the file's last line falls at or before its end.
3. Dated evidence in the store for the same hosts: other sources that name one of its hosts and whose stamps
   carry a year (journald JSON, RFC 3339, DCGM scrapes with timestamps, sacct on those nodes; not another
   yearless log, whatever dated it, unless by --year), by the time span each source covers. The base year
   whose placement of the file overlaps them (or comes nearest, within STORE_NEAR_DAYS) wins. Ingest parses
   yearless logs after the run's other files are committed (ingest/run.py), and none dates another: so the
   year does not depend on the order in which a run's files were parsed or committed.
4. The file's mtime: its last line falls in the mtime's year, or the year before when its month is later.

Each source records where its year came from (`source_years`), and the ingest report says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from synestra_cli.formats.base import leap_second
from synestra_cli.shown import plural

STORE_NEAR_DAYS = 31  # store evidence further than this from every placement of the file says nothing
HEADER_SLACK = timedelta(days=1)  # the header's local times carry a zone name we do not resolve

RECORD_SQL = "INSERT INTO source_years SELECT unnest($sids), unnest($bases), unnest($years)"
SPAN_SQL = "SELECT source_id, min(ts), max(ts) FROM events WHERE list_contains($sids, source_id) GROUP BY source_id"
SHIFT_SQL = """
UPDATE events SET ts = ts + to_years(CAST(k.k AS INTEGER))
FROM (SELECT unnest($sids) AS sid, unnest($ks) AS k) k WHERE events.source_id = k.sid
"""
# A message carrying a full date within 36 h of its own line's (placed) time: the year offset it votes for
# (per source: the offset most lines vote for, the later on a tie).
DATED_LINES_SQL = r"""
WITH v AS (
    SELECT source_id, ts, TRY_CAST(regexp_extract(message, '(\d{4}-\d\d-\d\d)[T _]\d\d:\d\d', 1) AS DATE) AS d
    FROM events
    WHERE list_contains($sids, source_id) AND NOT starts_with(message, '-- ')
      AND regexp_matches(message, '\d{4}-\d\d-\d\d[T _]\d\d:\d\d')
)
SELECT source_id, year(d) - year(ts) AS k, count(*) AS n FROM v
WHERE d IS NOT NULL AND year(d) BETWEEN 1971 AND 9998
  AND abs(date_diff('hour', ts + to_years(CAST(year(d) - year(ts) AS INTEGER)), CAST(d AS TIMESTAMP))) <= 36
GROUP BY source_id, k
QUALIFY row_number() OVER (PARTITION BY source_id ORDER BY n DESC, k DESC) = 1
"""
HEADER_SQL = """
SELECT source_id, arg_min(message, line) FROM events
WHERE list_contains($sids, source_id) AND regexp_matches(message, '^-- (Logs begin|Journal begins) at ')
GROUP BY source_id
"""
HEADER_RE = re.compile(
    r"^-- (?:Logs begin|Journal begins) at \S+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^,]*"
    r"(?:, ends? at \S+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d))?"
)
# Other sources that name one of the file's hosts, with their time span: read from `sources` (each source's
# first/last time and hosts, kept at ingest), never by scanning their rows: one such query per batch of files
# is cheap on a store of 10^8 samples. A yearless log is no evidence (its year is itself inferred), but by --year.
STORE_SQL = """
WITH h AS (
    SELECT source_id AS sid, list(DISTINCT host) AS hosts FROM events
    WHERE list_contains($sids, source_id) AND host IS NOT NULL GROUP BY source_id
)
SELECT h.sid, s.path, s.first_ts, s.last_ts FROM {evidence}sources s JOIN h ON s.source_id <> h.sid
WHERE s.first_ts IS NOT NULL AND s.last_ts IS NOT NULL AND list_has_any(s.hosts, h.hosts)
  AND s.source_id NOT IN (SELECT source_id FROM {evidence}source_years WHERE basis <> 'option')
ORDER BY h.sid, s.source_id
"""


@dataclass(frozen=True)
class YearChoice:
    offset: int  # years to add to the file as placed
    basis: str  # option | file | store | mtime
    why: str  # what the evidence was, for the report


def record(conn: duckdb.DuckDBPyConnection, source_id: int, basis: str, year: int | None) -> None:
    """Say where a source's year came from: 'mtime' sources are not evidence for another file's year."""
    record_many(conn, [(source_id, basis, year)])


def record_many(conn: duckdb.DuckDBPyConnection, rows: list[tuple[int, str, int | None]]) -> None:
    """record() of several sources: (source_id, basis, year) each, in one statement."""
    if rows:
        sids, bases, years = (list(col) for col in zip(*rows, strict=True))
        conn.execute(RECORD_SQL, {"sids": sids, "bases": bases, "years": years})


@dataclass(frozen=True)
class Placing:
    """A source of yearless stamps to place: the years its stamps were placed off the mtime's, and the mtime."""

    source_id: int
    mtime_offset: int
    mtime: datetime


def place(
    conn: duckdb.DuckDBPyConnection, source_id: int, mtime_offset: int, mtime: datetime, evidence: str = ""
) -> YearChoice | None:
    """Choose the year of the source's events as placed (dated evidence in the file, in the store, else the
    mtime's offset), shift them, record the basis. None when the source has no timed events."""
    return place_many(conn, [Placing(source_id, mtime_offset, mtime)], evidence)[source_id]


def place_many(
    conn: duckdb.DuckDBPyConnection, items: list[Placing], evidence: str = ""
) -> dict[int, YearChoice | None]:
    """place() of several sources, with one query per kind of evidence for all of them."""
    sids = [it.source_id for it in items]
    params = {"sids": sids}
    spans = {sid: (first, last) for sid, first, last in conn.execute(SPAN_SQL, params).fetchall()}
    dated = {sid: (k, n) for sid, k, n in conn.execute(DATED_LINES_SQL, params).fetchall()}
    headers = dict(conn.execute(HEADER_SQL, params).fetchall())
    store: dict[int, list[tuple[str, datetime, datetime]]] = {}
    for sid, *span in conn.execute(STORE_SQL.format(evidence=evidence), params).fetchall():
        store.setdefault(sid, []).append(tuple(span))
    choices: dict[int, YearChoice | None] = {}
    shifts, records = [], []
    for it in items:
        first, last = spans.get(it.source_id, (None, None))
        if first is None or last is None:
            choices[it.source_id] = None
            continue
        k_n = dated.get(it.source_id)
        choice = (
            (
                YearChoice(int(k_n[0]), "file", f"{k_n[1]} line(s) of the file that carry a full date on their own day")
                if k_n
                else None
            )
            or _from_header(headers.get(it.source_id), last)
            or _from_store(store.get(it.source_id, []), first, last, it.mtime_offset)
            or YearChoice(it.mtime_offset, "mtime", f"the file's modification time ({it.mtime:%Y-%m-%d})")
        )
        if choice.offset:
            shifts.append((it.source_id, choice.offset))
        records.append((it.source_id, choice.basis, first.year + choice.offset))
        if choice.basis != "mtime" and choice.offset != it.mtime_offset:
            choice = YearChoice(
                choice.offset, choice.basis, f"{choice.why}; the file's mtime would say {first.year + it.mtime_offset}"
            )
        choices[it.source_id] = choice
    if shifts:
        conn.execute(SHIFT_SQL, {"sids": [sid for sid, _ in shifts], "ks": [k for _, k in shifts]})
    record_many(conn, records)
    return choices


def _from_header(header: str | None, last: datetime) -> YearChoice | None:
    """The journal header's end bounds the file's last line: the latest placement at or before it."""
    m = HEADER_RE.match(header) if header else None
    if m is None or m.group(2) is None:
        return None
    begin, end = (datetime.fromisoformat(leap_second(g)) for g in m.groups())
    k = end.year - last.year
    if _shift(last, k) > end + HEADER_SLACK:  # the last line's day comes after the end's in that year
        k -= 1
    if _shift(last, k) > end + HEADER_SLACK or _shift(last, k) < begin - HEADER_SLACK:
        return None
    return YearChoice(k, "file", f"the journal header ({m.group(0).strip()})")


def _from_store(
    spans: list[tuple[str, datetime, datetime]], first: datetime, last: datetime, mtime_offset: int
) -> YearChoice | None:
    """The placement nearest the dated rows of the same hosts in other sources (overlap: distance 0).
    `spans`: (path, first, last) of those sources (STORE_SQL, read from `evidence`: the schema, as
    `catalog.schema.`, holding the store's `sources` and `source_years` when the file is parsed apart
    from the store, in ingest's stage; "": the current database)."""
    if not spans:
        return None
    ks = {y - first.year + d for _, lo, hi in spans for y in range(lo.year, hi.year + 1) for d in (-1, 0, 1)}
    scored = []
    for k in ks:
        lo_k, hi_k = _shift(first, k), _shift(last, k)
        gaps = [(max(lo - hi_k, lo_k - hi, timedelta(0)), path) for path, lo, hi in spans]
        gap, path = min(gaps)
        scored.append((gap, k != mtime_offset, -k, k, path))
    gap, _, _, k, path = min(scored)
    if gap > timedelta(days=STORE_NEAR_DAYS):
        return None
    others = len(spans) - 1
    also = f" and {plural(others, 'other source')}" if others else ""
    return YearChoice(k, "store", f"dated evidence in the store for the same hosts ({path}{also})")


def _shift(ts: datetime, k: int) -> datetime:
    """ts moved by k years (Feb 29 to Feb 28 when the target year has none)."""
    try:
        return ts.replace(year=ts.year + k)
    except ValueError:
        return ts.replace(year=ts.year + k, day=28)
