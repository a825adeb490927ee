"""Prometheus text: exposition (scraped, with or without ms timestamps), `promtool tsdb dump` (ms) and
`promtool tsdb dump-openmetrics` (seconds, ends with `# EOF`).

Series repeat: a 1M-sample file holds a few thousand distinct label sets. So each line is only cut in
two with plain string functions (series text | "value [timestamp]") and grouped by series text; labels
are parsed, mapped and resolved once per distinct series (prom_labels.py). The file is read by DuckDB's
own CSV reader (one VARCHAR column) when it can; lines that fail to parse are then located by a second
pass over ``ctx.line_batches()``, which carries line numbers (also the path when DuckDB cannot read it).
"""

from __future__ import annotations

import re

import duckdb

from synestra_cli.formats import prom_labels
from synestra_cli.formats.base import LoadContext, LoadResult, read_head

NAME = "prometheus"
DESCRIPTION = "Prometheus exposition text (dcgm-exporter, node_exporter, snmp_exporter), promtool tsdb dumps"

# Cut position: the first "} " after labels, else the first space after a bare metric name.
SPLIT = "CASE WHEN strpos(line, '{') > 0 THEN strpos(line, '} ') ELSE strpos(line, ' ') - 1 END"
DATA_LINE = "(NOT starts_with(line, '#') OR line = '# EOF') AND trim(line) <> ''"
SERIES = "CASE WHEN p <= 0 OR line = '# EOF' THEN line ELSE substr(line, 1, p) END"
TAIL = "CASE WHEN p <= 0 THEN '' ELSE substr(line, p + 2) END"

CREATE_GROUPS_SQL = "CREATE OR REPLACE TEMP TABLE prom_groups (series VARCHAR, tails VARCHAR[], linenos BIGINT[])"

# Whole file through DuckDB's reader: delimiter \x01 (never in text exports), no quoting.
FILE_GROUP_SQL = f"""
SELECT series, list(tail) AS tails, NULL::BIGINT[] AS linenos FROM (
    SELECT {SERIES} AS series, {TAIL} AS tail
    FROM (SELECT line, {SPLIT} AS p
          FROM read_csv($path, columns = {{'line': 'VARCHAR'}}, delim = '\x01', quote = '', escape = '',
                        header = false, auto_detect = false, compression = $compression)
          WHERE {DATA_LINE}))
GROUP BY series
"""

BATCH_GROUP_SQL = f"""
INSERT INTO prom_groups
SELECT series, list(tail ORDER BY lineno), list(lineno ORDER BY lineno) FROM (
    SELECT lineno, {SERIES} AS series, {TAIL} AS tail
    FROM (SELECT lineno, line, {SPLIT} AS p FROM prom_batch WHERE {DATA_LINE}))
GROUP BY series
"""

LABEL_RE = r'([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"'
SERIES_RE = (r'([A-Za-z_:][A-Za-z0-9_:]*)?\{\s*(' + LABEL_RE + r'\s*(,\s*' + LABEL_RE + r'\s*)*,?\s*)?\}'
             r'|[A-Za-z_:][A-Za-z0-9_:]*')

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
                          lambda v: replace(replace(replace(v, '\\\\', '\\'), '\\"', '"'), '\\n', chr(10))) AS v
    FROM p
)
SELECT (row_number() OVER (ORDER BY series))::INTEGER AS sid, series,
       ok AND len(list_distinct(k)) = len(k) AS ok,
       CASE WHEN ok AND len(list_distinct(k)) = len(k) THEN map(k, v) END AS labels
FROM kv
"""

SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE prom_series AS
SELECT sid, coalesce(nullif(regexp_extract(series, '^[^{]+'), ''), labels['__name__']) AS name, labels
FROM prom_dict WHERE ok
"""

# Per sample: value and timestamp tokens, an optional OpenMetrics exemplar ("# {...} v") ignored.
ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_rows AS
WITH u AS (
    SELECT d.sid, d.ok, g.series, unnest(g.tails) AS tail, unnest(g.linenos) AS lineno
    FROM prom_groups g JOIN prom_dict d USING (series)
),
t AS (
    SELECT *, list_filter(string_split(trim(tail, ' \t\r'), ' '), lambda x: x <> '') AS tok FROM u
),
v AS (
    SELECT sid, ok, series, tail, lineno, tok,
           TRY_CAST(tok[1] AS DOUBLE) AS value,
           CASE WHEN len(tok) >= 2 AND tok[2] <> '#' THEN tok[2] END AS t_txt
    FROM t
)
SELECT sid, lineno, value,
       CASE WHEN t_txt IS NULL THEN $mtime
            WHEN $seconds OR t_txt LIKE '%.%' OR t_txt LIKE '%e%'
                THEN CASE WHEN abs(TRY_CAST(t_txt AS DOUBLE)) < 1e11
                          THEN make_timestamp(CAST(round(TRY_CAST(t_txt AS DOUBLE) * 1e6) AS BIGINT)) END
            WHEN abs(TRY_CAST(t_txt AS BIGINT)) < 100000000000000 THEN make_timestamp(TRY_CAST(t_txt AS BIGINT) * 1000)
       END AS ts,
       CASE WHEN NOT ok THEN 'malformed metric name or labels'
            WHEN len(tok) = 0 THEN 'no value'
            WHEN value IS NULL THEN 'value is not a number'
            WHEN len(tok) > 2 AND tok[2] <> '#' AND tok[3] <> '#' THEN 'unexpected text after the timestamp'
       END AS reason,
       series, tail
FROM v
"""

TS_REJECT_SQL = "UPDATE prom_rows SET reason = 'bad timestamp' WHERE reason IS NULL AND ts IS NULL"
SAMPLES_VIEW_SQL = """
CREATE OR REPLACE TEMP VIEW prom_samples AS SELECT sid, ts, value FROM prom_rows WHERE reason IS NULL
"""
IS_OPENMETRICS_SQL = "SELECT count(*) > 0 FROM prom_groups WHERE series = '# EOF'"
REJECT_COUNT_SQL = "SELECT count(*) FROM prom_rows WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = """
SELECT lineno, reason, series || ' ' || tail FROM prom_rows WHERE reason IS NOT NULL ORDER BY lineno LIMIT 20
"""
CLEANUP_SQL = """
DROP VIEW IF EXISTS prom_samples; DROP TABLE IF EXISTS prom_rows; DROP TABLE IF EXISTS prom_series;
DROP TABLE IF EXISTS prom_dict; DROP TABLE IF EXISTS prom_groups;
"""

_SAMPLE = re.compile(r'^(?:[A-Za-z_:][\w:]*)?(?:\{.*\})?[ \t]+(\S+)(?:[ \t]+-?\d+(?:\.\d+)?)?[ \t]*$')
_FOREIGN = re.compile(r"^\s|^\{(?!__name__)")


def sniff(head: str) -> float:
    """Exposition/OpenMetrics: HELP/TYPE comments or `name{labels} value [ts]` lines; dumps: `{__name__=...}`."""
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    data = [ln for ln in lines if not ln.startswith("#")]
    good = sum(1 for ln in data if not _FOREIGN.match(ln) and _is_sample(ln))
    if not good:
        return 0.0
    if any(ln.startswith(("# HELP ", "# TYPE ", "# EOF")) for ln in lines) and good >= 0.5 * len(data):
        return 0.9
    return 0.85 if good >= 0.8 * len(data) else 0.0


def _is_sample(line: str) -> bool:
    m = _SAMPLE.match(line)
    if not m:
        return False
    try:
        float(m.group(1))
    except ValueError:
        return False
    return True


def load(ctx: LoadContext) -> LoadResult:
    conn = ctx.conn
    try:
        numbered = not _group_file(ctx)
        if numbered:
            _group_batches(ctx)
        result = _parse(ctx)
        if result.rejected and not numbered:
            # DuckDB's reader gives no line numbers: find the rejected lines again in a numbered pass.
            conn.execute(CLEANUP_SQL)
            _group_batches(ctx)
            result = _parse(ctx)
        result.rows = prom_labels.write_series(conn, ctx.source_id, ctx.options.host)
        return result
    finally:
        conn.execute(CLEANUP_SQL)


def _group_file(ctx: LoadContext) -> bool:
    """Group the whole file with DuckDB's reader; False when it cannot read it (invalid UTF-8, \\x01...).

    It runs on a cursor (its own connection) because a failed statement would abort the file's transaction.
    """
    gz = read_head(ctx.path, 2) == b"\x1f\x8b"
    cursor = ctx.conn.cursor()
    try:
        groups = cursor.sql(FILE_GROUP_SQL, params={"path": str(ctx.path), "compression": "gzip" if gz else "none"})
        table = groups.to_arrow_table()
    except duckdb.Error:
        return False
    finally:
        cursor.close()
    ctx.conn.execute(CREATE_GROUPS_SQL)
    ctx.conn.register("prom_file_groups", table)
    try:
        ctx.conn.execute("INSERT INTO prom_groups SELECT * FROM prom_file_groups")
    finally:
        ctx.conn.unregister("prom_file_groups")
    return True


def _group_batches(ctx: LoadContext) -> None:
    ctx.conn.execute(CREATE_GROUPS_SQL)
    for batch in ctx.line_batches():
        ctx.conn.register("prom_batch", batch)
        try:
            ctx.conn.execute(BATCH_GROUP_SQL)
        finally:
            ctx.conn.unregister("prom_batch")


def _parse(ctx: LoadContext) -> LoadResult:
    """Series dictionary, then every sample checked; prom_series and prom_samples are left for writing."""
    conn = ctx.conn
    conn.execute(DICT_SQL, {"series_re": SERIES_RE, "label_re": LABEL_RE})
    conn.execute(SERIES_SQL)
    (seconds,) = conn.execute(IS_OPENMETRICS_SQL).fetchone()
    conn.execute(ROWS_SQL, {"mtime": ctx.mtime, "seconds": bool(seconds)})
    conn.execute(TS_REJECT_SQL)
    conn.execute(SAMPLES_VIEW_SQL)
    result = LoadResult()
    (rejected,) = conn.execute(REJECT_COUNT_SQL).fetchone()
    for line, reason, text in conn.execute(REJECT_SAMPLES_SQL).fetchall():
        result.reject(line, reason, text)
    result.rejected = int(rejected)
    return result
