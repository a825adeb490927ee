"""Prometheus HTTP API answers saved as JSON: `/api/v1/query_range` (matrix) and `/api/v1/query` (vector).

    {"status":"success","data":{"resultType":"matrix","result":[{"metric":{...},"values":[[1435781430.781,"1"],...]}]}}

Timestamps are float epoch seconds; values are strings (so that NaN and +Inf survive). Each result is one
series: its labels go through the same mapping as scraped text (prom_labels.py). A big job's answer is
hundreds of MB: it is read as a stream (prom_json_stream.py), its result array a batch of whole results at
a time, each batch parsed by DuckDB and written before the next is read, so memory is one batch's.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb

from synestra_cli.errors import InputError, raise_if_stopped
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import open_binary
from synestra_cli.formats.telemetry import prom_labels
from synestra_cli.formats.telemetry.prom_json_stream import answer_batches
from synestra_cli.store.session import SESSION_SQL
from synestra_cli.store.sql import drop_temp, quote_ident, scalar

# A batch of results (a JSON array's text) and the first sid it numbers its results from.
VALID_SQL = "SELECT json_valid($text)"
BATCH_BYTES = 4 << 20  # the text of one batch (~10^5 samples per MB): DuckDB holds ~10x a batch while parsing it

# One row per result (series), read into typed lists by one json_transform (casting each result and
# pair to JSON[] and extracting its fields one by one cost ~10x: 6 s for 76,800 pairs); then one row
# per [ts, "value"] pair: a vector result has a single "value".
RESULT_SHAPE = '[{"metric": "MAP(VARCHAR, VARCHAR)", "values": [["VARCHAR"]], "value": ["VARCHAR"]}]'
PAIRS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_json_results AS
SELECT (row_number() OVER () + $base)::INTEGER AS sid, r.metric AS labels,
       coalesce(r."values", [r."value"]) AS pairs
FROM (SELECT unnest(json_transform(CAST($text AS JSON), $shape)) AS r)
"""
PAIRS_OF_RESULTS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_json_pairs AS
SELECT sid, labels IS NULL OR labels['__name__'] IS NULL AS nameless, unnest(pairs) AS pair FROM prom_json_results
"""

SERIES_SQL = """
CREATE OR REPLACE TEMP TABLE prom_series AS
SELECT sid, labels['__name__'] AS name, labels FROM prom_json_results WHERE labels IS NOT NULL
"""

ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_json_rows AS
SELECT sid, epoch_s, value,
       CASE WHEN nameless THEN 'result without a metric name'
            WHEN value IS NULL THEN 'value is not a number'
            WHEN epoch_s IS NULL OR abs(epoch_s) >= 1e11 THEN 'bad timestamp'
       END AS reason,
       CAST(pair AS VARCHAR) AS text
FROM (SELECT sid, nameless, pair, TRY_CAST(pair[1] AS DOUBLE) AS epoch_s, TRY_CAST(pair[2] AS DOUBLE) AS value
      FROM prom_json_pairs)
"""

SAMPLES_SQL = """
CREATE OR REPLACE TEMP VIEW prom_samples AS
SELECT sid, list(CAST(round(epoch_s * 1000) AS BIGINT) ORDER BY epoch_s) AS ms, list(value ORDER BY epoch_s) AS vals
FROM prom_json_rows WHERE reason IS NULL GROUP BY sid
"""
REJECT_COUNT_SQL = "SELECT count(*) FROM prom_json_rows WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT NULL, reason, text FROM prom_json_rows WHERE reason IS NOT NULL ORDER BY sid LIMIT 20"
TEMP_TABLES = ("prom_json_rows", "prom_series", "prom_json_pairs", "prom_json_results")

_RESULT_TYPE = re.compile(r'"(resultType|errorType)"\s*:\s*"')
_STATUS = re.compile(r'"status"\s*:\s*"')


def sniff(head: str) -> float:
    """A JSON object with "status" and "data"."resultType" (or "errorType"), as the API returns it."""
    text = head.lstrip()
    if text.startswith("{") and _RESULT_TYPE.search(text) and _STATUS.search(text):
        return 0.9
    return 0.0


def load(ctx: LoadContext) -> LoadResult:
    conn, result = ctx.conn, LoadResult()
    work = _scratch(conn)
    try:
        prom_labels.begin_series(work, ctx.source_id, ctx.evidence)
        base = 0
        with open_binary(ctx.path) as f:
            limit = None if ctx.end is None else ctx.end - ctx.offset
            f.seek(ctx.offset)
            stream, batches = answer_batches(f, BATCH_BYTES, lambda text: _valid(work, text), ctx.display, limit)
            for batch in batches:
                raise_if_stopped()  # a stop interrupts the file's cursor, not this scratch one: check per batch
                base = _parse(work, batch, base)
                result.rejects_from(work, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
                result.rows += prom_labels.write_batch(conn, ctx.source_id, ctx.fallback_host, ctx.mtime, work)
                drop_temp(work, TEMP_TABLES, views=["prom_samples"])
        _check(ctx.display, stream.members)
        if stream.not_series:
            raise InputError(f"{ctx.display}: {stream.not_series} result(s) of the answer are not series objects")
        prom_labels.finish_series(conn, ctx.source_id, result.notes, ctx.evidence, work)
    finally:
        work.close()  # its temp tables go with it
    return result


def _scratch(conn: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A connection of its own for the batches' tables (same database, autocommit, the file's catalog as its
    default): what a batch replaces is freed at once, where the file's transaction would keep every batch's
    tables until COMMIT (memory growing with the file: ~200 bytes a sample)."""
    work = conn.cursor()
    for sql in SESSION_SQL:
        work.execute(sql)
    work.execute(f"USE {quote_ident(str(scalar(conn, 'SELECT current_database()')))}")
    return work


def _parse(work: duckdb.DuckDBPyConnection, batch: bytes, base: int) -> int:
    """One batch's results into prom_series / prom_samples (and its rejects), numbered from `base` + 1;
    returns the next number."""
    work.execute(PAIRS_SQL, {"text": batch.decode("utf-8", errors="replace"), "shape": RESULT_SHAPE, "base": base})
    base += int(scalar(work, "SELECT count(*) FROM prom_json_results"))
    for sql in (PAIRS_OF_RESULTS_SQL, SERIES_SQL, ROWS_SQL, SAMPLES_SQL):
        work.execute(sql)
    return base


def _valid(conn: duckdb.DuckDBPyConnection, text: bytes) -> bool:
    return bool(scalar(conn, VALID_SQL, {"text": text.decode("utf-8", errors="replace")}))


def _check(display: str, members: dict[str, Any]) -> None:
    """A successful answer of series: status success, resultType matrix or vector (read after the results
    when the dump sorted its keys: the file's rows are then rolled back with it)."""
    status, error = members.get("status"), members.get("error")
    if status != "success":
        raise InputError(
            f"{display}: not a successful Prometheus API answer "
            f"(status {status or 'missing or not JSON'}{': ' + str(error) if error else ''})"
        )
    result_type = members.get("resultType")
    if result_type not in ("matrix", "vector"):
        raise InputError(f"{display}: resultType {result_type!r} carries no series (need matrix or vector)")


FORMAT = Format(
    "prom_api_json",
    "Prometheus HTTP API query / query_range JSON answers (matrix, vector)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog", "gpus", "host_names"}),
    top=0.9,
    leans_on_others=prom_labels.may_lack_a_host,
    priority=20,
)
