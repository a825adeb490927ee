"""SQL for Prometheus text lines: cut, group by series, parse labels once per series, check samples.

Two ways in, one way out (prom_series + prom_samples for prom_labels.write_series):
- fast: DuckDB's parallel CSV reader over the file (plain, or gzip once checked), values and timestamps
  parsed while grouping. It has no line numbers, so it is kept only when every line parses;
- numbered: ``ctx.line_batches()`` with line numbers, every sample checked and rejects reported.
"""

from __future__ import annotations

import duckdb

from synestra_cli.formats import years
from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.store.checks import OUT_OF_RANGE, TS_MAX, TS_MIN
from synestra_cli.store.sql import drop_temp, scalar

# Cut position: the first "}" after labels, else the first blank (space or TAB: both separate tokens in the
# text format) after a bare metric name. If the series text so cut does not close its quotes, the "}" was inside
# a quoted label value: those few lines are cut again by a regex that respects quotes (REPAIR_SQL).
SPLIT = """CASE WHEN strpos(line, '{') > 0 THEN strpos(line, '}')
     WHEN strpos(line, chr(9)) = 0 THEN strpos(line, ' ') - 1
     WHEN strpos(line, ' ') = 0 THEN strpos(line, chr(9)) - 1
     ELSE least(strpos(line, ' '), strpos(line, chr(9))) - 1 END"""
LABELS_END_RE = r'^[^{]*\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\}'
# A braced series text that is not one whole `name{...}` (its "}" is not outside quotes): cut inside a value.
ODD_QUOTES = f"(contains(series, '{{') AND NOT regexp_full_match(series, '{LABELS_END_RE}'))"
# Blank and comment lines carry no sample (a CASE: DuckDB evaluates it cheaply, once per row). Lines are
# left-trimmed first (LEFT_TRIM): blanks before a sample or a `#` are allowed by the text format.
SKIP = "CASE WHEN line = '' OR starts_with(line, '#') THEN true ELSE false END"
LEFT_TRIM = """CASE WHEN starts_with(line, ' ') OR starts_with(line, chr(9)) THEN ltrim(line, ' ' || chr(9))
     ELSE line END"""
SERIES = "CASE WHEN p <= 0 THEN line ELSE substr(line, 1, p) END"
# The rest of the line after the "}" or the name, as it is (series || tail is the line): the value and timestamp,
# after blanks that are optional after a "}" (ROWS_SQL trims them).
TAIL = "CASE WHEN p <= 0 THEN '' ELSE substr(line, p + 1) END"

# Timestamp token -> microseconds: ms integers (exposition, promtool dump), seconds with a fraction
# (dump-openmetrics, or every OpenMetrics file: $seconds). Out-of-range values give NULL (a reject).
TS_MICROS = """CASE WHEN $seconds OR contains(t, '.') OR contains(t, 'e')
         THEN CASE WHEN abs(TRY_CAST(t AS DOUBLE)) < 1e11 THEN CAST(round(TRY_CAST(t AS DOUBLE) * 1e6) AS BIGINT) END
     WHEN abs(TRY_CAST(t AS BIGINT)) < 100000000000000 THEN TRY_CAST(t AS BIGINT) * 1000 END"""

# Fast path: DuckDB's reader cuts each line at "} " itself (a two-byte delimiter), so the series text is
# never copied; a bare "name value [ts]" line comes as one column and is cut at its first space. Only two
# list aggregates per series; the checks run afterwards on the lists. A sample whose value does not parse
# or that has more text after the timestamp (an OpenMetrics exemplar) gets a NULL value; an unparsable
# timestamp becomes BAD_MS; either sends the file to the numbered path, as does a line with "} " inside a
# label value (3 columns: a CSV reject). No timestamp: NULL (the file's time). $seconds: OpenMetrics,
# whose timestamps are seconds; they are kept as ms (dumps print 3 decimals).
BAD_MS = -(2**62)
FAST_GROUP_SQL = f"""
CREATE OR REPLACE TEMP TABLE prom_groups AS
SELECT CASE WHEN braced THEN key || '}}' ELSE key END AS series, list(value) AS vals, list(ms) AS tss
FROM (
    SELECT braced, key,
           CASE WHEN length(tail) - length(v) - length(t) <= 1 THEN TRY_CAST(v AS DOUBLE) END AS value,
           CASE WHEN t = '' THEN NULL
                WHEN $seconds THEN coalesce(TRY_CAST(round(TRY_CAST(t AS DOUBLE) * 1000) AS BIGINT), {BAD_MS})
                ELSE coalesce(TRY_CAST(t AS BIGINT), {BAD_MS}) END AS ms
    FROM (
        SELECT *, split_part(tail, ' ', 1) AS v, split_part(tail, ' ', 2) AS t
        FROM (
            SELECT r IS NOT NULL AS braced,
                   CASE WHEN r IS NOT NULL THEN s ELSE split_part(s, ' ', 1) END AS key,
                   CASE WHEN r IS NOT NULL THEN r WHEN strpos(s, ' ') > 0 THEN substr(s, strpos(s, ' ') + 1)
                        ELSE '' END AS tail
            FROM read_csv($path, columns = {{'s': 'VARCHAR', 'r': 'VARCHAR'}}, delim = '}} ', quote = '',
                          escape = '', header = false, auto_detect = false, null_padding = true,
                          compression = $compression, ignore_errors = true, store_rejects = true,
                          rejects_table = 'prom_csv_rejects', rejects_scan = 'prom_csv_scans')
            -- a CASE, not an AND chain: DuckDB evaluates it once per row, cheaply (measured)
            WHERE CASE WHEN starts_with(s, '#') OR s = '' THEN false
                       WHEN starts_with(s, ' ') THEN trim(s) <> '' ELSE true END)))
GROUP BY braced, key
"""
FAST_OK_SQL = """
SELECT (SELECT count(*) FROM prom_csv_rejects WHERE NOT starts_with(csv_line, '#')) = 0
       AND (SELECT coalesce(bool_and(list_count(vals) = len(vals) AND coalesce(list_min(tss) >= -1e13, true)
                                     AND coalesce(list_max(tss) <= 1e14, true)), true) FROM prom_groups)
       AND (SELECT bool_and(ok) FROM prom_dict)
"""
FAST_SAMPLES_SQL = """
CREATE OR REPLACE TEMP VIEW prom_samples AS
SELECT d.sid, g.tss AS ms, g.vals FROM prom_groups g JOIN prom_dict d USING (series)
"""

# Numbered path: per batch, tails and line numbers grouped by series text.
CREATE_GROUPS_SQL = "CREATE OR REPLACE TEMP TABLE prom_groups (series VARCHAR, tails VARCHAR[], linenos BIGINT[])"
BATCH_GROUP_SQL = f"""
INSERT INTO prom_groups (series, tails, linenos)
SELECT series, list(tail), list(lineno) FROM (
    SELECT lineno, CASE WHEN line = '# EOF' THEN line ELSE {SERIES} END AS series, {TAIL} AS tail
    FROM (SELECT lineno, line, {SPLIT} AS p
          FROM (SELECT lineno, {LEFT_TRIM} AS line FROM prom_batch) WHERE NOT {SKIP} OR line = '# EOF'))
GROUP BY series
"""
REPAIR_SQL = f"""
CREATE OR REPLACE TEMP TABLE prom_repair AS
SELECT series || tail AS line, lineno
FROM (SELECT series, unnest(tails) AS tail, unnest(linenos) AS lineno FROM prom_groups WHERE {ODD_QUOTES});
DELETE FROM prom_groups WHERE {ODD_QUOTES};
INSERT INTO prom_groups (series, tails, linenos)
SELECT series, list(tail), list(lineno) FROM (
    SELECT lineno, {SERIES} AS series, {TAIL} AS tail
    FROM (SELECT lineno, line, length(regexp_extract(line, '{LABELS_END_RE}')) AS p FROM prom_repair))
GROUP BY series;
DROP TABLE prom_repair;
"""

LABEL_RE = r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"'
SERIES_RE = (
    r"([A-Za-z_:][A-Za-z0-9_:]*[ \t]*)?\{\s*(" + LABEL_RE + r"\s*(,\s*" + LABEL_RE + r"\s*)*,?\s*)?\}"
    r"|[A-Za-z_:][A-Za-z0-9_:]*"
)

# One row per distinct series text: label map, metric name (promtool dumps carry it as __name__).
DICT_SQL = """
CREATE OR REPLACE TEMP TABLE prom_dict AS
WITH d AS (SELECT DISTINCT series FROM prom_groups WHERE series <> '# EOF'),
p AS (
    SELECT series, regexp_full_match(series, $series_re) AS ok,
           regexp_extract(series, '\\{(.*)\\}$', 1) AS body
    FROM d
),
kv AS (
    SELECT series, ok,
           regexp_extract_all(body, $label_re, 1) AS k,
           list_transform(regexp_extract_all(body, $label_re, 2),
                          -- escapes in one pass: split at escaped backslashes, unescape the parts, join with one
                          lambda v: array_to_string(list_transform(string_split(v, '\\\\'),
                              lambda x: replace(replace(x, '\\"', '"'), '\\n', chr(10))), '\\')) AS v
    FROM p
)
SELECT (row_number() OVER (ORDER BY series))::INTEGER AS sid, series,
       ok AND len(list_distinct(k)) = len(k) AS ok,
       CASE WHEN ok AND len(list_distinct(k)) = len(k) THEN map(k, v) END AS labels
FROM kv
"""

SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE prom_series AS
SELECT sid, coalesce(nullif(rtrim(regexp_extract(series, '^[^{]+'), ' ' || chr(9)), ''), labels['__name__'])
    AS name, labels
FROM prom_dict WHERE ok
"""

# Per sample: value and timestamp tokens; an OpenMetrics exemplar ("# {...} v") is ignored. Only rejected
# rows keep their text, so the table stays narrow.
ROWS_SQL = f"""
CREATE OR REPLACE TEMP TABLE prom_rows AS
WITH u AS (
    SELECT d.sid, d.ok, g.series, ltrim(unnest(g.tails), ' ' || chr(9)) AS tail, unnest(g.linenos) AS lineno
    FROM prom_groups g JOIN prom_dict d USING (series)
),
t AS (
    SELECT *, CASE WHEN contains(tail, '  ') OR contains(tail, '\t')
                   THEN regexp_split_to_array(trim(tail, ' \t\r'), '[ \t]+')
                   ELSE string_split(rtrim(tail, ' \r'), ' ') END AS tok  -- trailing blanks are allowed
    FROM u
),
v AS (
    SELECT *, TRY_CAST(tok[1] AS DOUBLE) AS value, CASE WHEN tok[2] <> '#' THEN tok[2] END AS t FROM t
),
r AS (
    SELECT *,
           CASE WHEN NOT ok THEN 'malformed metric name or labels'
                WHEN tok[1] = '' THEN 'no value'
                WHEN value IS NULL THEN 'value is not a number'
                WHEN len(tok) > 2 AND tok[2] <> '#' AND tok[3] <> '#' THEN 'unexpected text after the timestamp'
           END AS reason
    FROM v
)
SELECT sid, lineno, value, coalesce(reason, CASE WHEN ts < {TS_MIN} OR ts > {TS_MAX} THEN '{OUT_OF_RANGE}' END)
           AS reason,
       untimed, ts,
       CASE WHEN reason IS NOT NULL OR (ts IS NULL AND t IS NOT NULL) OR ts < {TS_MIN} OR ts > {TS_MAX}
            THEN series || ' ' || tail END AS text
FROM (SELECT *, t IS NULL AS untimed, CASE WHEN t IS NOT NULL THEN make_timestamp({TS_MICROS}) END AS ts FROM r)
"""

TS_REJECT_SQL = "UPDATE prom_rows SET reason = 'bad timestamp' WHERE reason IS NULL AND ts IS NULL AND NOT untimed"
ROWS_SAMPLES_SQL = """
CREATE OR REPLACE TEMP VIEW prom_samples AS
SELECT sid, list(epoch_ms(ts) ORDER BY lineno) AS ms, list(value ORDER BY lineno) AS vals
FROM prom_rows WHERE reason IS NULL GROUP BY sid
"""
# Samples without a timestamp (a saved scrape): they get the file's time, and the report says so.
UNTIMED_SQL = "SELECT coalesce(sum(len(ms) - list_count(ms)), 0) FROM prom_samples"
IS_OPENMETRICS_SQL = "SELECT count(*) > 0 FROM prom_groups WHERE series = '# EOF'"
REJECT_COUNT_SQL = "SELECT count(*) FROM prom_rows WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT lineno, reason, text FROM prom_rows WHERE reason IS NOT NULL ORDER BY lineno LIMIT 20"
TEMP_TABLES = ("prom_rows", "prom_series", "prom_dict", "prom_groups", "prom_csv_rejects", "prom_csv_scans")


def drop_staged(conn: duckdb.DuckDBPyConnection) -> None:
    """The staging of either path (on failure the file's rollback drops it)."""
    drop_temp(conn, TEMP_TABLES, views=["prom_samples"])


def untimed_note(ctx: LoadContext) -> list[str]:
    """A note for the ingest report when samples had no timestamp and took the file's mtime."""
    n = scalar(ctx.conn, UNTIMED_SQL)
    if not n:
        return []
    years.record(ctx.conn, ctx.source_id, "mtime", ctx.mtime.year)  # no evidence for another file's year
    return [f"{n} samples carry no timestamp: stamped with the file's mtime {ctx.mtime:%Y-%m-%d %H:%M:%S} UTC"]


def parse_series(ctx: LoadContext) -> None:
    """prom_dict (every distinct series text, parsed) and prom_series (the well-formed ones)."""
    ctx.conn.execute(DICT_SQL, {"series_re": SERIES_RE, "label_re": LABEL_RE})
    ctx.conn.execute(SERIES_SQL)


def fast_path(ctx: LoadContext, compression: str, openmetrics: bool) -> bool:
    """Group and parse the file in one parallel pass; False (nothing kept) unless every line parsed."""
    conn = ctx.conn
    conn.execute(FAST_GROUP_SQL, {"path": str(ctx.path), "compression": compression, "seconds": openmetrics})
    parse_series(ctx)
    ok = scalar(conn, FAST_OK_SQL)
    if not ok:
        drop_staged(conn)
        return False
    conn.execute(FAST_SAMPLES_SQL)
    return True


def numbered_path(ctx: LoadContext) -> LoadResult:
    """Group ctx.line_batches() and check every sample; rejects carry their line numbers."""
    conn = ctx.conn
    conn.execute(CREATE_GROUPS_SQL)
    for batch in ctx.line_batches():
        prom_batch = batch  # noqa: F841 - DuckDB's replacement scan; not register (kept until COMMIT)
        conn.execute(BATCH_GROUP_SQL)
    conn.execute(REPAIR_SQL)
    parse_series(ctx)
    seconds = scalar(conn, IS_OPENMETRICS_SQL)
    conn.execute(ROWS_SQL, {"seconds": bool(seconds)})
    conn.execute(TS_REJECT_SQL)
    conn.execute(ROWS_SAMPLES_SQL)
    result = LoadResult()
    result.rejects_from(conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    return result
