"""Prometheus HTTP API answers saved as JSON: `/api/v1/query_range` (matrix) and `/api/v1/query` (vector).

    {"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},"values":[[1435781430.781,"1"],...]}]}}

Timestamps are float epoch seconds; values are strings (so that NaN and +Inf survive). Each result is one
series: its labels go through the same mapping as scraped text (prom_labels.py).
"""

from __future__ import annotations

import re

from synestra_cli.errors import InputError
from synestra_cli.formats import prom_labels
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.store.sql import drop_temp, one_row

HEADER_SQL = """
SELECT j->>'status', j->'data'->>'resultType', j->>'error'
FROM (SELECT TRY_CAST($text AS JSON) AS j)
"""

# One row per result (series), then one per [ts, "value"] pair: a vector result has a single "value".
PAIRS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_json_pairs AS
WITH r AS (
    SELECT (row_number() OVER ())::INTEGER AS sid, res
    FROM (SELECT unnest(CAST(j->'data'->'result' AS JSON[])) AS res FROM (SELECT CAST($text AS JSON) AS j))
)
SELECT sid, TRY_CAST(res->'metric' AS MAP(VARCHAR, VARCHAR)) AS labels,
       unnest(CASE WHEN (res->'values') IS NOT NULL THEN CAST(res->'values' AS JSON[]) ELSE [res->'value'] END)
           AS pair
FROM r
"""

SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE prom_series AS
SELECT DISTINCT sid, labels['__name__'] AS name, labels FROM prom_json_pairs WHERE labels IS NOT NULL
"""

ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_json_rows AS
SELECT sid, epoch_s, value,
       CASE WHEN labels IS NULL OR labels['__name__'] IS NULL THEN 'result without a metric name'
            WHEN value IS NULL THEN 'value is not a number'
            WHEN epoch_s IS NULL OR abs(epoch_s) >= 1e11 THEN 'bad timestamp'
       END AS reason,
       CAST(pair AS VARCHAR) AS text
FROM (SELECT sid, labels, pair, TRY_CAST(pair->>0 AS DOUBLE) AS epoch_s, TRY_CAST(pair->>1 AS DOUBLE) AS value
      FROM prom_json_pairs)
"""

SAMPLES_SQL = """
CREATE OR REPLACE TEMP VIEW prom_samples AS
SELECT sid, list(CAST(round(epoch_s * 1000) AS BIGINT) ORDER BY epoch_s) AS ms, list(value ORDER BY epoch_s) AS vals
FROM prom_json_rows WHERE reason IS NULL GROUP BY sid
"""
REJECT_COUNT_SQL = "SELECT count(*) FROM prom_json_rows WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT NULL, reason, text FROM prom_json_rows WHERE reason IS NOT NULL ORDER BY sid LIMIT 20"
TEMP_TABLES = ("prom_json_rows", "prom_series", "prom_json_pairs")

_RESULT_TYPE = re.compile(r'"(resultType|errorType)"\s*:\s*"')
_STATUS = re.compile(r'"status"\s*:\s*"')


def sniff(head: str) -> float:
    """A JSON object with "status" and "data"."resultType" (or "errorType"), as the API returns it."""
    text = head.lstrip()
    if text.startswith("{") and _RESULT_TYPE.search(text) and _STATUS.search(text):
        return 0.9
    return 0.0


def load(ctx: LoadContext) -> LoadResult:
    conn, text = ctx.conn, ctx.read_text()
    status, result_type, error = one_row(conn, HEADER_SQL, {"text": text})
    if status != "success":
        raise InputError(
            f"{ctx.display}: not a successful Prometheus API answer "
            f"(status {status or 'missing or not JSON'}{': ' + error if error else ''})"
        )
    if result_type not in ("matrix", "vector"):
        raise InputError(f"{ctx.display}: resultType {result_type!r} carries no series (need matrix or vector)")
    conn.execute(PAIRS_SQL, {"text": text})
    for sql in (SERIES_SQL, ROWS_SQL, SAMPLES_SQL):
        conn.execute(sql)
    result = LoadResult()
    result.rejects_from(conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    result.rows = prom_labels.write_series(conn, ctx.source_id, ctx.options.host, ctx.mtime, result.notes, ctx.evidence)
    drop_temp(conn, TEMP_TABLES, views=["prom_samples"])
    return result


FORMAT = Format(
    "prom_api_json",
    "Prometheus HTTP API query / query_range JSON answers (matrix, vector)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog", "gpus", "host_names"}),
    top=0.9,
)
