"""Per-series, per-hour summaries of the telemetry (`metric_summaries`), written as each source commits.

`explain` reads a big job's telemetry in two steps (signals/anomalies.py): which series could hold an
anomaly at all, then the raw samples of those few. The first step used to scan every row group of the
job's hosts, because a row group holds a host's whole day, so the time window pruned nothing: cost
linear in the job's hosts x the store's hours. This table answers the first step from one row per
source, host, entity, metric and hour (about 1/30 of the samples at campus sampling), so that only
the candidates' hosts are read raw.

Each row keeps what a candidate test needs, in forms that combine across hours and sources:

- `n`, `lo`, `hi`, `first_ts`, `last_ts`: the non-null samples (min/max: a gauge's range);
- `rate_lo`, `rate_hi`: the smallest and largest rate between consecutive finite samples of the source
  (each pair counted in its later sample's hour), `backwards`: pairs that went down (for a counter, a
  reset: its rate bounds do not hold), `repeats`: pairs at the same time (their order is arbitrary);
  `pair_hi`/`pair_lo`: the highest level two consecutive samples both reach, the lowest level both
  fall to (an anomaly window needs two anomalous samples in a row); `fin_*` and `first_v`/`last_v`:
  the first and last finite samples, so that a reader can add the pairs between hours and sources;
- `bits_or`, `bits_and`: a bitmask metric's bits (metric_catalog.kind = 'bitmask'), set in any or
  every sample.

Every source is listed in `summarised_sources` once its summary is written (with or without telemetry):
a reader uses the summaries only when every source of its time range is listed, else reads raw. Both
tables carry `source_id`, so forgetting or replacing a source removes its summary in the same
transaction (store/sources.py).
"""

from __future__ import annotations

import duckdb

from synestra_cli.errors import is_interrupt
from synestra_cli.store.sql import one_row, transaction

BUCKET = "INTERVAL 1 HOUR"
# Tables derived from a source's rows, not rows it wrote: not counted as the source's rows.
DERIVED_TABLES = ("metric_summaries", "host_summaries", "summarised_sources")

_SUMMARY_TABLE = """
CREATE TABLE {name} (
    source_id    INTEGER NOT NULL,
    host         VARCHAR,
    entity       VARCHAR,
    metric       VARCHAR NOT NULL,
    bucket       TIMESTAMP NOT NULL,   -- the hour (UTC) the samples fall in
    n            BIGINT NOT NULL,      -- non-null samples
    lo           DOUBLE,               -- their min and max
    hi           DOUBLE,
    first_ts     TIMESTAMP NOT NULL,
    last_ts      TIMESTAMP NOT NULL,
    fin_first_ts TIMESTAMP,            -- first and last finite samples (NaN and inf are no evidence)
    fin_last_ts  TIMESTAMP,
    first_v      DOUBLE,
    last_v       DOUBLE,
    rate_lo      DOUBLE,               -- min and max rate (per s) between consecutive finite samples
    rate_hi      DOUBLE,
    backwards    BIGINT NOT NULL,      -- pairs that went down (a counter reset)
    repeats      BIGINT NOT NULL,      -- pairs at the same time
    pair_hi      DOUBLE,               -- max over consecutive finite pairs of the lower of the two
    pair_lo      DOUBLE,               -- min over them of the higher of the two
    bits_or      BIGINT,               -- bitmask metrics: bits set in any / every sample
    bits_and     BIGINT{extra}
);
"""
SUMMARY_DDL = (
    _SUMMARY_TABLE.format(name="metric_summaries", extra="")
    + "CREATE TABLE summarised_sources (source_id INTEGER PRIMARY KEY);\n"
)
# The order rows are kept in: by hour first, so that a job's read windows (an hour or two of a day)
# skip every row group of the other hours by their zonemaps (first_ts, last_ts, bucket). A summary
# written in source order holds every hour of its sources in each row group: a one-hour read then
# scanned the whole table, a cost that grew with the store, not with the job.
SUMMARY_ORDER = "bucket, host, entity, metric, source_id"
# Each row's samples lie in metrics rows row_lo..row_hi (rowid): a file's rows are written sorted by host,
# entity, metric and time, so a series' hour is one short run, and explain reads a candidate's samples by
# rowid (a few hundred rows, not its file's row groups). A hint, checked where used: DuckDB may renumber
# rows after a delete (forget), and a reader that does not find all `n` samples there reads by file.
ROW_RANGE_COLUMNS = """,
    row_lo       BIGINT,               -- the samples' rowids in metrics, first and last
    row_hi       BIGINT"""
# One row per source, host, metric and hour: the hour's summaries of the host's entities (its 8 GPUs, its
# NICs, a switch's ports) combined, 1/8-1/16 of metric_summaries. A big job's candidate test reads these
# first (signals/candidates.py): each column bounds its entities' (max of the highs, min of the lows, OR
# and AND of the bits), so a host whose every entity is quiet is ruled out without reading them, and the
# per-series summaries are read for the few (host, metric) that remain. `bits_null`: an entity whose
# bitmask could not be decoded (its test is then on its range).
HOST_SUMMARY_DDL = """
CREATE TABLE host_summaries (
    source_id  INTEGER NOT NULL,
    host       VARCHAR,
    metric     VARCHAR NOT NULL,
    bucket     TIMESTAMP NOT NULL,
    series     BIGINT NOT NULL,      -- the entities combined
    n          BIGINT NOT NULL,
    lo         DOUBLE,
    hi         DOUBLE,
    first_ts   TIMESTAMP NOT NULL,   -- the earliest and latest sample of any entity
    last_ts    TIMESTAMP NOT NULL,
    rate_lo    DOUBLE,
    rate_hi    DOUBLE,
    backwards  BIGINT NOT NULL,
    repeats    BIGINT NOT NULL,
    pair_hi    DOUBLE,
    pair_lo    DOUBLE,
    bits_or    BIGINT,
    bits_and   BIGINT,
    bits_null  BOOLEAN NOT NULL
);
"""
HOST_SUMMARY_ORDER = "bucket, host, metric, source_id"
_HOST_SUMMARY_SELECT = f"""
SELECT source_id, host, metric, bucket, count(*), sum(n), min(lo), max(hi), min(first_ts), max(last_ts),
       min(rate_lo), max(rate_hi), sum(backwards), sum(repeats), max(pair_hi), min(pair_lo), bit_or(bits_or),
       bit_and(bits_and), bool_or(bits_or IS NULL)
FROM {{summaries}} {{where}}
GROUP BY source_id, host, metric, bucket
ORDER BY {HOST_SUMMARY_ORDER}
"""
# Migration 021: the table, and the host summaries of every source summarised already (one aggregate over
# metric_summaries: ~1/40 of the samples).
HOST_SUMMARIES_SQL = (
    HOST_SUMMARY_DDL
    + "INSERT INTO host_summaries "
    + _HOST_SUMMARY_SELECT.format(summaries="metric_summaries", where="")
)
BATCH_HOST_SUMMARY_SQL = "INSERT INTO host_summaries " + _HOST_SUMMARY_SELECT.format(
    summaries="metric_summaries",
    where="WHERE list_contains($ids, source_id) AND source_id NOT IN (SELECT source_id FROM summarised_sources)",
)

# Migration 018: the summaries already written, rewritten in that order with their row ranges. The
# ranges are gathered one source at a time (`sort_by_hour`), as 012's backfill does: one aggregate over
# every sample of a 2x10^8-sample store ran out of its 1 GB memory limit; then one sort of the summaries
# (~1/40 of the samples).
SORT_SUMMARIES_SQL = (
    _SUMMARY_TABLE.format(name="metric_summaries_by_hour", extra=ROW_RANGE_COLUMNS)
    + """
CREATE TEMP TABLE _summary_row_ranges (source_id INTEGER, host VARCHAR, entity VARCHAR, metric VARCHAR,
                                       bucket TIMESTAMP, row_lo BIGINT, row_hi BIGINT);
"""
)
SOURCE_ROW_RANGES_SQL = f"""
INSERT INTO _summary_row_ranges
SELECT source_id, host, entity, metric, time_bucket({BUCKET}, ts) AS bucket, min(rowid), max(rowid)
FROM metrics WHERE value IS NOT NULL AND source_id = $sid GROUP BY ALL
"""
SORT_BY_HOUR_SQL = f"""
INSERT INTO metric_summaries_by_hour
SELECT s.*, r.row_lo, r.row_hi FROM metric_summaries s LEFT JOIN _summary_row_ranges r
   ON r.source_id = s.source_id AND r.host IS NOT DISTINCT FROM s.host AND r.entity IS NOT DISTINCT FROM s.entity
   AND r.metric = s.metric AND r.bucket = s.bucket
ORDER BY {SUMMARY_ORDER};
DROP TABLE _summary_row_ranges;
DROP TABLE metric_summaries;
ALTER TABLE metric_summaries_by_hour RENAME TO metric_summaries;
"""


def sort_by_hour(conn: duckdb.DuckDBPyConnection) -> None:
    """Migration 018's data, in the caller's transaction: each summarised source's row ranges, then the
    summaries rewritten in hour order."""
    for (sid,) in conn.execute("SELECT source_id FROM summarised_sources ORDER BY source_id").fetchall():
        conn.execute(SOURCE_ROW_RANGES_SQL, {"sid": sid})
    conn.execute(SORT_BY_HOUR_SQL)


# One pass over the samples: the previous finite sample of each series by IGNORE NULLS (a NaN in
# between does not break a pair, as counters.py skips it too).
_SUMMARY_SELECT = f"""
WITH s AS (
    SELECT m.source_id, m.host, m.entity, m.metric, m.ts, m.value, isfinite(m.value) AS fin, m.rowid AS rid,
           CASE WHEN c.kind = 'bitmask' AND isfinite(m.value) THEN TRY_CAST(round(m.value) AS BIGINT) END AS bits,
           lag(CASE WHEN isfinite(m.value) THEN m.value END IGNORE NULLS) OVER w AS pv,
           lag(CASE WHEN isfinite(m.value) THEN m.ts END IGNORE NULLS) OVER w AS pts
    FROM {{metrics}} m LEFT JOIN {{catalog}} c ON c.metric = m.metric
    WHERE m.value IS NOT NULL {{where}}
    WINDOW w AS (PARTITION BY m.source_id, m.host, m.entity, m.metric ORDER BY m.ts)
)
SELECT source_id, host, entity, metric, time_bucket({BUCKET}, ts) AS bucket, count(*), min(value), max(value),
       min(ts), max(ts), min(ts) FILTER (fin), max(ts) FILTER (fin),
       arg_min(value, ts) FILTER (fin), arg_max(value, ts) FILTER (fin),
       min((value - pv) / (epoch(ts) - epoch(pts))) FILTER (fin AND value >= pv AND ts > pts),
       max((value - pv) / (epoch(ts) - epoch(pts))) FILTER (fin AND value >= pv AND ts > pts),
       count(*) FILTER (fin AND value < pv), count(*) FILTER (fin AND ts = pts),
       max(least(value, pv)) FILTER (fin AND pv IS NOT NULL), min(greatest(value, pv)) FILTER (fin AND pv IS NOT NULL),
       bit_or(bits) FILTER (bits >= 0), bit_and(bits) FILTER (bits >= 0){{ranges}}
FROM s GROUP BY ALL
{{order}}
"""
SOURCE_SUMMARY_SQL = "INSERT INTO metric_summaries " + _SUMMARY_SELECT.format(
    metrics="metrics", catalog="metric_catalog", where="AND m.source_id = $sid", order="", ranges=""
)
# Ingest's form: the sources of one committed batch not summarised yet, in one statement.
BATCH_SUMMARY_SQL = "INSERT INTO metric_summaries " + _SUMMARY_SELECT.format(
    metrics="metrics",
    catalog="metric_catalog",
    where="AND list_contains($ids, m.source_id) AND m.source_id NOT IN (SELECT source_id FROM summarised_sources)",
    order=f"ORDER BY {SUMMARY_ORDER}",  # a big batch's row groups each hold a few of its hours
    ranges=", min(rid), max(rid)",
)
# The series layout (store/series.py): a batch's rows are reordered on their way in, and read by series, not
# by row range; its summaries carry none.
BATCH_SUMMARY_UNRANGED_SQL = BATCH_SUMMARY_SQL.replace(", min(rid), max(rid)", ", NULL, NULL")
MARK_SQL = "INSERT OR IGNORE INTO summarised_sources SELECT unnest($ids::INTEGER[])"

# Migration 012: the tables (SUMMARY_DDL), then `backfill` summarises every source already in the store
# (in source order: migration 018 sorts them after).


def backfill(conn: duckdb.DuckDBPyConnection) -> None:
    """The summaries of every source in the store, in the caller's transaction (migration 012). One
    source at a time: each source's series sort in memory, where one statement over the whole store
    spilled 7 GB to disk and ran for a quarter of an hour on a 1.5x10^8-sample store."""
    for (sid,) in conn.execute("SELECT source_id FROM sources ORDER BY source_id").fetchall():
        conn.execute(SOURCE_SUMMARY_SQL, {"sid": sid})
    conn.execute("INSERT INTO summarised_sources SELECT source_id FROM sources")


def summarise_source(conn: duckdb.DuckDBPyConnection, source_id: int | None) -> bool:
    """summarise_sources for one source (None: nothing to summarise)."""
    return source_id is not None and summarise_sources(conn, [source_id])


def summarise_sources(conn: duckdb.DuckDBPyConnection, source_ids: list[int], telemetry: bool = True) -> bool:
    """Write the summaries of committed sources, in one transaction of their own (ingest calls this once
    per batch it committed, telemetry False when the batch wrote no metrics: its sources are only
    listed, or every reader of their hours would read raw). The files are in either way: a source left
    without its summary (this failed, or a crash came in between) is read raw, slower but with the same
    answers. A replaced or forgotten source's summary goes with its rows (both tables carry source_id).
    True when written."""
    from synestra_cli.store.series import has_series_layout, number_series  # series imports the migrations

    try:
        with transaction(conn):
            if telemetry:
                number_series(conn, source_ids)
                by_series = has_series_layout(conn)
                conn.execute(BATCH_SUMMARY_UNRANGED_SQL if by_series else BATCH_SUMMARY_SQL, {"ids": source_ids})
                conn.execute(BATCH_HOST_SUMMARY_SQL, {"ids": source_ids})
            conn.execute(MARK_SQL, {"ids": source_ids})
    except duckdb.Error as exc:
        if is_interrupt(exc):
            raise
        return False
    return True


# --- a batch's summaries, computed in ingest's stage ------------------------------------------------------
# Ingest computes a batch's summaries in its stage (ingest/staging.py) before the store is attached, the
# stage's rowids as row ranges; once the batch's samples are committed, the summaries follow in a short
# transaction, the ranges moved to where those rows landed. The window over the samples (~0.13 s per campus
# DCGM file) then runs outside the store's lock. When the stage's rows changed since (a check deleted some,
# a file was dropped from the batch, a grown file's samples repeated its earlier lines'), or did not land
# as one run in their order, the commit summarises from the store instead (summarise_sources).
# The stage's catalog holds only the metrics its files catalogued; the store's (its snapshot) the rest.
_STAGE_CATALOG = """(
    SELECT metric, CASE WHEN bool_or(kind = 'bitmask') THEN 'bitmask' END AS kind
    FROM (SELECT metric, kind FROM {stage}.metric_catalog UNION ALL SELECT metric, kind FROM {evidence}metric_catalog)
    GROUP BY metric)"""
# The sources whose samples could hold a duplicate (one series, one time, twice: store/checks.py): a pair
# of finite samples at the same time (`repeats`), or a sample the summaries skip (NULL, NaN, infinite). In
# any other source every series' samples are finite and, in time order, no two neighbours share a time.
REPEATABLE_SQL = """
SELECT source_id FROM {stage}.metric_summaries WHERE repeats > 0
UNION SELECT source_id FROM {stage}.metrics WHERE value IS NULL OR NOT isfinite(value)
"""
STAGE_ROWS_SQL = "SELECT count(*), min(rowid), max(rowid), count(value) FROM {stage}.metrics"
STAGE_SUMMED_SQL = "SELECT coalesce(sum(n), 0) FROM {stage}.metric_summaries"
LANDED_SQL = "SELECT count(*), min(rowid), max(rowid) FROM {store}.metrics WHERE list_contains($ids, source_id)"
COPY_SUMMARIES_SQL = f"""
INSERT INTO {{store}}.metric_summaries BY NAME
SELECT * REPLACE (row_lo + $shift AS row_lo, row_hi + $shift AS row_hi) FROM {{stage}}.metric_summaries
ORDER BY {SUMMARY_ORDER}
"""
COPY_HOST_SUMMARIES_SQL = (
    f"INSERT INTO {{store}}.host_summaries BY NAME SELECT * FROM {{stage}}.host_summaries ORDER BY {HOST_SUMMARY_ORDER}"
)
COPY_MARK_SQL = "INSERT OR IGNORE INTO {store}.summarised_sources SELECT unnest($ids::INTEGER[])"


def summarise_stage(conn: duckdb.DuckDBPyConnection, stage: str, evidence: str) -> bool:
    """Write the summaries of the metrics in `stage` (`catalog.schema`) into its own summary tables, in one
    transaction of the stage; `evidence` prefixes the store's catalog as the stage sees it. False (nothing
    written) when that fails: the commit then summarises from the store."""
    catalog = _STAGE_CATALOG.format(stage=stage, evidence=evidence)
    metric_sql = f"INSERT INTO {stage}.metric_summaries " + _SUMMARY_SELECT.format(
        metrics=f"{stage}.metrics", catalog=catalog, where="", order="", ranges=", min(rid), max(rid)"
    )
    host_sql = f"INSERT INTO {stage}.host_summaries " + _HOST_SUMMARY_SELECT.format(
        summaries=f"{stage}.metric_summaries", where=""
    )
    try:
        with transaction(conn):
            conn.execute(metric_sql)
            conn.execute(host_sql)
    except duckdb.Error as exc:
        if is_interrupt(exc):
            raise
        return False
    return True


def repeatable_sources(conn: duckdb.DuckDBPyConnection, stage: str) -> set[int]:
    """The sources of the stage (summarised: summarise_stage) whose samples could hold a duplicate."""
    return {sid for (sid,) in conn.execute(REPEATABLE_SQL.format(stage=stage)).fetchall()}


def copy_stage_summaries(
    conn: duckdb.DuckDBPyConnection, stage: str, store: str, ids: list[int], ranged: bool = True
) -> bool:
    """Once the stage's metrics are committed to `store` (both `catalog.schema`), in a transaction of its own:
    the stage's summaries (summarise_stage) into the store's, their row ranges moved to where the rows
    landed (`ranged` False: none, the rows were reordered on their way: store/series.py), and `ids` listed
    as summarised. False (nothing written) when the summaries no longer match the stage's rows (some deleted
    since), the rows did not land as one run, or the write failed."""
    try:
        with transaction(conn):
            return _copy_stage_summaries(conn, stage, store, ids, ranged)
    except duckdb.Error as exc:
        if is_interrupt(exc):
            raise
        return False


def _copy_stage_summaries(
    conn: duckdb.DuckDBPyConnection, stage: str, store: str, ids: list[int], ranged: bool
) -> bool:
    n, lo, hi, valued = one_row(conn, STAGE_ROWS_SQL.format(stage=stage))
    if one_row(conn, STAGE_SUMMED_SQL.format(stage=stage)) != (valued,):
        return False
    if n:
        if hi - lo + 1 != n:  # rows deleted in between: their rowids left holes the copy closed
            return False
        # committed rowids: a transaction's own new rows have temporary ones until it commits
        landed, first, last = one_row(conn, LANDED_SQL.format(store=store), {"ids": ids})
        if landed != n or last - first + 1 != n:
            return False
        conn.execute(COPY_SUMMARIES_SQL.format(store=store, stage=stage), {"shift": first - lo if ranged else None})
        conn.execute(COPY_HOST_SUMMARIES_SQL.format(store=store, stage=stage))
    conn.execute(COPY_MARK_SQL.format(store=store), {"ids": ids})
    return True
