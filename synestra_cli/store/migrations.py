"""Ordered, named schema migrations, applied on open and recorded in _migrations.

Every timestamp column is a naive TIMESTAMP holding UTC. Tables are appended one source file at a
time, each file's rows sorted by (host, entity, time): DuckDB's per-row-group min/max (zonemaps) then
let a query for a few hosts and a time window skip most of the store.
"""

from __future__ import annotations

import functools

import duckdb

from synestra_cli.store.job_views import BOUNDED_RESTORES, JOB_VIEWS, RESTORE_DURATIONS
from synestra_cli.store.kube_views import KUBE_VIEWS
from synestra_cli.store.series_migration import migrate as migrate_to_series
from synestra_cli.store.sql import transaction
from synestra_cli.store.summaries import HOST_SUMMARIES_SQL, SORT_SUMMARIES_SQL, SUMMARY_DDL
from synestra_cli.store.summaries import backfill as backfill_summaries
from synestra_cli.store.summaries import sort_by_hour as sort_summaries_by_hour

CORE = """
CREATE SEQUENCE source_id_seq START 1;
CREATE TABLE sources (
    source_id   INTEGER PRIMARY KEY,
    path        VARCHAR NOT NULL,      -- as given on the command line, resolved
    sha256      VARCHAR NOT NULL UNIQUE, -- of the decompressed content: re-ingest adds nothing
    format      VARCHAR NOT NULL,
    bytes       BIGINT NOT NULL,
    rows        BIGINT NOT NULL,       -- rows written to all tables
    rejected    BIGINT NOT NULL,       -- malformed lines counted, not loaded
    first_ts    TIMESTAMP,
    last_ts     TIMESTAMP,
    hosts       VARCHAR[],
    ingested_at TIMESTAMP NOT NULL DEFAULT current_localtimestamp()
);
CREATE TABLE rejects (
    source_id INTEGER NOT NULL,
    line      BIGINT,
    reason    VARCHAR NOT NULL,
    text      VARCHAR               -- first 200 characters of the line
);
"""

TELEMETRY = """
CREATE TABLE metric_catalog (
    metric      VARCHAR PRIMARY KEY,   -- canonical: snake_case, unit suffix, _total for counters
    unit        VARCHAR,
    kind        VARCHAR NOT NULL,      -- counter | gauge | bitmask | last_value
    description VARCHAR
);
CREATE TABLE events (
    ts        TIMESTAMP NOT NULL,
    host      VARCHAR,
    component VARCHAR,    -- gpu bus id 00000000:9B:00.0, mlx5_1, an NFS server, ...
    kind      VARCHAR NOT NULL,   -- xid, gpu_fell_off_bus, link_down, aer, nfs_not_responding, ..., log
    code      INTEGER,    -- Xid number, errno, ...
    severity  VARCHAR,    -- emerg..debug when known
    message   VARCHAR,
    fields    JSON,       -- structured fields of the typed event
    source_id INTEGER NOT NULL,
    line      BIGINT      -- 1-based line in the source file
);
CREATE TABLE metrics (
    ts        TIMESTAMP NOT NULL,
    host      VARCHAR,
    entity    VARCHAR,    -- gpu3, mlx5_1:1, Ethernet21, ...
    metric    VARCHAR NOT NULL,   -- canonical name (metric_catalog) or the source's own name
    value     DOUBLE,             -- NULL for blank sentinels
    source_id INTEGER NOT NULL
);
CREATE TABLE gpus (        -- identity of each GPU as seen in DCGM labels: joins Xid bus ids to gpuN
    host       VARCHAR NOT NULL,
    entity     VARCHAR NOT NULL,  -- gpu3
    pci_bus_id VARCHAR,           -- 00000000:9B:00.0
    uuid       VARCHAR,
    model      VARCHAR,
    source_id  INTEGER NOT NULL
);
CREATE TABLE topology (
    host        VARCHAR NOT NULL,
    nic         VARCHAR,      -- mlx5_0 (or the HCA's port GUID when only that is known)
    switch      VARCHAR,
    switch_port VARCHAR,
    rack        VARCHAR,
    source_id   INTEGER NOT NULL
);
"""

JOBS = """
CREATE TABLE jobs (
    job_id    VARCHAR NOT NULL,
    name      VARCHAR,
    user_name VARCHAR,
    gpus      INTEGER,
    state     VARCHAR,
    source_id INTEGER NOT NULL
);
CREATE TABLE attempts (
    job_id    VARCHAR NOT NULL,
    attempt   INTEGER NOT NULL,   -- 1-based, in start order
    start_ts  TIMESTAMP,
    end_ts    TIMESTAMP,
    state     VARCHAR,
    exit_code VARCHAR,            -- sacct's "code:signal"
    nodes     VARCHAR[],
    source_id INTEGER NOT NULL
);
CREATE TABLE job_nodes (
    job_id    VARCHAR NOT NULL,
    attempt   INTEGER,
    host      VARCHAR NOT NULL,
    source_id INTEGER NOT NULL
);
CREATE TABLE steps (
    job_id         VARCHAR NOT NULL,
    attempt        INTEGER,
    iteration      BIGINT NOT NULL,
    ts             TIMESTAMP,
    ts_precision   VARCHAR NOT NULL,  -- exact | inferred (from the nearest timed line) | none
    step_time_s    DOUBLE,            -- as printed: Megatron averages over the log interval
    tflops_per_gpu DOUBLE,
    tokens_per_s   DOUBLE,
    samples_per_s  DOUBLE,
    loss           DOUBLE,
    source_id      INTEGER NOT NULL,
    line           BIGINT
);
CREATE TABLE checkpoints (
    job_id       VARCHAR NOT NULL,
    attempt      INTEGER,
    kind         VARCHAR NOT NULL,    -- save | restore
    iteration    BIGINT,
    start_ts     TIMESTAMP,
    end_ts       TIMESTAMP,
    ts_precision VARCHAR NOT NULL,
    path         VARCHAR,
    is_async     BOOLEAN,
    phase        VARCHAR,             -- async saves: scheduled | finalized; else NULL
    blocking_s   DOUBLE,              -- time training was blocked, when the log says (timer block)
    source_id    INTEGER NOT NULL,
    line         BIGINT
);
CREATE TABLE job_incidents (
    job_id       VARCHAR NOT NULL,
    attempt      INTEGER,
    ts           TIMESTAMP,           -- when it began (watchdog: log time minus "ran for")
    logged_ts    TIMESTAMP,           -- when it was printed
    ts_precision VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,    -- nccl_timeout | nccl_error | cuda_error | python_exception | sigterm
                                      -- | oom | elastic_restart
    rank         INTEGER,
    collective   VARCHAR,
    seq          BIGINT,
    timeout_ms   BIGINT,
    ran_for_ms   BIGINT,
    message      VARCHAR,
    fields       JSON,
    source_id    INTEGER NOT NULL,
    line         BIGINT
);
"""

# Whole-job explanations kept for reuse under the store's key (kept/explanations.py): a cache, never a source.
EXPLANATIONS = """
CREATE TABLE explanations (
    job_id    VARCHAR PRIMARY KEY,
    store_key VARCHAR NOT NULL,   -- schema|version|source count|last source id when it was computed
    doc       JSON NOT NULL       -- the synestra.explain/1 document
);
"""

# Sources keyed on content AND on how it was read (issue 18): the same bytes read with another --host or
# --timezone are another source, so sha256 is no longer unique. DuckDB cannot drop a constraint: the
# table is rebuilt (views bind by name and keep working). `options` holds the ingest options the parser
# read, with their values ({} for sources loaded before this migration: they match any options);
# `offset_bytes` / `first_line` say where the rows of the new lines of a grown file begin; `source_key`
# is unique, so that two copies of a file loading at once collide at commit (the later one is retried,
# then skipped) as the unique sha256 made them.
SOURCE_KEYS = """
CREATE TABLE sources_006 (
    source_id    INTEGER PRIMARY KEY,
    path         VARCHAR NOT NULL,
    sha256       VARCHAR NOT NULL,
    format       VARCHAR NOT NULL,
    bytes        BIGINT NOT NULL,
    rows         BIGINT NOT NULL,
    rejected     BIGINT NOT NULL,
    first_ts     TIMESTAMP,
    last_ts      TIMESTAMP,
    hosts        VARCHAR[],
    ingested_at  TIMESTAMP NOT NULL DEFAULT current_localtimestamp(),
    options      JSON NOT NULL DEFAULT '{}',
    offset_bytes BIGINT NOT NULL DEFAULT 0,
    first_line   BIGINT NOT NULL DEFAULT 1,
    source_key   VARCHAR UNIQUE  -- sha256|format|options (ingest sets it): two workers loading one copy collide
);
INSERT INTO sources_006 SELECT *, '{}', 0, 1, sha256 || '|' || format || '|{}' FROM sources;
DROP TABLE sources;
ALTER TABLE sources_006 RENAME TO sources;
"""

# Jobs are keyed by cluster: ids are CLUSTER:ID when the cluster is known (synestra_cli/query/clusters.py);
# this view splits them back for queries by cluster.
CLUSTERS = """
CREATE VIEW job_clusters AS
SELECT DISTINCT job_id,
       CASE WHEN contains(job_id, ':') THEN job_id[:strpos(job_id, ':') - 1] END AS cluster,
       CASE WHEN contains(job_id, ':') THEN job_id[strpos(job_id, ':') + 1:] ELSE job_id END AS slurm_job_id
FROM jobs;
"""

# (name, sql) in application order. Never edit a released migration: append a new one.
# The full names a host was seen under (an FQDN in syslog, dcgm-exporter's Hostname, ChildFailedError's host):
# every table keys a host by its short name (formats/hosts.py), this keeps what the source said.
HOST_NAMES = """
CREATE TABLE host_names (
    host      VARCHAR NOT NULL,   -- node1
    name      VARCHAR NOT NULL,   -- node1.cluster.local
    source_id INTEGER NOT NULL
);
"""

# A scrape that names no host still records its GPUs (UUID, model, PCI id): gpus.host may be NULL. Where the
# year of a source's yearless stamps came from (formats/years.py): sources dated by their mtime are no evidence
# for another's year.
YEARS_AND_HOSTLESS_GPUS = """
ALTER TABLE gpus ALTER COLUMN host DROP NOT NULL;
CREATE TABLE source_years (
    source_id INTEGER NOT NULL,
    basis     VARCHAR NOT NULL,   -- option | file | store | mtime
    year      INTEGER             -- the year the source starts in
);
"""

# Sources that wrote no telemetry have an empty summary: ingest listed them only when their batch also
# held metrics, so a store of logs ingested apart had every job of those hours read raw.
LIST_SOURCES_WITHOUT_TELEMETRY = """
INSERT OR IGNORE INTO summarised_sources
SELECT s.source_id FROM sources s ANTI JOIN (SELECT DISTINCT source_id FROM metrics) m USING (source_id);
"""

# Each job's tax accounting (buckets, interval advice, charges to causes) kept beside its explanation, under
# the same key (kept/taxes.py): a warm tax-report reads it instead of recomputing it. A cache, never a
# source.
KEPT_TAXES = """
CREATE TABLE kept_taxes (
    job_id    VARCHAR PRIMARY KEY,
    store_key VARCHAR NOT NULL,   -- the key of kept/explanations.py when it was computed
    doc       JSON                -- kept/taxes.py's document; NULL: the job has no attempt to account
);
"""

# What a job's log says about its life between failures (formats/training/joblog_rows.py): a framework initialised,
# built its model, entered its training loop, finished; torchrun started a worker group again. Restarts are
# measured in stages from these (explain/restarts.py). Their attempts map to sacct's as every job row does.
JOB_MARKS = """
CREATE TABLE job_marks (
    job_id       VARCHAR NOT NULL,
    attempt      INTEGER,
    ts           TIMESTAMP,
    ts_precision VARCHAR NOT NULL,
    kind         VARCHAR NOT NULL,    -- initialized | built | loop_start | training_done | worker_start
    iteration    BIGINT,              -- the step a mark names (torchtitan's "Training starts at step N")
    message      VARCHAR,
    source_id    INTEGER NOT NULL,
    line         BIGINT
);
CREATE VIEW job_marks_reconciled AS
SELECT k.* EXCLUDE (attempt), coalesce(m.attempt, k.attempt) AS attempt, k.attempt AS log_attempt
FROM job_marks k
LEFT JOIN attempt_map m ON m.job_id = k.job_id AND m.source_id = k.source_id
                       AND m.log_attempt = coalesce(k.attempt, 1);
"""

MIGRATIONS: list[tuple[str, str]] = [
    ("001_core", CORE),
    ("002_telemetry", TELEMETRY),
    ("003_jobs", JOBS),
    ("004_job_views", JOB_VIEWS),
    ("005_explanations", EXPLANATIONS),
    ("006_source_keys", SOURCE_KEYS),
    ("007_clusters", CLUSTERS),
    ("008_bounded_restores", BOUNDED_RESTORES),
    ("010_host_names", HOST_NAMES),
    ("012_metric_summaries", SUMMARY_DDL),  # store/summaries.py: per-series hourly summaries, backfilled
    ("017_years_and_hostless_gpus", YEARS_AND_HOSTLESS_GPUS),
    ("018_summaries_by_hour", SORT_SUMMARIES_SQL),  # store/summaries.py: a job's hours read, not the table
    ("019_list_sources_without_telemetry", LIST_SOURCES_WITHOUT_TELEMETRY),
    ("020_kept_taxes", KEPT_TAXES),
    ("021_host_summaries", HOST_SUMMARIES_SQL),  # store/summaries.py: a big job's hosts ruled out per host
    ("022_kubernetes", KUBE_VIEWS),  # store/kube_views.py: Kubernetes jobs' runs and attempts beside sacct's
    ("023_job_marks", JOB_MARKS + RESTORE_DURATIONS),
    ("024_series", ""),  # store/series.py: the series dictionary, samples in (series_id, ts) order (LONG below)
]
# Work a migration does in Python after its SQL, in the same transaction (a loop over the store's sources).
AFTER_SQL = {"012_metric_summaries": backfill_summaries, "018_summaries_by_hour": sort_summaries_by_hour}
# Migrations that run in transactions of their own (a rewrite of every sample, resumable after a kill: the
# last one records the migration), given the SQL that records it.
LONG = {"024_series": migrate_to_series}
RECORD_SQL = "INSERT INTO _migrations (name, applied_at) VALUES (?, current_localtimestamp())"


def applied(conn: duckdb.DuckDBPyConnection) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name VARCHAR PRIMARY KEY, applied_at TIMESTAMP)")
    return [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY name").fetchall()]


def apply_migrations(conn: duckdb.DuckDBPyConnection, upto: str | None = None, long: bool = True) -> list[str]:
    """Apply the migrations not yet recorded, each in its own transaction (`upto`: none after that one, a
    store as an older Synestra left it: the tests of what a migration does; `long` False: none from the
    first LONG one on, for a command that writes a few rows into a store it otherwise reads). Returns
    their names."""
    done = set(applied(conn))
    new = []
    for name, sql in MIGRATIONS:
        if (upto is not None and name > upto) or (not long and name in LONG and name not in done):
            break
        if name in done:
            continue
        try:
            if name in LONG:
                LONG[name](conn, functools.partial(_record, conn, name))
                new.append(name)
                continue
            with transaction(conn):
                conn.execute(sql)
                if name in AFTER_SQL:
                    AFTER_SQL[name](conn)
                conn.execute(RECORD_SQL, [name])
        except duckdb.Error as exc:
            raise MigrationFailed(name, exc) from exc
        new.append(name)
    return new


def _record(conn: duckdb.DuckDBPyConnection, name: str) -> None:
    conn.execute(RECORD_SQL, [name])


class MigrationFailed(Exception):
    """A migration that failed and was rolled back: the store keeps the schema it had before it."""

    def __init__(self, name: str, cause: duckdb.Error) -> None:
        super().__init__(f"migration {name}: {cause}")
        self.name, self.cause = name, cause
