"""Long-form metrics a site exports by hand: CSV or Parquet with columns timestamp,host,entity,metric,value.

    timestamp,host,entity,metric,value
    2026-11-29T14:02:11.123Z,gpu-017,mlx5_3,optics_rx_power_dbm,-7.9

timestamp: ISO-8601 (with Z or an offset; without one it is read in --timezone) or epoch seconds.
metric: a canonical name or a source name the catalog maps (DCGM_FI_DEV_GPU_TEMP...); others kept as-is.
Columns may come in any order; extra columns are ignored. Parquet rows are numbered from 1 as "lines".
A CSV that grows (an exporter appending) loads only its new lines, read with the header of line 1; a
Parquet file is written whole, so a changed one is read again whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.base import MAX_REJECT_SAMPLES, Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.formats.telemetry import prom_labels
from synestra_cli.store.sql import drop_temp

COLUMNS = ("timestamp", "host", "entity", "metric", "value")

CREATE_RAW_SQL = """
CREATE OR REPLACE TEMP TABLE mlong_raw (sid BIGINT, lineno BIGINT, nfields INTEGER, need INTEGER, ts_txt VARCHAR,
                                         host VARCHAR, entity VARCHAR, metric VARCHAR, value_txt VARCHAR)
"""

# One CSV line -> fields (RFC 4180 quoting: "a,b" and "" inside quotes), picked by header position
# (the same header for every file of the batch; `need`: the header's width).
CSV_BATCH_SQL = """
INSERT INTO mlong_raw (sid, lineno, nfields, need, ts_txt, host, entity, metric, value_txt)
SELECT sid, lineno, len(f), $need, f[$ts], f[$host], f[$entity], f[$metric], f[$value]
FROM (
    SELECT sid, lineno,
           CASE WHEN contains(line, '"')  -- quoting is rare: only such lines pay for the regex
                THEN list_transform(regexp_extract_all(line || ',', '("(?:[^"]|"")*"|[^,]*),', 1),
                                    lambda x: CASE WHEN starts_with(x, '"') THEN replace(x[2:-2], '""', '"')
                                                   ELSE x END)
                ELSE string_split(line, ',') END AS f
    FROM mlong_batch WHERE lineno > 1 AND trim(line) <> ''
)
"""

PARQUET_SQL = """
INSERT INTO mlong_raw (sid, lineno, nfields, need, ts_txt, host, entity, metric, value_txt)
SELECT $sid, file_row_number + 1, 5, 5, CAST("timestamp" AS VARCHAR), CAST(host AS VARCHAR), CAST(entity AS VARCHAR),
       CAST(metric AS VARCHAR), CAST("value" AS VARCHAR)
FROM read_parquet($path, file_row_number = true)
"""

# Zoned ISO-8601 -> UTC; zone-less -> read in $tz; a bare number -> epoch seconds. Most exporters write
# `...T...Z`: strptime reads those at a quarter of the cost of the two tests and the zoned cast after them.
ROWS_SQL = """
CREATE OR REPLACE TEMP TABLE mlong_rows AS
WITH p AS (
    SELECT *, trim(ts_txt) AS t, TRY_CAST(trim(value_txt) AS DOUBLE) AS value FROM mlong_raw
),
q AS (
    SELECT *,
           CASE WHEN ends_with(t, 'Z')
                    THEN coalesce(try_strptime(t, '%Y-%m-%dT%H:%M:%S.%fZ'),
                                  timezone('UTC', TRY_CAST(leap_second(t) AS TIMESTAMPTZ)))
                WHEN regexp_full_match(t, '-?[0-9]+(\\.[0-9]*)?')
                    THEN CASE WHEN abs(CAST(t AS DOUBLE)) < 1e11
                              THEN make_timestamp(CAST(round(CAST(t AS DOUBLE) * 1e6) AS BIGINT)) END
                WHEN regexp_matches(t, '(Z|[+-][0-9]{2}(:?[0-9]{2})?)$')
                    THEN timezone('UTC', TRY_CAST(leap_second(t) AS TIMESTAMPTZ))
                ELSE to_utc(TRY_CAST(leap_second(t) AS TIMESTAMP), $tz)
           END AS ts
    FROM p
)
SELECT sid, lineno, ts, coalesce(nullif(trim(host), ''), $host) AS host, nullif(trim(entity), '') AS entity,
       coalesce(m.metric, trim(q.metric)) AS metric, value * coalesce(m.scale, 1.0) AS value,
       CASE WHEN nfields < need THEN 'expected ' || need || ' fields, found ' || nfields
            WHEN ts IS NULL THEN 'bad timestamp (ISO-8601 or epoch seconds)'
            WHEN coalesce(trim(q.metric), '') = '' THEN 'no metric name'
            WHEN value IS NULL THEN 'value is not a number'
       END AS reason
FROM q LEFT JOIN prom_source_map m ON m.source = trim(q.metric)
"""

INSERT_SQL = """
INSERT INTO metrics (ts, host, entity, metric, value, source_id)
SELECT ts, host, entity, metric, value, sid FROM mlong_rows WHERE reason IS NULL
ORDER BY sid, host, entity, metric, ts, lineno
"""
CATALOG_SQL = """
INSERT INTO metric_catalog (metric, unit, kind, description)
SELECT metric, unit, kind, description FROM prom_catalog
WHERE metric IN (SELECT metric FROM mlong_rows WHERE reason IS NULL)
ON CONFLICT DO NOTHING
"""
COUNTS_SQL = """
SELECT sid, count(*) FILTER (WHERE reason IS NULL), count(*) FILTER (WHERE reason IS NOT NULL)
FROM mlong_rows GROUP BY sid
"""
# The rejected line's text from its fields (only for the samples: not kept on every row).
REJECT_SAMPLES_SQL = f"""
SELECT sid, lineno, w.reason, concat_ws(',', r.ts_txt, r.host, r.entity, r.metric, r.value_txt)
FROM mlong_rows w JOIN mlong_raw r USING (sid, lineno) WHERE w.reason IS NOT NULL
QUALIFY row_number() OVER (PARTITION BY sid ORDER BY lineno) <= {MAX_REJECT_SAMPLES}
ORDER BY sid, lineno
"""
GROUP_FILE_BYTES = 4 << 20  # files at most this big (on disk) are staged together: one statement per header

_SPLIT = re.compile(r"\s*,\s*")


def _header(first_line: str) -> list[str]:
    return [c.strip('"').lower() for c in _SPLIT.split(first_line.lstrip("\ufeff").strip())]


def sniff(head: str) -> float:
    """Parquet magic, or a CSV header naming the five columns."""
    if head.startswith("PAR1"):
        return 0.9
    first = head.split("\n", 1)[0]
    return 0.95 if set(COLUMNS) <= set(_header(first)) else 0.0


def appendable(path: Path) -> bool:
    """A CSV grows by lines; a Parquet file does not (its footer is rewritten)."""
    return read_head(path, 4) != b"PAR1"


def load(ctx: LoadContext) -> LoadResult:
    return load_group([ctx])[0]


def load_group(ctxs: list[LoadContext]) -> list[LoadResult]:
    """load() of several files: every step one statement over all of them (rows keyed by source), the
    CSV lines of the small files with the same header staged at once."""
    conn = ctxs[0].conn
    conn.execute(CREATE_RAW_SQL)
    together: dict[tuple[int, ...], list[pa.Table]] = {}
    for ctx in ctxs:
        if read_head(ctx.path, 4) == b"PAR1":
            conn.execute(PARQUET_SQL, {"path": str(ctx.path), "sid": ctx.source_id})
        elif ctx.path.stat().st_size > GROUP_FILE_BYTES:
            for positions, batch in _csv_batches(ctx):
                _stage_csv(conn, positions, [batch])
        else:
            for positions, batch in _csv_batches(ctx):
                together.setdefault(positions, []).append(batch)
    for positions, batches in together.items():
        _stage_csv(conn, positions, batches)
    prom_labels.create_lookups(conn)
    # the options every file's parser reads (ingest keys each source on them): one run's, the same for all
    tz = [ctx.options.timezone for ctx in ctxs][0]
    host = [ctx.options.host for ctx in ctxs][0]
    conn.execute(ROWS_SQL, {"tz": tz, "host": host})
    results = {ctx.source_id: LoadResult() for ctx in ctxs}
    for sid, line, reason, text in conn.execute(REJECT_SAMPLES_SQL).fetchall():
        results[sid].reject(line, reason, text)
    for sid, rows, rejected in conn.execute(COUNTS_SQL).fetchall():
        results[sid].rows = rows
        results[sid].rejected += rejected - len(results[sid].reject_samples)
    conn.execute(INSERT_SQL)
    conn.execute(CATALOG_SQL)
    drop_temp(conn, ("mlong_rows", "mlong_raw", *prom_labels.LOOKUP_TABLES))
    return [results[ctx.source_id] for ctx in ctxs]


def _csv_batches(ctx: LoadContext) -> Iterator[tuple[tuple[int, ...], pa.Table]]:
    """The file's line batches, each row with its source (sid), with the header's positions of COLUMNS
    and its width (what a line must have)."""
    key: tuple[int, ...] | None = None
    # the new lines of a grown file: its header is still line 1
    header = _header(decode(read_head(ctx.path)).split("\n", 1)[0]) if ctx.offset else None
    for batch in ctx.line_batches():
        if key is None:
            header = header or _header(batch.column("line")[0].as_py())
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise InputError(f"{ctx.display}:1: long metrics CSV header lacks {', '.join(missing)}")
            key = (*(header.index(c) + 1 for c in COLUMNS), len(header))
        yield key, batch.append_column("sid", pa.array(np.full(batch.num_rows, ctx.source_id, dtype=np.int64)))


def _stage_csv(conn: duckdb.DuckDBPyConnection, key: tuple[int, ...], batches: list[pa.Table]) -> None:
    """Stage the data lines' fields of line batches read with the same header."""
    *positions, need = key
    mlong_batch = pa.concat_tables(batches)  # noqa: F841 - DuckDB's replacement scan; not register (kept until COMMIT)
    params = {"ts": positions[0], **dict(zip(COLUMNS[1:], positions[1:], strict=True)), "need": need}
    conn.execute(CSV_BATCH_SQL, params)


FORMAT = Format(
    "metrics_long",
    "long-form metrics CSV or Parquet: timestamp,host,entity,metric,value",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    load_group=load_group,
    top=0.95,
    appendable=appendable,
    priority=10,
)
