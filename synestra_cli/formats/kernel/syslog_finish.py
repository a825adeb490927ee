"""What comes once a group of syslog files has its events written: the year of yearless stamps, the
rows per file, the kernel events completed from their neighbour lines, the hosts' full names, the notes."""

from __future__ import annotations

import duckdb

from synestra_cli.formats import years
from synestra_cli.formats.hosts import record_full_names_sql
from synestra_cli.formats.kernel import kernel_events as kev
from synestra_cli.formats.kernel import syslog_envelope as env
from synestra_cli.formats.kernel.syslog_events import FROM_MTIME, SyslogFile

HOSTS_LIST_SQL = "SELECT sid, host FROM _syslog_hosts"
KINDS_SQL = "SELECT source_id, kind, count(*) FROM events WHERE list_contains($sids, source_id) GROUP BY ALL"
REBOOTS_SQL = """
SELECT sid, min(lineno), count(*)
FROM (SELECT sid, lineno, up < lag(up) OVER (PARTITION BY sid ORDER BY lineno) AS back FROM _syslog_stage)
WHERE back GROUP BY sid
"""
YEARS_SQL = (
    "SELECT source_id, min(year(ts)), max(year(ts)) FROM events WHERE list_contains($sids, source_id) GROUP BY ALL"
)


def finish(conn: duckdb.DuckDBPyConnection, work: duckdb.DuckDBPyConnection, files: list[SyslogFile]) -> None:
    """What comes once the files' events are written: years, counts, neighbour-line completions, notes."""
    envelope = files[0].envelope
    by_sid = {f.sid: f for f in files}
    sids = list(by_sid)
    if envelope.time_kind == "noyear":
        _place_years(conn, files)
    kinds: dict[int, dict[str, int]] = {sid: {} for sid in sids}
    for sid, kind, n in conn.execute(KINDS_SQL, {"sids": sids}).fetchall():
        kinds[sid][kind] = n
    for f in files:
        f.result.rows = sum(kinds[f.sid].values())
    for kind, sql, params in kev.POST_SQL:
        having = [sid for sid in sids if kind in kinds[sid]]
        if having:
            conn.execute(sql, {"sids": having, **params})
    if envelope.time_kind == "uptime":
        _note_reboots(work, by_sid)
    _syslog_hosts_seen = work.sql(HOSTS_LIST_SQL).to_arrow_table()  # noqa: F841 - read by the replacement scan
    conn.execute(record_full_names_sql("_syslog_hosts_seen AS h", "host", sid="sid"))
    if envelope.time_kind in FROM_MTIME:
        # placed from the mtime: no evidence for another's year
        years.record_many(conn, [(sid, "mtime", None) for sid in sids])
        for f in files:
            f.result.notes.append(_uptime_note(envelope))
    noted = [f for f in files if f.year_choice is not None]
    if noted:
        spans = {sid: (lo, hi) for sid, lo, hi in conn.execute(YEARS_SQL, {"sids": [f.sid for f in noted]}).fetchall()}
        for f in noted:
            f.result.notes += _year_note(f, spans.get(f.sid))


def _year_note(f: SyslogFile, span: tuple[int, int] | None) -> list[str]:
    """Say where the year came from (formats/years.py): a log copied later is re-dated by its mtime."""
    choice = f.year_choice
    if span is None or span[0] is None or choice is None:
        return []
    first, last = span
    years_text = str(first) if first == last else f"{first}-{last}"
    advice = "if it was copied later" if choice.basis == "mtime" else "to override"
    return [
        f"no year in the time stamps: year taken from {choice.why}: {years_text}; "
        f"pass --year YEAR (the year the log starts in) {advice}"
    ]


def _place_years(conn: duckdb.DuckDBPyConnection, files: list[SyslogFile]) -> None:
    """--year is the year the file starts in (lines were placed from it). Else dated evidence in the file or
    the store decides (formats/years.py), and last the mtime: the last line falls in the mtime's year (or the
    one before, when its month is later than the mtime's). Lines were placed from the mtime's year."""
    given = [f for f in files if f.ctx.options.year]
    years.record_many(conn, [(f.sid, "option", f.ctx.options.year) for f in given])
    placing = []
    for f in files:
        if f.ctx.options.year:
            continue
        clock, mtime = f.clock, f.ctx.mtime
        shift = clock.wrapped + (1 if clock.last_month and clock.last_month > mtime.month else 0)
        placing.append(years.Placing(f.sid, -shift, mtime))
    if placing:
        choices = years.place_many(conn, placing, files[0].ctx.evidence)
        for f in files:
            f.year_choice = choices.get(f.sid)


def _note_reboots(conn: duckdb.DuckDBPyConnection, by_sid: dict[int, SyslogFile]) -> None:
    for sid, first_line, n in conn.execute(REBOOTS_SQL).fetchall():
        by_sid[sid].result.notes.append(
            f"uptime goes back {n} time(s) (a reboot; first at line {first_line}): lines before the "
            "last reboot are placed as if they belonged to the last boot, so their times are wrong"
        )


def _uptime_note(envelope: env.Envelope) -> str:
    if envelope.time_kind == "none":
        return "no timestamps in the file: every line placed at the file's modification time"
    return (
        "only seconds since boot in the file: times placed so that the last line falls at the file's "
        "modification time (assumes one boot, written just before the file was saved)"
    )
