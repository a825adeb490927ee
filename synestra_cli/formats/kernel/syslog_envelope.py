"""Syslog and kernel-log envelopes: recognise the prefix a line carries and split it into columns.

One file has one envelope (detected from its head); every line is parsed with that envelope's single
RE2 pattern in DuckDB (``regexp_extract`` into a struct, one regex pass per line) and staged as
(lineno, ok, ts, up, host, sev, tag, pid, msg), msg being the message as stored (``tag[pid]: text``
but for kernel lines; the raw line when not ok). RFC3164 and RFC3339 files take a fast path first
(FAST_TAG): a short pattern reads the common ``<time> host tag[pid]: text`` lines, the full pattern
only those it leaves. What ``ts`` means depends on the envelope's time kind:

  noyear    local wall time without a year (placeholder year 2000; the year is inferred later)
  local     local wall time with a year (converted with --timezone)
  utc       already UTC (the envelope carries an offset or epoch)
  uptime    seconds since boot only (``up``); placed relative to the file's mtime later
  relative  seconds since the previous line only (``dmesg -H`` deltas); summed, then as uptime
  none      no time at all (``dmesg -t``): the file's mtime
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# Month names as syslog/journalctl print them in the locales seen in real exports (English, Russian,
# Dutch/Nordic ``jan.``, German, French, Spanish); the key is lower-case without a trailing dot.
MONTHS_SQL = """MAP {
 'jan':1,'feb':2,'mar':3,'apr':4,'may':5,'jun':6,'jul':7,'aug':8,'sep':9,'oct':10,'nov':11,'dec':12,
 'янв':1,'фев':2,'мар':3,'апр':4,'май':5,'мая':5,'июн':6,'июл':7,'авг':8,'сен':9,'окт':10,'ноя':11,'дек':12,
 'mrt':3,'mei':5,'okt':10,'mär':3,'mai':5,'dez':12,'janv':1,'févr':2,'mars':3,'avr':4,'juin':6,'juil':7,
 'août':8,'sept':9,'déc':12,'ene':1,'abr':4,'ago':8,'dic':12}[rtrim(lower(m.mon), '.')]"""

# Severity words (rsyslog/SONiC, dmesg --decode levels, fabric manager) and numbers (a PRI, kmsg's
# prio, journald's PRIORITY) -> syslog keywords. Macros, installed before staging (syslog.load): the
# envelopes' columns call them by name.
MACROS_SQL = """
CREATE OR REPLACE TEMP MACRO syslog_sev_word(x) AS MAP {
 'emerg':'emerg','panic':'emerg','alert':'alert','crit':'crit','critical':'crit',
 'fatal':'crit','err':'err','error':'err','warning':'warning','warn':'warning','notice':'notice',
 'info':'info','debug':'debug'}[lower(x)];
CREATE OR REPLACE TEMP MACRO syslog_sev_num(x) AS
 ['emerg','alert','crit','err','warning','notice','info','debug'][(TRY_CAST(x AS INTEGER) % 8) + 1]
"""


# After the time: optional host, optional severity word (SONiC), optional ``tag[pid]:``, optional
# printk ``[uptime]`` stamp, the message. A host never contains ':' (so ``kernel:`` is a tag).
_SEV = "EMERG|ALERT|CRIT|ERR|ERROR|WARNING|WARN|NOTICE|INFO|DEBUG"
# A printk stamp may carry the CONFIG_PRINTK_CALLER id after it (`[   36.782543][  T291] `, or `] [  C96] ` from
# dmesg -S): part of the envelope, so that the message starts where the event does.
CALLER = r"(?: ?\[ *[TC]\d+\])?"
TAIL = (
    r"(?:([^\s:\[\]]+) )?(?:(" + _SEV + r") )?(?:([^\s\[:]+)(?:\[(\d+)\])?: )?"
    r"(?:\[ *(\d+\.\d+)\]" + CALLER + r" )?(.*)$"
)
TAIL_NAMES_NO_HOST = "'sev','tag','pid','up','msg'"
TAIL_NAMES = "'host'," + TAIL_NAMES_NO_HOST
TAIL_NO_HOST = TAIL.removeprefix(r"(?:([^\s:\[\]]+) )?")
TAIL_COLS_NO_HOST = """{sev} AS sev, nullif(m.tag, '') AS tag, nullif(m.pid, '') AS pid,
 TRY_CAST(nullif(m.up, '') AS DOUBLE) AS up, m.msg AS msg"""


# The fast path. Most lines of a file are `<time> host tag[pid]: [printk stamp] msg`; for those a
# one-pass pattern with four or five groups, stopping before the message, reads what the envelope's
# pattern would (whose many optional groups and `(.*)$` cost ~4x more). The message is the rest of
# the line after the first ': ' (neither the time, the host nor the tag has one) and the stamp.
FAST_TAG = r" ([^\s:\[\]]+) ([^\s\[:]+)(?:\[(\d+)\])?: (\[ *\d+\.\d+\](?: ?\[ *[TC]\d+\])? )?"
FAST_TAG_NAMES = "'host','tag','pid','stamp'"


@dataclass(frozen=True)
class Envelope:
    name: str
    pattern: str  # RE2 (also valid Python re): one match per line
    names: str  # SQL list literal of the pattern's group names, in order
    columns: str  # SQL projecting m (the struct of groups) to the staging columns but lineno/ok
    ok: str  # SQL: did the line match (and is its time valid)
    time_kind: str
    loose: bool = False  # lines matching nothing are continuation lines even when not indented
    fast: str = ""  # RE2 (also Python re), one-pass: lines the fast path reads exactly as `pattern` would
    fast_names: str = ""  # SQL list literal of its group names (host, tag, pid, stamp)
    fast_ts: str = ""  # SQL: the line's ts from f (the struct of groups) and line, as `columns` gives it


def _ts_sql(year_sql: str, time_sql: str) -> str:
    # date + time: an impossible date (Feb 30) gives NULL, so the line is rejected rather than failing the file.
    date = f"try(make_date({year_sql}, {MONTHS_SQL}, TRY_CAST(m.day AS INTEGER)))"
    return f"{date} + TRY_CAST(leap_second({time_sql}) AS TIME)"  # a leap second: store/connect.py


def _tail_cols(sev_sql: str, host: bool = True) -> str:
    return ("nullif(m.host, '') AS host, " if host else "") + TAIL_COLS_NO_HOST.format(sev=sev_sql)


RFC3164 = Envelope(
    "rfc3164",
    r"^(?:<(\d{1,3})>)?([^\s\d\[<]{3,6}) {1,2}(\d{1,2}) (\d\d:\d\d:\d\d)(\.\d{1,9})? " + TAIL,
    "['pri','mon','day','hms','frac'," + TAIL_NAMES + "]",
    _ts_sql("2000", "m.hms || m.frac")
    + " AS ts, "
    + _tail_cols("coalesce(syslog_sev_num(nullif(m.pri, '')), syslog_sev_word(m.sev))"),
    "m.mon <> ''",
    "noyear",
    # Where strptime fails (a month not in English, Feb 30, 24:00:00) the line is left to the pattern.
    fast=r"^[A-Za-z]{3} [ \d]\d \d\d:\d\d:\d\d" + FAST_TAG,
    fast_names="[" + FAST_TAG_NAMES + "]",
    fast_ts="try_strptime('2000 ' || left(line, 15), '%Y %b %d %H:%M:%S')",
)

RFC3339 = Envelope(
    "rfc3339",
    r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)) " + TAIL,
    "['iso'," + TAIL_NAMES + "]",
    "timezone('UTC', TRY_CAST(leap_second(m.iso) AS TIMESTAMPTZ)) AS ts, " + _tail_cols("syslog_sev_word(m.sev)"),
    "m.iso <> ''",
    "utc",
    # The stamp is not captured (that alone triples the cost): it is the line up to the first space.
    fast=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)" + FAST_TAG,
    fast_names="[" + FAST_TAG_NAMES + "]",
    fast_ts="timezone('UTC', TRY_CAST(split_part(line, ' ', 1) AS TIMESTAMPTZ))",
)

RFC5424 = Envelope(
    "rfc5424",
    r"^<(\d{1,3})>1 (\S+) (\S+) (\S+) (\S+) (\S+) (-|(?:\[(?:[^\]\\]|\\.)*\])+)(?: "
    "\ufeff?"
    r"(.*))?$",
    "['pri','iso','host','tag','pid','msgid','sd','msg']",
    """timezone('UTC', TRY_CAST(leap_second(m.iso) AS TIMESTAMPTZ)) AS ts, NULL::DOUBLE AS up,
 nullif(m.host, '-') AS host, """
    + """syslog_sev_num(m.pri) AS sev,
 nullif(m.tag, '-') AS tag, nullif(m.pid, '-') AS pid, m.msg AS msg""",
    "m.pri <> ''",
    "utc",
)

# SONiC 202405+ rsyslog template: the year first, then the RFC 3164 date with microseconds, host, severity word:
# `2024 Sep 18 21:37:02.573152 sonic NOTICE pmon#xcvrd: ...` (local time with a year: no inference needed).
SONIC_YEAR = Envelope(
    "sonic_year",
    r"^(\d{4}) ([^\s\d\[<]{3,6}) {1,2}(\d{1,2}) (\d\d:\d\d:\d\d)(\.\d{1,9})? " + TAIL,
    "['year','mon','day','hms','frac'," + TAIL_NAMES + "]",
    _ts_sql("TRY_CAST(m.year AS INTEGER)", "m.hms || m.frac") + " AS ts, " + _tail_cols("syslog_sev_word(m.sev)"),
    "m.mon <> ''",
    "local",
)

DMESG_CTIME = Envelope(
    "dmesg_ctime",
    r"^\[[^\s\d\]]{2,5} ([^\s\d\]]{3,6}) {1,2}(\d{1,2}) (\d\d:\d\d:\d\d) (\d{4})\] ?(.*)$",
    "['mon','day','hms','year','msg']",
    _ts_sql("TRY_CAST(m.year AS INTEGER)", "m.hms")
    + " AS ts, NULL::DOUBLE AS up, NULL AS host, NULL AS sev, NULL AS tag, NULL AS pid, m.msg AS msg",
    "m.mon <> ''",
    "local",
)

DMESG_ISO = Envelope(
    "dmesg_iso",
    r"^(?:(\w+) *:(\w+) *: )?(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+(?:Z|[+-]\d\d:?\d\d)) ?(.*)$",
    "['fac','lvl','iso','msg']",
    "timezone('UTC', TRY_CAST(leap_second(replace(m.iso, ',', '.')) AS TIMESTAMPTZ)) AS ts, NULL::DOUBLE AS up, "
    + "NULL AS host, "
    + "syslog_sev_word(m.lvl) AS sev, NULL AS tag, NULL AS pid, m.msg AS msg",
    "m.iso <> ''",
    "utc",
)

# `dmesg -r` and pstore/ramoops console dumps print the record's syslog level first: `<6>[ 8364.650898] ice ...`.
DMESG_RAW = Envelope(
    "dmesg_raw",
    r"^(?:<\d{1,3}>)?\[ *(\d+\.\d+)\]" + CALLER + r" ?(.*)$",
    "['up','msg']",
    "NULL::TIMESTAMP AS ts, TRY_CAST(m.up AS DOUBLE) AS up, NULL AS host, NULL AS sev, NULL AS tag, "
    "NULL AS pid, m.msg AS msg",
    "m.up <> ''",
    "uptime",
)

DMESG_RELATIVE = Envelope(
    "dmesg_relative",
    r"^\[ *\+ *(\d+\.\d+)\] ?(.*)$",
    "['up','msg']",
    DMESG_RAW.columns,
    "m.up <> ''",
    "relative",
)

KMSG = Envelope(
    "kmsg",
    r"^(\d{1,4}),(\d+),(\d+),[^;]*;(.*)$",
    "['prio','seq','usec','msg']",
    "NULL::TIMESTAMP AS ts, TRY_CAST(m.usec AS DOUBLE) / 1e6 AS up, NULL AS host, "
    + "syslog_sev_num(m.prio) AS sev, NULL AS tag, NULL AS pid, m.msg AS msg",
    "m.usec <> ''",
    "uptime",
)

FABRICMANAGER = Envelope(
    "fabricmanager",
    r"^\[([^\s\d\]]{3,6}) (\d{1,2}) (\d{4}) (\d\d:\d\d:\d\d)\] \[([A-Z]+)\] ?(.*)$",
    "['mon','day','year','hms','lvl','msg']",
    _ts_sql("TRY_CAST(m.year AS INTEGER)", "m.hms")
    + " AS ts, NULL::DOUBLE AS up, NULL AS host, "
    + "syslog_sev_word(m.lvl) AS sev, 'nv-fabricmanager' AS tag, NULL AS pid, m.msg AS msg",
    "m.mon <> ''",
    "local",
    loose=True,  # its inband-message dumps continue on unindented "Message payload details:" lines
)

# loghub Thunderbird (Sandia IB cluster, 2005): `<alert label> <epoch> <date> <node> <syslog line>`, the
# syslog line's own host field being `node/node` or `src@node`. The epoch is UTC and wins.
THUNDERBIRD = Envelope(
    "loghub_thunderbird",
    r"^\S+ (\d{9,10}) \d{4}\.\d\d\.\d\d (\S+) [^\s\d]{3} +\d{1,2} \d\d:\d\d:\d\d \S+ " + TAIL_NO_HOST,
    "['epoch','node'," + TAIL_NAMES_NO_HOST + "]",
    "make_timestamp(TRY_CAST(m.epoch AS BIGINT) * 1000000) AS ts, m.node AS host, "
    + _tail_cols("syslog_sev_word(m.sev)", host=False),
    "m.epoch <> ''",
    "utc",
)

# `dmesg -t` / journal lines stripped of their stamp: kernel subsystem prefixes only, so that plain
# text is not claimed. Every line of such a file is a message (ts = the file's mtime).
NOTIME = Envelope(
    "dmesg_notime",
    r"^(?:kernel: )?(.*)$",
    "['msg']",
    "NULL::TIMESTAMP AS ts, NULL::DOUBLE AS up, NULL AS host, NULL AS sev, NULL AS tag, NULL AS pid, m.msg AS msg",
    "true",
    "none",
)
NOTIME_SNIFF = re.compile(
    r"^(?:kernel: )?(?:NVRM|nvidia[\w-]*|mlx5_\w+|pcieport|nfs|Lustre|LustreError|LNet|ACPI|EDAC|mce|"
    r"Kernel panic - not syncing|Hardware name|"
    r"(?:\{\d+\})?\[Hardware Error\]|[\w-]+ [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.\d)[: ]"
)

# journalctl -o json: one object per line, every value a string.
JOURNAL_JSON = Envelope(
    "journal_json",
    "",
    "",
    """make_timestamp(TRY_CAST(j[1] AS BIGINT)) AS ts, TRY_CAST(j[7] AS DOUBLE) / 1e6 AS up, j[2] AS host,
 """
    + """syslog_sev_num(j[5]) AS sev, j[3] AS tag, j[6] AS pid, j[4] AS msg""",
    "j[1] IS NOT NULL",
    "utc",
)
JOURNAL_SNIFF = re.compile(r'^\{.*"__REALTIME_TIMESTAMP" ?: ?"\d+"')

ENVELOPES: list[Envelope] = [
    RFC3164,
    RFC3339,
    RFC5424,
    SONIC_YEAR,
    DMESG_CTIME,
    DMESG_ISO,
    DMESG_RAW,
    DMESG_RELATIVE,
    KMSG,
    FABRICMANAGER,
    THUNDERBIRD,
]
_COMPILED = [(e, re.compile(e.pattern)) for e in ENVELOPES]

# sid: the source of the line (several small files are staged at once, each its own source).
STAGE_COLUMNS = (
    "sid BIGINT, lineno BIGINT, ok BOOLEAN, ts TIMESTAMP, up DOUBLE, host VARCHAR, sev VARCHAR, tag VARCHAR, "
    "pid VARCHAR, msg VARCHAR"
)

# The message as stored: the tag and pid kept, but for kernel lines.
TEXT_SQL = (
    "CASE WHEN tag IS NULL OR tag = 'kernel' THEN msg ELSE tag || coalesce('[' || pid || ']', '') || ': ' || msg END"
)

# {source}/{columns}/{ok}/{names} are this module's constants, never user input; patterns are parameters.
STAGE_REGEX_SQL = """
SELECT sid, lineno, ok, CASE WHEN ok THEN ts END AS ts, up, host, sev, tag, pid,
    CASE WHEN ok THEN {text} ELSE line END AS msg
FROM (
    SELECT sid, lineno, line, ({ok}) AND (ts IS NOT NULL OR $time_kind NOT IN ('noyear', 'local', 'utc')) AS ok, *
        EXCLUDE (sid, lineno, line, m)
    FROM (SELECT sid, lineno, line, m, {columns}
          FROM (SELECT sid, lineno, line, regexp_extract(line, $pattern, {names}) AS m FROM {source}))
)
"""
BATCH_SOURCE = "_syslog_batch WHERE line <> ''"
# Fast-path lines are staged; the others (no match, or a time strptime cannot read) get ok NULL and
# the line as msg, for SLOW_SQL to parse with the envelope's pattern once the file is staged: the fast
# path never rejects a line.
# The stored message (TEXT_SQL) of a usual line is the line from its tag on: cut, not rebuilt.
STAGE_FAST_SQL = """
INSERT INTO _syslog_stage
SELECT sid, lineno, ok, ts,
    CASE WHEN f.stamp <> '' THEN TRY_CAST(trim(split_part(f.stamp, ']', 1), '[ ') AS DOUBLE) END,
    nullif(f.host, ''), NULL, nullif(f.tag, ''), nullif(f.pid, ''),
    CASE WHEN ok IS NULL THEN line
         WHEN f.tag = 'kernel' THEN substr(line, colon + 2 + length(f.stamp))
         WHEN f.stamp = '' THEN substr(line, colon - length(f.tag)
                                             - CASE WHEN f.pid = '' THEN 0 ELSE length(f.pid) + 2 END)
         ELSE f.tag || CASE WHEN f.pid = '' THEN '' ELSE '[' || f.pid || ']' END || ': '
              || substr(line, colon + 2 + length(f.stamp)) END
FROM (SELECT *, CASE WHEN f.host <> '' AND ts IS NOT NULL THEN true END AS ok, position(': ' IN line) AS colon
      FROM (SELECT *, {ts} AS ts
            FROM (SELECT sid, lineno, line, regexp_extract(line, $fast, {names}) AS f FROM _syslog_batch
                  WHERE line <> '')))
"""
# An UPDATE of the few lines the fast path left, so that the stage stays in line order.
SLOW_SQL = """
UPDATE _syslog_stage s SET ok = r.ok, ts = r.ts, up = r.up, host = r.host, sev = r.sev, tag = r.tag, pid = r.pid,
    msg = r.msg
FROM ({select}) r
WHERE s.sid = r.sid AND s.lineno = r.lineno
"""
SLOW_SOURCE = "(SELECT sid, lineno, msg AS line FROM _syslog_stage WHERE ok IS NULL)"

STAGE_JSON_SQL = """
INSERT INTO _syslog_stage
SELECT sid, lineno, ok, CASE WHEN ok THEN ts END, up, host, sev, tag, pid, CASE WHEN ok THEN {text} ELSE line END
FROM (
    SELECT sid, lineno, line, ({ok}) AND ts IS NOT NULL AS ok, * EXCLUDE (sid, lineno, line, j)
    FROM (SELECT sid, lineno, line, j, {columns}
          FROM (SELECT sid, lineno, line, CASE WHEN json_valid(line) THEN json_extract_string(line,
                  ['$.__REALTIME_TIMESTAMP', '$._HOSTNAME', '$.SYSLOG_IDENTIFIER', '$.MESSAGE', '$.PRIORITY',
                   '$._PID', '$._SOURCE_MONOTONIC_TIMESTAMP']) END AS j
                FROM _syslog_batch WHERE line <> ''))
)
"""


def stage_sql(env: Envelope, fast: bool) -> str:
    """The INSERT staging one batch of lines (_syslog_batch)."""
    if env is JOURNAL_JSON:
        return STAGE_JSON_SQL.format(ok=env.ok, columns=env.columns, text=TEXT_SQL)
    if fast:
        return STAGE_FAST_SQL.format(ts=env.fast_ts, names=env.fast_names)
    return "INSERT INTO _syslog_stage " + _regex_select(env, BATCH_SOURCE)


def slow_sql(env: Envelope) -> str:
    """The UPDATE parsing, with the envelope's pattern, the lines the fast path left."""
    return SLOW_SQL.format(select=_regex_select(env, SLOW_SOURCE))


def _regex_select(env: Envelope, source: str) -> str:
    return STAGE_REGEX_SQL.format(ok=env.ok, columns=env.columns, names=env.names, source=source, text=TEXT_SQL)


def fast_fits(env: Envelope, head: str) -> bool:
    """Whether the fast path reads most lines of the head (else the pattern reads every line at once)."""
    if not env.fast:
        return False
    lines = [ln for ln in head.splitlines()[:200] if ln.strip() and not _is_continuation(ln)]
    return bool(lines) and sum(bool(re.match(env.fast, ln)) for ln in lines) >= 0.8 * len(lines)


def _is_continuation(line: str) -> bool:
    return line[:1] in (" ", "\t") or line.startswith("-- ")


def _fits(env: Envelope, match: re.Match | None) -> bool:
    # ISO-stamped lines count as syslog only with a ``tag:``: training logs also start with ISO times.
    return match is not None and (env is not RFC3339 or match.group(4) is not None)


DETECT_LINES = 200  # the lines of the head detect reads


# Ingest sniffs a unit of files (up to 256: ingest/units.py UNIT_FILES), then loads them: each head is detected
# once if the cache holds two units' heads (two workers), at most 64 KiB each.
@functools.lru_cache(maxsize=512)
def detect(head: str) -> tuple[Envelope | None, float]:
    """The envelope most lines of the head carry, and the fraction of (non-continuation) lines it fits."""
    lines = head.splitlines()
    if len(lines) > 1 and not head.endswith("\n"):
        lines = lines[:-1]  # the head may cut the last line short
    lines = [ln for ln in lines[:DETECT_LINES] if ln.strip() and not _is_continuation(ln)]
    if not lines:
        return None, 0.0
    if JOURNAL_SNIFF.match(lines[0]):
        return JOURNAL_JSON, sum(bool(JOURNAL_SNIFF.match(ln)) for ln in lines) / len(lines)
    best: tuple[Envelope | None, float] = (None, 0.0)
    for env, rx in _COMPILED:
        hits = [_fits(env, rx.match(ln)) for ln in lines]
        score = sum(hits) / len(lines)
        if env.loose and not hits[0]:
            score = 0.0
        elif env.loose:
            score = min(1.0, 2 * score)  # half the lines may be unindented continuations
        if score > best[1]:
            best = (env, score)
        if score >= 1.0:  # every line fits: no later envelope can score more (ties keep the first)
            break
    if best[1] < 0.5 and all(NOTIME_SNIFF.match(ln) for ln in lines):
        return NOTIME, 0.6
    return best
