"""A group of job logs as one table of timed lines, ``jl_lines`` (joblog.py, steps 1 and 2).

Each line is split into its segments (``\\r`` progress bars), freed of colour codes and the torchrun
``[rankN]:`` prefix, given its own time when it prints one (full stamps, glog stamps without a year),
stamps far from the rest of their file dropped as a wrong clock, and the lines left without a time
take the nearest timed line's. Every table carries the file's ``sid``.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.formats.reading import lines_to_table
from synestra_cli.formats.training.joblog_file import LogFile
from synestra_cli.store.sql import drop_temp, registered, temp_table

LINES_SQL = r"""
CREATE OR REPLACE TEMP TABLE jl_seg AS
WITH parts AS (
    SELECT sid, lineno, 1 AS part, line AS raw FROM jl_raw WHERE NOT contains(line, chr(13))
    UNION ALL
    SELECT sid, lineno, p[2] AS part, p[1] AS raw
    FROM (SELECT sid, lineno,
                 unnest(list_zip(string_split(line, chr(13)), range(1, len(string_split(line, chr(13))) + 1))) AS p
          FROM jl_raw WHERE contains(line, chr(13)))
), clean AS (
    SELECT sid, lineno, part,
           CASE WHEN contains(raw, chr(27)) THEN regexp_replace(raw, '\x1b\[[0-9;]*[A-Za-z]', '', 'g') ELSE raw END
               AS text
    FROM parts
)
-- pos runs over the whole group (file after file): unique, so a join on it never pairs two files' lines.
-- (Each regex only where its literal part occurs: contains() is several times cheaper than a regex.)
-- A rank or time the envelope gave the line (srun -l's task, kubectl's stamp: formats/envelope.py) is kept
-- where the line's own text gives none.
SELECT sid, row_number() OVER (ORDER BY sid, lineno, part) AS pos, lineno, text,
       coalesce(CASE WHEN contains(text, '[rank') THEN
                    TRY_CAST(nullif(regexp_extract(text, $rank_prefix, 1), '') AS INTEGER) END, e.rank) AS rank,
       CASE WHEN contains(text, '[rank') THEN regexp_replace(text, $rank_prefix, '') ELSE text END AS body,
       e.ts AS env_ts
FROM clean LEFT JOIN jl_env e USING (sid, lineno) WHERE part = 1 OR trim(text) <> ''
"""

# torchrun's `[rankN]:` prefix, behind what launchers put before it: a `[PID] ` (accelerate / deepspeed
# launchers) or Ray's `(RayWorkerWrapper pid=N) ` (with its colour code when pasted from a terminal).
RANK_PREFIX = r"^(?:\[\d+\] |(?:\x1b?\[[0-9;]*m)?\([A-Za-z]\w* pid=\d+\) )?\[rank(\d+)\]:"

# glog's month is not zero-padded (`E626 06:24:44` is June 26, `E1206` December 6).
# Full dates: launcher / logger prefixes at the start of a line, `[label] datetime:` anywhere,
# Slurm's `CANCELLED AT <iso>`; MLLOG's epoch milliseconds (UTC); glog `[IWEF]MMDD hh:mm:ss` (no year).
# (The glog stamp is read in GLOG_SQL, on the lines without a full date only.)
TIMES_SQL = r"""
CREATE OR REPLACE TEMP TABLE jl_full AS
WITH t AS (
    SELECT * EXCLUDE (text),
        nullif(coalesce(
            nullif(regexp_extract(body, '^\s*\[?(?:NeMo [A-Z] |titan\] |\d+\] |[A-Z]+\|[^\]]*\] )?'
                                        '(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)', 1), ''),
            CASE WHEN contains(body, 'datetime: ') THEN
                nullif(regexp_extract(body, 'datetime: (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})', 1), '') END,
            CASE WHEN contains(body, ' AT ') THEN
                regexp_extract(body, ' AT (\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})', 1) END), '') AS iso_text,
        CASE WHEN starts_with(body, ':::MLLOG ') THEN
            TRY_CAST(regexp_extract(body, '^:::MLLOG .*"time_ms": (\d+)', 1) AS BIGINT) END AS epoch_ms
    FROM jl_seg
), l AS (
    SELECT *, TRY_CAST(leap_second(replace(iso_text, ',', '.')) AS TIMESTAMP) AS local_ts FROM t
)
SELECT *, coalesce(
        CASE WHEN $tz = 'UTC' THEN local_ts ELSE timezone('UTC', timezone($tz, local_ts)) END,
        make_timestamp(epoch_ms * 1000), env_ts) AS full_ts
FROM l
"""

# A glog header takes its year from the nearest full date (before, else after), rolled over
# when the month/day is more than half a year away from it (a Dec 31 log reaching Jan 1); in a log
# without one, from the file's default year (jl_files: --year, else the file's mtime).
GLOG_SQL = r"""
CREATE OR REPLACE TEMP TABLE jl_g AS
WITH ref AS (
    SELECT l.*,
        CASE WHEN full_ts IS NULL THEN
            regexp_extract(body, '(?:^|\[)[IWEF](\d{1,2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6})\d*)? ',
                           ['mo', 'dd', 'hh', 'mi', 'ss', 'frac']) END AS glog,
        coalesce(
        last_value(full_ts IGNORE NULLS) OVER (PARTITION BY l.sid ORDER BY pos
                                               ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
        first_value(full_ts IGNORE NULLS) OVER (PARTITION BY l.sid ORDER BY pos
                                                ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING),
        make_timestamp(f.default_year, 7, 1, 0, 0, 0)) AS ref_ts
    FROM jl_full l JOIN jl_files f USING (sid)
), cand AS (
    SELECT *, CASE WHEN glog.mo <> '' THEN
        TRY_CAST(leap_second(printf('%04d-%s-%s %s:%s:%s.%s', year(ref_ts), lpad(glog.mo, 2, '0'), glog.dd,
                        glog.hh, glog.mi, glog.ss, CASE WHEN glog.frac = '' THEN '0' ELSE glog.frac END))
                 AS TIMESTAMP) END AS g0
    FROM ref
), rolled AS (
    SELECT *, CASE WHEN g0 - ref_ts > INTERVAL 183 DAY THEN g0 - INTERVAL 1 YEAR
                   WHEN ref_ts - g0 > INTERVAL 183 DAY THEN g0 + INTERVAL 1 YEAR ELSE g0 END AS g_local
    FROM cand
)
SELECT *, coalesce(full_ts,
        CASE WHEN $tz = 'UTC' THEN g_local ELSE timezone('UTC', timezone($tz, g_local)) END) AS ts_exact
FROM rolled
"""

# A wrong clock on a line (an RTC reset to 1970, a stamp in 2099) must not stretch an attempt over
# decades. The timed lines, in file order, fall into islands wherever two consecutive stamps are more
# than CLOCK_JUMP_S apart (either way; a zone offset is never that much). A small island (at most
# CLOCK_MAX_LINES lines, and a minority of the file) is a wrong clock when it is out of order between
# the islands around it, or, at either end of the file, more than CLOCK_EDGE_S from the rest: its
# lines lose their stamps and take their neighbours' (below), and the file's report says so. A job
# requeued days later prints more than a few lines, in order: it stays.
CLOCK_JUMP_S = 86400
CLOCK_EDGE_S = 30 * 86400
CLOCK_MAX_LINES = 3
CLOCK_SQL = r"""
CREATE OR REPLACE TEMP TABLE jl_clock AS
WITH t AS (
    SELECT sid, pos, lineno, ts_exact AS ts, lag(ts_exact) OVER (PARTITION BY sid ORDER BY pos) AS prev_ts
    FROM jl_g WHERE ts_exact IS NOT NULL
), isl AS (
    SELECT *, sum(CASE WHEN prev_ts IS NULL OR abs(epoch(ts) - epoch(prev_ts)) > $jump THEN 1 ELSE 0 END)
                  OVER (PARTITION BY sid ORDER BY pos ROWS UNBOUNDED PRECEDING) AS island
    FROM t
), g AS (
    SELECT sid, island, count(*) AS n, min(pos) AS p0, max(pos) AS p1, min(ts) AS t0, max(ts) AS t1,
           arg_min(lineno, pos) AS first_line, arg_min(ts, pos) AS first_ts
    FROM isl GROUP BY sid, island
), nb AS (
    SELECT *, lag(t1) OVER (PARTITION BY sid ORDER BY island) AS before_t,
           lead(t0) OVER (PARTITION BY sid ORDER BY island) AS after_t, sum(n) OVER (PARTITION BY sid) AS total
    FROM g
)
SELECT sid, p0, p1, n, first_line, first_ts FROM nb
WHERE n <= $max_lines AND n * 2 < total AND (
       (before_t IS NOT NULL AND after_t IS NOT NULL AND NOT (t0 >= before_t AND t1 <= after_t))
    OR (before_t IS NULL AND after_t IS NOT NULL AND epoch(after_t) - epoch(t1) > $edge)
    OR (after_t IS NULL AND before_t IS NOT NULL AND epoch(t0) - epoch(before_t) > $edge))
ORDER BY sid, p0
"""
CLOCK_DROP_SQL = """
UPDATE jl_g SET ts_exact = NULL
WHERE ts_exact IS NOT NULL
  AND EXISTS (SELECT 1 FROM jl_clock c WHERE c.sid = jl_g.sid AND jl_g.pos BETWEEN c.p0 AND c.p1)
"""
CLOCK_NOTES_SQL = "SELECT sid, sum(n), min(first_line), arg_min(first_ts, first_line) FROM jl_clock GROUP BY sid"


def drop_clock_outliers(conn: duckdb.DuckDBPyConnection, files: Sequence[LogFile]) -> None:
    """Stamps far outside the rest of their file lose their time (CLOCK_SQL), with a note to that file."""
    conn.execute(CLOCK_SQL, {"jump": CLOCK_JUMP_S, "edge": CLOCK_EDGE_S, "max_lines": CLOCK_MAX_LINES})
    noted = conn.execute(CLOCK_NOTES_SQL).fetchall()
    if noted:
        conn.execute(CLOCK_DROP_SQL)
    by_sid = {f.sid: f for f in files}
    for sid, n, line, ts in noted:
        f = by_sid[sid]
        f.result.notes.append(
            f"{f.ctx.display}: {n} line(s) stamped far from the lines around them (line {line}: "
            f"{ts:%Y-%m-%d %H:%M:%S}), a wrong clock: their times are taken from their neighbours"
        )
    drop_temp(conn, ["jl_clock"])


# A line without its own time takes the nearest timed line's (by line distance; the one before on a
# tie): a traceback sits just before torchrun's timed failure report, a load line just after a banner.
INFER_SQL = r"""
CREATE OR REPLACE TEMP TABLE jl_lines AS
WITH n AS (
    SELECT sid, pos, lineno, rank, body, ts_exact,
        last_value(ts_exact IGNORE NULLS) OVER before AS prev_ts,
        last_value(CASE WHEN ts_exact IS NOT NULL THEN pos END IGNORE NULLS) OVER before AS prev_pos,
        first_value(ts_exact IGNORE NULLS) OVER after AS next_ts,
        first_value(CASE WHEN ts_exact IS NOT NULL THEN pos END IGNORE NULLS) OVER after AS next_pos
    FROM jl_g
    WINDOW before AS (PARTITION BY sid ORDER BY pos ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
           after AS (PARTITION BY sid ORDER BY pos ROWS BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING)
)
SELECT sid, pos, lineno, rank, body, ts_exact,
    CASE WHEN next_pos IS NOT NULL AND (prev_pos IS NULL OR next_pos - pos < pos - prev_pos) THEN next_ts
         ELSE prev_ts END AS ts,
    CASE WHEN ts_exact IS NOT NULL THEN 'exact' WHEN prev_ts IS NOT NULL OR next_ts IS NOT NULL THEN 'inferred'
         ELSE 'none' END AS ts_precision
FROM n
"""


def _lines(files: Sequence[LogFile]) -> pa.Table:
    """The files' lines (sid, lineno, line), file after file."""
    tables = []
    for f in files:
        t = lines_to_table(f.ctx.read_text(), 1)
        tables.append(t.add_column(0, "sid", pa.array(np.full(t.num_rows, f.sid, dtype=np.int64))))
    return pa.concat_tables(tables)


ENV_SCHEMA = pa.schema([("sid", pa.int64()), ("lineno", pa.int64()), ("rank", pa.int32()), ("ts", pa.timestamp("us"))])


def _envelope_columns(files: Sequence[LogFile]) -> pa.Table:
    """(sid, lineno, rank, ts) the envelope of each file gave its lines (formats/envelope.py)."""
    tables = [ENV_SCHEMA.empty_table()]
    for f in files:
        cols = f.ctx.envelope_columns
        if cols is not None:
            n = cols.num_rows
            sid = pa.array(np.full(n, f.sid, dtype=np.int64))
            tables.append(
                pa.table(
                    [sid, cols["lineno"], cols["rank"].cast(pa.int32()), cols["ts"].cast(pa.timestamp("us"))],
                    schema=ENV_SCHEMA,
                )
            )
    return pa.concat_tables(tables)


def prepare_lines(conn: duckdb.DuckDBPyConnection, files: Sequence[LogFile]) -> None:
    """Build jl_lines (sid, pos, lineno, rank, body, ts_exact, ts, ts_precision) from the files."""
    temp_table(
        conn,
        "jl_files",
        {"sid": ("BIGINT", [f.sid for f in files]), "default_year": ("INTEGER", [f.ctx.default_year for f in files])},
    )
    with registered(conn, "jl_raw", _lines(files)), registered(conn, "jl_env", _envelope_columns(files)):
        conn.execute(LINES_SQL, {"rank_prefix": RANK_PREFIX})
    zones = {f.ctx.options.timezone for f in files}  # each file's parser reads it (a part of its source key)
    if len(zones) > 1:
        raise ValueError(f"job logs of different --timezone in one group: {sorted(zones)}")
    tz = zones.pop()
    conn.execute(TIMES_SQL, {"tz": tz})
    conn.execute(GLOG_SQL, {"tz": tz})
    drop_temp(conn, ["jl_seg", "jl_full"])  # each a copy of the lines: jl_g holds what is left to read
    drop_clock_outliers(conn, files)
    conn.execute(INFER_SQL)


# glog stamps of a log without any dated line took the file's default year: said in its report.
YEAR_NOTE_SQL = """
SELECT sid, count(*), min(year(g_local)) FROM jl_g g
WHERE glog.mo <> '' AND full_ts IS NULL
  AND NOT EXISTS (SELECT 1 FROM jl_g d WHERE d.sid = g.sid AND d.full_ts IS NOT NULL)
GROUP BY sid
"""


def year_notes(conn: duckdb.DuckDBPyConnection, files: Sequence[LogFile]) -> None:
    """Say when glog stamps took the year of the file's mtime (no dated line in the log, no --year)."""
    if files[0].ctx.options.year:  # the same options for the group; each file's year was read in prepare_lines
        return
    by_sid = {f.sid: f for f in files}
    for sid, n, year in conn.execute(YEAR_NOTE_SQL).fetchall():
        f = by_sid[sid]
        f.result.notes.append(
            f"{n} glog time stamps carry no year and the log has no dated line: year taken from the file's "
            f"modification time ({f.ctx.mtime:%Y-%m-%d}): {year}; pass --year YEAR if it was copied later"
        )
