"""The lake store: a hive-partitioned Parquet dataset that every command reads as it reads a store file.

`--db` (or $SYNESTRA_DB) naming a folder, a path ending in `/`, or a URL (`s3://bucket/prefix`) selects a
lake (docs/lake.md); anything else is the embedded `.duckdb` file. A reader is an in-memory DuckDB with
the store's schema (the same migrations) whose tables are replaced by views over the parts that the
manifest lists: every query, view and command runs unchanged on it. `narrow_to_job` then replaces the
telemetry views by views over the partitions of one job's hosts and days only, so that explaining a job
on a lake of a year reads that job's files and no others. Ingest writes through lake_writer.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from synestra_cli import settings
from synestra_cli.errors import EmptyStoreError, StoreError
from synestra_cli.store.lake_fs import FsspecFS, LakeFS, open_fs
from synestra_cli.store.lake_manifest import LAKE_FILE, URL_SCHEMES, Entry, part_source, read_manifest, read_settings
from synestra_cli.store.session import PARTS_TABLE, is_lake_reader
from synestra_cli.store.sql import fetch_one, has_table, quote_ident, scalar

# The telemetry tables, partitioned by day and host bucket; every other table is one part per source.
PARTITIONED = {"metrics": "ts", "events": "ts"}
# Tables keyed without a source (their key): a distributed ingest's workers may each write a row.
KEYED = {"metric_catalog": "metric", "series": "series_id"}
NULL_BUCKET = -1  # rows without a host (a fabric-wide event)
NULL_DAY = "none"  # rows without a time
# The bucket of a host, computable by any engine (docs/lake.md gives Spark's and Trino's spelling).
BUCKET_SQL = "coalesce((('0x' || left(md5({host}), 8))::BIGINT % {n})::INTEGER, {null})"
DAY_SQL = "coalesce(strftime({ts}, '%Y-%m-%d'), '{null}')"
# The days a job may read: its attempts' span, widened by a day on each side (explain's look-back and
# look-ahead are minutes; a day keeps the scope a superset without knowing them).
JOB_SPAN_SQL = """
SELECT job_id, min(t) - INTERVAL 1 DAY, max(t) + INTERVAL 1 DAY FROM (
    SELECT job_id, start_ts AS t FROM attempts UNION ALL SELECT job_id, end_ts FROM attempts
    UNION ALL SELECT job_id, ts FROM steps
    UNION ALL SELECT job_id, start_ts FROM checkpoints UNION ALL SELECT job_id, end_ts FROM checkpoints
    UNION ALL SELECT job_id, ts FROM job_incidents
)
WHERE list_contains($jobs::VARCHAR[], job_id) AND t IS NOT NULL GROUP BY job_id
"""
# The hosts a job's explanation reads: its nodes, and the switches that serve them (fabric counters).
JOB_HOSTS_SQL = """
WITH nodes AS (
    SELECT job_id, host FROM job_nodes WHERE list_contains($jobs::VARCHAR[], job_id)
    UNION SELECT job_id, unnest(nodes) FROM attempts WHERE list_contains($jobs::VARCHAR[], job_id)
)
SELECT job_id, host FROM nodes WHERE host IS NOT NULL
UNION SELECT n.job_id, t.switch FROM topology t JOIN nodes n USING (host) WHERE t.switch IS NOT NULL
"""
# A job table (steps, checkpoints...) or a job's telemetry up to this many bytes of Parquet is read once
# into memory: explain queries them dozens of times, and decoding the parts for each query costs ~3x
# the CPU. Anything bigger stays a view, streamed from the parts at each query.
MATERIALIZE_BYTES = 16 << 20


def lake_target(db: str | Path | None) -> str | None:
    """The lake --db (else $SYNESTRA_DB) names, or None for a store file."""
    raw = str(db) if db else os.environ.get("SYNESTRA_DB", "")
    if not raw:
        return None
    if raw.startswith(URL_SCHEMES):
        return raw
    if raw.endswith(("/", os.sep)) and Path(raw.rstrip("/" + os.sep)).is_file():
        # the trailing / asks for a lake folder where a store file is: say so (reading <file>/_lake.json
        # would end in a traceback)
        raise StoreError(f"{raw} names a folder, but {raw.rstrip('/' + os.sep)} is a store file: drop the trailing /")
    if raw.endswith(("/", os.sep)) or Path(raw).is_dir():
        return raw
    return None


@dataclass(frozen=True)
class Lake:
    fs: LakeFS
    buckets: int
    entries: list[Entry]  # those whose parts a reader lists (Manifest.kept)


def load_lake(target: str, create: bool = False, verify: bool = False) -> Lake:
    """The lake's settings and the entries a reader lists. `verify`: every part checked to be there at the
    size its entry says (store/check.py; a local lake), read again once if one is not (a forget or a
    replace may have committed meanwhile), else StoreError naming the part."""
    from synestra_cli.store.lake_damage import damaged_error, verify_sizes

    fs = open_fs(target)
    if not create and fs.read_text(LAKE_FILE) is None:  # a folder that no ingest has written to
        raise EmptyStoreError(f"no lake at {target}: run `synestra ingest PATH... --db {target}` first")
    lake_settings = read_settings(fs, create)
    for attempt in range(2 if verify else 1):
        entries = read_manifest(fs).kept()
        damage = verify_sizes(fs, entries) if verify else []
        if not damage:
            break
        if attempt:
            raise damaged_error(fs.root, damage)
    return Lake(fs, lake_settings["buckets"], entries)


def bucket_sql(host: str, buckets: int) -> str:
    return BUCKET_SQL.format(host=host, n=buckets, null=NULL_BUCKET)


def day_sql(ts: str) -> str:
    return DAY_SQL.format(ts=ts, null=NULL_DAY)


def open_reader(target: str, *, locked: bool = False) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB over the lake: the store's schema, its tables replaced by views over the parts.
    `locked`: `synestra sql`'s sandbox, which may read the lake's parts and nothing else."""
    from synestra_cli.store.migrations import apply_migrations
    from synestra_cli.store.session import MEMORY_LIMIT, OFFLINE_CONFIG, SESSION_SQL

    lake = load_lake(target, verify=True)
    conn = duckdb.connect(
        ":memory:",
        config={**OFFLINE_CONFIG, "threads": settings.threads(), "memory_limit": settings.memory_limit(MEMORY_LIMIT)},
    )
    try:
        if isinstance(lake.fs, FsspecFS):
            conn.register_filesystem(lake.fs.fs)
        for sql in SESSION_SQL:
            conn.execute(sql)
        # Explain runs dozens of queries over the same parts: their footers are read once, not per query.
        conn.execute("SET parquet_metadata_cache = true")
        apply_migrations(conn)
        _record_parts(conn, lake)
        for table in _tables_with_parts(conn):
            small = table not in PARTITIONED and _scope_bytes(conn, _parts_sql(table), {}) <= MATERIALIZE_BYTES
            _view_over(conn, table, _parts_sql(table), materialize=small)
        if not _holders(lake, "metric_summaries") <= _holders(lake, "host_summaries"):
            # written before host summaries (migration 021): the host stage would rule out the hosts of the
            # sources without them, so explain tests every host's series there (signals/candidates.py)
            kind = "TABLE" if has_table(conn, "host_summaries") else "VIEW"
            conn.execute(f"DROP {kind} host_summaries")
        if locked:
            _lock(conn, lake)
    except BaseException:
        conn.close()
        raise
    return conn


def _holders(lake: Lake, table: str) -> set[int]:
    """The sources whose rows of `table` the lake holds (in their own parts or in compacted ones)."""
    out: set[int] = set()
    for e in lake.entries:
        for p in e.parts:
            if p.table == table:
                out |= {s for s, _ in p.sources} if p.sources else {part_source(p.path) or e.source_id}
    return out


def _record_parts(conn: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    conn.execute(
        f"CREATE TEMP TABLE {PARTS_TABLE} (source_id INTEGER, tbl VARCHAR, url VARCHAR, rows BIGINT, "
        "bytes BIGINT, day VARCHAR, bucket INTEGER, k INTEGER)"
    )
    # ordered by where their rows stand in source order (a compacted part: its first source's)
    parts = [(p.order(), p, k) for e in lake.entries for k, p in enumerate(e.parts)]
    if parts:  # as columns, in one statement: a lake of 10^4 sources lists ~10^5 parts
        columns = {
            "source_id": [s for s, _, _ in parts],
            "tbl": [p.table for _, p, _ in parts],
            "url": [lake.fs.url(p.path) for _, p, _ in parts],
            "rows": [p.rows for _, p, _ in parts],
            "bytes": [p.bytes for _, p, _ in parts],
            "day": [p.day for _, p, _ in parts],
            "bucket": [p.bucket for _, p, _ in parts],
            "k": [k for _, _, k in parts],
        }
        conn.execute(
            f"INSERT INTO {PARTS_TABLE} SELECT * FROM (SELECT unnest($source_id::INTEGER[]), unnest($tbl::VARCHAR[]), "
            "unnest($url::VARCHAR[]), unnest($rows::BIGINT[]), unnest($bytes::BIGINT[]), unnest($day::VARCHAR[]), "
            "unnest($bucket::INTEGER[]), unnest($k::INTEGER[]))",
            columns,
        )
    conn.execute(
        f"CREATE TEMP TABLE _lake_info AS SELECT {lake.buckets}::INTEGER AS buckets, ? AS root", [lake.fs.root]
    )


def _tables_with_parts(conn: duckdb.DuckDBPyConnection) -> list[str]:
    return [r[0] for r in conn.execute(f"SELECT DISTINCT tbl FROM {PARTS_TABLE} ORDER BY tbl").fetchall()]


def _parts_sql(table: str) -> str:
    """Its parts in source order, each source's parts in the order they were written: rows come back in
    the order the embedded store would hold them."""
    return f"SELECT url FROM {PARTS_TABLE} WHERE tbl = '{table}' ORDER BY source_id, k, url"


def _view_over(
    conn: duckdb.DuckDBPyConnection,
    table: str,
    parts_sql: str,
    params: dict[str, object] | None = None,
    materialize: bool = False,
) -> None:
    """Replace `table` (an empty table, or a view of a previous scope) by a view over these parts,
    with the columns and types of the store's schema."""
    urls = [r[0] for r in conn.execute(parts_sql, params).fetchall()]
    columns = conn.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    if not columns:  # already a view: its columns were saved when it replaced the table
        columns = conn.execute("SELECT name, type FROM _lake_columns WHERE tbl = ? ORDER BY k", [table]).fetchall()
    else:
        _save_columns(conn, table, columns)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _lake_scope (tbl VARCHAR, url VARCHAR)")
    conn.execute("DELETE FROM _lake_scope WHERE tbl = ?", [table])
    conn.execute("INSERT INTO _lake_scope SELECT ?, unnest(?::VARCHAR[])", [table, urls])
    kind = "TABLE" if has_table(conn, table) else "VIEW"
    conn.execute(f"DROP {kind} {quote_ident(table)}")
    if not urls:  # no part in this scope: an empty table of the same shape
        cols = ", ".join(f"{quote_ident(n)} {t}" for n, t in columns)
        conn.execute(f"CREATE TABLE {quote_ident(table)} ({cols})")
        return
    select = ", ".join(f"CAST({quote_ident(n)} AS {t}) AS {quote_ident(n)}" for n, t in columns)
    files = "[" + ", ".join("'" + u.replace("'", "''") + "'" for u in urls) + "]"
    scan = f"read_parquet({files}, hive_partitioning = false, union_by_name = true, filename = true)"
    # A catalog row (keyed by metric, no source) may come from several sources: the first one stands,
    # as ON CONFLICT DO NOTHING keeps it in a store file (parts are listed in source order).
    at = f"list_position({files}, filename)"
    first = f" QUALIFY row_number() OVER (PARTITION BY {KEYED[table]} ORDER BY {at}) = 1" if table in KEYED else ""
    kind = "TABLE" if materialize else "VIEW"
    conn.execute(f"CREATE {kind} {quote_ident(table)} AS SELECT {select} FROM {scan}{first}")


def _save_columns(conn: duckdb.DuckDBPyConnection, table: str, columns: list[tuple[str, str]]) -> None:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _lake_columns (tbl VARCHAR, k INTEGER, name VARCHAR, type VARCHAR)")
    conn.execute("DELETE FROM _lake_columns WHERE tbl = ?", [table])
    conn.executemany(
        "INSERT INTO _lake_columns VALUES (?, ?, ?, ?)", [(table, k, n, t) for k, (n, t) in enumerate(columns)]
    )


def _lock(conn: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """The sql sandbox on a lake: external access off but for the lake's own parts, configuration locked."""
    paths = [r[0] for r in conn.execute(f"SELECT DISTINCT url FROM {PARTS_TABLE}").fetchall()]
    if paths:
        conn.execute("SET allowed_paths = ?", [paths])
    conn.execute("SET enable_external_access = false")
    conn.execute("SET lock_configuration = true")


def scope_parts(conn: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    """The parts a lake reader's view of `table` reads now (after narrow_to_job: the job's)."""
    return [r[0] for r in conn.execute("SELECT url FROM _lake_scope WHERE tbl = ? ORDER BY url", [table]).fetchall()]


def narrow_to_job(conn: duckdb.DuckDBPyConnection, job_id: str) -> None:
    """On a lake reader, the telemetry views read only the partitions of this job's hosts (and of rows
    without a host) and of its days; on a store file, nothing. A job with no known time or hosts
    keeps every partition."""
    narrow_to_jobs(conn, [job_id])


def narrow_to_jobs(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> None:
    """narrow_to_job for several jobs at once: the partitions of all their hosts, over the days from
    the first one's start to the last one's end (a batch explained together, engine/ray_engine.py)."""
    if not job_ids or not is_lake_reader(conn):
        return
    spans = {j: (lo, hi) for j, lo, hi in conn.execute(JOB_SPAN_SQL, {"jobs": job_ids}).fetchall()}
    held = conn.execute(JOB_HOSTS_SQL, {"jobs": job_ids}).fetchall()
    if set(job_ids) - set(spans) or set(job_ids) - {j for j, _ in held}:
        return  # a job with no known time or hosts keeps every partition, and so does its batch
    start, end = min(lo for lo, _ in spans.values()), max(hi for _, hi in spans.values())
    hosts = sorted({h for _, h in held})
    buckets = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT {bucket_sql('h', _buckets(conn))} FROM (SELECT unnest(?::VARCHAR[]) AS h)", [hosts]
        ).fetchall()
    ]
    days = {"first": start.strftime("%Y-%m-%d"), "last": end.strftime("%Y-%m-%d"), "buckets": buckets}
    for table in PARTITIONED:
        if not _has_parts(conn, table):
            continue
        sql = (
            f"SELECT url FROM {PARTS_TABLE} WHERE tbl = '{table}' "
            f"AND (bucket = {NULL_BUCKET} OR list_contains($buckets::INTEGER[], bucket)) "
            f"AND (day = '{NULL_DAY}' OR day BETWEEN $first AND $last) ORDER BY source_id, k, url"
        )
        _view_over(conn, table, sql, days, materialize=_scope_bytes(conn, sql, days) <= MATERIALIZE_BYTES)


def _scope_bytes(conn: duckdb.DuckDBPyConnection, parts_sql: str, params: dict[str, object]) -> int:
    return int(scalar(conn, f"SELECT sum(bytes) FROM {PARTS_TABLE} WHERE url IN ({parts_sql})", params) or 0)


def _buckets(conn: duckdb.DuckDBPyConnection) -> int:
    row = fetch_one(conn, "SELECT buckets FROM _lake_info")
    return int(row[0]) if row else 1


def _has_parts(conn: duckdb.DuckDBPyConnection, table: str) -> bool:
    return bool(scalar(conn, f"SELECT count(*) FROM {PARTS_TABLE} WHERE tbl = ?", [table]))


def refuse_write(target: str) -> StoreError:
    return StoreError(
        f"lake {target}: a lake is written by `synestra ingest` and `synestra forget` only, each a file "
        "at a time (docs/lake.md), not through a store connection"
    )
