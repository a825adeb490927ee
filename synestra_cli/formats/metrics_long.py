"""Long-form metrics a site exports by hand: CSV or Parquet with columns timestamp,host,entity,metric,value.

    timestamp,host,entity,metric,value
    2026-11-29T14:02:11.123Z,gpu-017,mlx5_3,optics_rx_power_dbm,-7.9

timestamp: ISO-8601 (with Z or an offset; without one it is read in --timezone) or epoch seconds.
metric: a canonical name or a source name the catalog maps (DCGM_FI_DEV_GPU_TEMP...); others kept as-is.
Columns may come in any order; extra columns are ignored. Parquet rows are numbered from 1 as "lines".
"""

from __future__ import annotations

import re

from synestra_cli.errors import InputError
from synestra_cli.formats import prom_labels
from synestra_cli.formats.base import Format, LoadContext, LoadResult, read_head
from synestra_cli.store.sql import drop_temp, scalar

COLUMNS = ("timestamp", "host", "entity", "metric", "value")

CREATE_RAW_SQL = """
CREATE OR REPLACE TEMP TABLE mlong_raw
    (lineno BIGINT, nfields INTEGER, ts_txt VARCHAR, host VARCHAR, entity VARCHAR, metric VARCHAR, value_txt VARCHAR)
"""

# One CSV line -> fields (RFC 4180 quoting: "a,b" and "" inside quotes), picked by header position.
CSV_BATCH_SQL = """
INSERT INTO mlong_raw (lineno, nfields, ts_txt, host, entity, metric, value_txt)
SELECT lineno, len(f), f[$ts], f[$host], f[$entity], f[$metric], f[$value]
FROM (
    SELECT lineno,
           CASE WHEN contains(line, '"')  -- quoting is rare: only such lines pay for the regex
                THEN list_transform(regexp_extract_all(line || ',', '("(?:[^"]|"")*"|[^,]*),', 1),
                                    lambda x: CASE WHEN starts_with(x, '"') THEN replace(x[2:-2], '""', '"')
                                                   ELSE x END)
                ELSE string_split(line, ',') END AS f
    FROM mlong_batch WHERE lineno > 1 AND trim(line) <> ''
)
"""

PARQUET_SQL = """
INSERT INTO mlong_raw (lineno, nfields, ts_txt, host, entity, metric, value_txt)
SELECT file_row_number + 1, 5, CAST("timestamp" AS VARCHAR), CAST(host AS VARCHAR), CAST(entity AS VARCHAR),
       CAST(metric AS VARCHAR), CAST("value" AS VARCHAR)
FROM read_parquet($path, file_row_number = true)
"""

# Zoned ISO-8601 -> UTC; zone-less -> read in $tz; a bare number -> epoch seconds.
ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE mlong_rows AS
WITH p AS (
    SELECT *, trim(ts_txt) AS t, TRY_CAST(trim(value_txt) AS DOUBLE) AS value FROM mlong_raw
),
q AS (
    SELECT *,
           CASE WHEN regexp_full_match(t, '-?[0-9]+(\\.[0-9]*)?')
                    THEN CASE WHEN abs(CAST(t AS DOUBLE)) < 1e11
                              THEN make_timestamp(CAST(round(CAST(t AS DOUBLE) * 1e6) AS BIGINT)) END
                WHEN regexp_matches(t, '(Z|[+-][0-9]{2}(:?[0-9]{2})?)$')
                    THEN timezone('UTC', TRY_CAST(t AS TIMESTAMPTZ))
                ELSE to_utc(TRY_CAST(t AS TIMESTAMP), $tz)
           END AS ts
    FROM p
)
SELECT lineno, ts, coalesce(nullif(trim(host), ''), $host) AS host, nullif(trim(entity), '') AS entity,
       coalesce(m.metric, trim(q.metric)) AS metric, value * coalesce(m.scale, 1.0) AS value,
       CASE WHEN nfields < $nfields THEN 'expected ' || $nfields || ' fields, found ' || nfields
            WHEN ts IS NULL THEN 'bad timestamp (ISO-8601 or epoch seconds)'
            WHEN coalesce(trim(q.metric), '') = '' THEN 'no metric name'
            WHEN value IS NULL THEN 'value is not a number'
       END AS reason,
       concat_ws(',', ts_txt, q.host, entity, q.metric, value_txt) AS text
FROM q LEFT JOIN prom_source_map m ON m.source = trim(q.metric)
"""

INSERT_SQL = """
INSERT INTO metrics (ts, host, entity, metric, value, source_id)
SELECT ts, host, entity, metric, value, $sid FROM mlong_rows WHERE reason IS NULL
ORDER BY host, entity, metric, ts
"""
CATALOG_SQL = """
INSERT INTO metric_catalog (metric, unit, kind, description)
SELECT metric, unit, kind, description FROM prom_catalog
WHERE metric IN (SELECT metric FROM mlong_rows WHERE reason IS NULL)
ON CONFLICT DO NOTHING
"""
REJECT_COUNT_SQL = "SELECT count(*) FROM mlong_rows WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT lineno, reason, text FROM mlong_rows WHERE reason IS NOT NULL ORDER BY lineno LIMIT 20"

_SPLIT = re.compile(r"\s*,\s*")


def _header(first_line: str) -> list[str]:
    return [c.strip('"').lower() for c in _SPLIT.split(first_line.lstrip("\ufeff").strip())]


def sniff(head: str) -> float:
    """Parquet magic, or a CSV header naming the five columns."""
    if head.startswith("PAR1"):
        return 0.9
    first = head.split("\n", 1)[0]
    return 0.95 if set(COLUMNS) <= set(_header(first)) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    conn = ctx.conn
    conn.execute(CREATE_RAW_SQL)
    if read_head(ctx.path, 4) == b"PAR1":
        conn.execute(PARQUET_SQL, {"path": str(ctx.path)})
        nfields = len(COLUMNS)
    else:
        nfields = _load_csv(ctx)
    prom_labels.create_lookups(conn)
    conn.execute(ROWS_SQL, {"tz": ctx.options.timezone, "host": ctx.options.host, "nfields": nfields})
    result = LoadResult()
    result.rejects_from(conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    result.rows = scalar(conn, INSERT_SQL, {"sid": ctx.source_id})
    conn.execute(CATALOG_SQL)
    drop_temp(conn, ("mlong_rows", "mlong_raw", *prom_labels.LOOKUP_TABLES))
    return result


def _load_csv(ctx: LoadContext) -> int:
    """Stage every data line's fields; returns how many fields a line must have."""
    header: list[str] | None = None
    for batch in ctx.line_batches():
        if header is None:
            header = _header(batch.column("line")[0].as_py())
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise InputError(f"{ctx.display}:1: long metrics CSV header lacks {', '.join(missing)}")
        positions = {c: header.index(c) + 1 for c in COLUMNS}
        mlong_batch = batch  # noqa: F841 - DuckDB's replacement scan; not register (kept until COMMIT)
        ctx.conn.execute(CSV_BATCH_SQL, {"ts": positions["timestamp"], **{c: positions[c] for c in COLUMNS[1:]}})
    return len(header or COLUMNS)


FORMAT = Format(
    "metrics_long",
    "long-form metrics CSV or Parquet: timestamp,host,entity,metric,value",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
)
