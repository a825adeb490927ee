"""The series layout (migration 023, issue 32): a dictionary of series and samples kept in series order.

A series is one host's entity's metric (`series`: host, entity, metric -> an integer `series_id`; an
entity already carries the labels that tell two series of one metric apart: formats/telemetry/prom_labels.py).
Every sample row in `metrics` carries its series' id, and each committed batch is appended ordered by
(series_id, ts). So a series' samples of a batch are one run of rows, and a reader that knows which
series it wants joins on one integer: DuckDB pushes the join's keys into the scan (an IN list for a
few, a filter by hash for many) and skips the row groups and rows of other series, where a join on
three strings read and compared every row of the candidates' metrics (docs/performance.md, "Series
layout").

Ids are dense, given at commit in (host, entity, metric) order to the batch's series the store does
not know yet, so a file's series have neighbouring ids and a row group's min and max of `series_id`
are tight. An id is the store's own key, as a source id is: two stores of the same files may number
their series differently (the order batches came in), never their rows.
"""

from __future__ import annotations

import duckdb

from synestra_cli.store.sql import has_table, scalar

SERIES_DDL = """
CREATE TABLE IF NOT EXISTS series (
    series_id INTEGER NOT NULL,   -- dense, in the order series were first committed
    host      VARCHAR,
    entity    VARCHAR,
    metric    VARCHAR NOT NULL
);
"""
# metrics' columns in the series layout: those of 002 and the series' id last (formats insert the first six
# by name; the stage's series_id stays NULL until the commit gives it).
METRICS_COLUMNS = """(
    ts        TIMESTAMP NOT NULL,
    host      VARCHAR,
    entity    VARCHAR,    -- gpu3, mlx5_1:1, Ethernet21, ...
    metric    VARCHAR NOT NULL,   -- canonical name (metric_catalog) or the source's own name
    value     DOUBLE,             -- NULL for blank sentinels
    source_id INTEGER NOT NULL,
    series_id INTEGER             -- series.series_id (migration 023)
)"""
HAS_SERIES_SQL = """
SELECT count(*) FROM duckdb_columns()
WHERE database_name = coalesce($catalog, current_database()) AND schema_name = 'main' AND table_name = 'metrics'
  AND column_name = 'series_id'
"""
# The same series: NULL host or entity are a value of the key (a hostless scrape, an entity-less metric).
SAME_SERIES = (
    "{a}.host IS NOT DISTINCT FROM {b}.host AND {a}.entity IS NOT DISTINCT FROM {b}.entity AND {a}.metric = {b}.metric"
)
# The series of `rows` (a table of samples) the dictionary lacks, numbered after its last id in
# (host, entity, metric) order.
NEW_SERIES_SQL = f"""
INSERT INTO {{series}}
SELECT (SELECT coalesce(max(series_id), 0) FROM {{series}}) + row_number() OVER (ORDER BY host, entity, metric),
       host, entity, metric
FROM (SELECT DISTINCT host, entity, metric FROM {{rows}} {{where}}) n
WHERE NOT EXISTS (SELECT 1 FROM {{series}} s WHERE {SAME_SERIES.format(a="s", b="n")})
"""
# The batch's own series with their ids: a small table to join every sample with.
BATCH_SERIES_SQL = f"""
CREATE OR REPLACE TEMP TABLE _batch_series AS
SELECT s.series_id, s.host, s.entity, s.metric FROM {{series}} s
SEMI JOIN (SELECT DISTINCT host, entity, metric FROM {{rows}} {{where}}) n ON {SAME_SERIES.format(a="s", b="n")}
"""
# The samples, each with its series' id, in (series_id, ts) order.
COPY_SQL = f"""
INSERT INTO {{target}} BY NAME
SELECT m.* EXCLUDE (series_id), b.series_id
FROM (SELECT * FROM {{rows}} {{where}}) m JOIN _batch_series b ON {SAME_SERIES.format(a="b", b="m")}
ORDER BY b.series_id, m.ts
"""
# (a stage's metrics have no series_id yet: the copy reads its other columns)
COPY_UNNUMBERED_SQL = COPY_SQL.replace("m.* EXCLUDE (series_id)", "m.*")


# A lake is in the series layout when every part of its metrics a reader reads (its scope: the whole lake,
# or a job's partitions) has every row's series id (a lake written before 023 has parts without the column;
# a compaction of old and new parts, rows with it NULL): read from the parts' footers, once per scope.
LAKE_SERIES_SQL = """
WITH meta AS (SELECT * FROM parquet_metadata($files))
SELECT (SELECT count(DISTINCT file_name) FROM meta WHERE path_in_schema = 'series_id') = len($files)
       AND (SELECT coalesce(sum(stats_null_count), 0) FROM meta WHERE path_in_schema = 'series_id') = 0
"""
LAKE_SCOPE_SQL = "SELECT url FROM _lake_scope WHERE tbl = 'metrics' ORDER BY url"
LAKE_PARTS_SQL = "SELECT url FROM {parts} WHERE tbl = 'metrics' ORDER BY url"
_lake_layouts: dict[tuple[str, ...], bool] = {}


def has_series_layout(conn: duckdb.DuckDBPyConnection, catalog: str | None = None) -> bool:
    """Whether `metrics` (of `catalog`, default the current database) is in the series layout: a store
    migrated to 023 (a store opened read-only before it is not), or a lake whose every metrics part carries
    its rows' series ids."""
    from synestra_cli.store.session import PARTS_TABLE, is_lake_reader

    if is_lake_reader(conn):
        scoped = has_table(conn, "_lake_scope", temporary=True)
        sql = LAKE_SCOPE_SQL if scoped else LAKE_PARTS_SQL.format(parts=PARTS_TABLE)
        files = tuple(u for (u,) in conn.execute(sql).fetchall())
        if files and files not in _lake_layouts:
            _lake_layouts[files] = bool(scalar(conn, LAKE_SERIES_SQL, {"files": list(files)}))
        return bool(files) and _lake_layouts[files]
    return bool(scalar(conn, HAS_SERIES_SQL, {"catalog": catalog}))


def copy_by_series(
    conn: duckdb.DuckDBPyConnection, rows: str, series: str, target: str, where: str = "", numbered: bool = True
) -> None:
    """Append the samples of table `rows` (those `where`, a WHERE clause on its columns, selects) to `target`
    in (series_id, ts) order, their new series added to the dictionary `series` first; in the caller's
    transaction. `numbered`: `rows` has a series_id column (a stage's, NULL: the dictionary's replaces it)."""
    conn.execute(NEW_SERIES_SQL.format(series=series, rows=rows, where=where))
    conn.execute(BATCH_SERIES_SQL.format(series=series, rows=rows, where=where))
    copy = COPY_SQL if numbered else COPY_UNNUMBERED_SQL
    conn.execute(copy.format(target=target, rows=rows, where=where))
    conn.execute("DROP TABLE IF EXISTS temp._batch_series")


# Rows written into `metrics` without an id (a tool or a test inserting samples itself, not through ingest):
# their series added to the dictionary, and the ids set in place. They stay where they were written.
UNNUMBERED = "WHERE series_id IS NULL AND list_contains($ids, source_id)"
NUMBER_SQL = f"""
UPDATE metrics SET series_id = d.series_id FROM series d
WHERE metrics.series_id IS NULL AND list_contains($ids, metrics.source_id) AND {SAME_SERIES.format(a="d", b="metrics")}
"""


def number_series(conn: duckdb.DuckDBPyConnection, source_ids: list[int]) -> None:
    """Give the rows of these sources that have no series id theirs, in the caller's transaction (the
    store's summaries are written after it: store/summaries.py summarise_sources)."""
    if has_series_layout(conn):
        conn.execute(NEW_SERIES_SQL.format(series="series", rows="metrics", where=UNNUMBERED), {"ids": source_ids})
        conn.execute(NUMBER_SQL, {"ids": source_ids})
