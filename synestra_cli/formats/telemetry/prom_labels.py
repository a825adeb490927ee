"""Prometheus series -> Synestra rows: catalog mapping, host and entity from labels, DCGM quirks.

Shared by the exposition-text parser (prometheus.py) and the HTTP API JSON parser (prom_json.py).
A format module fills two relations (tables or views) and calls ``write_series``:

    prom_series(sid INTEGER, name VARCHAR, labels MAP(VARCHAR, VARCHAR))   -- one row per distinct series
    prom_samples(sid INTEGER, ms BIGINT[], vals DOUBLE[])   -- a series' samples: epoch ms (NULL: the
                                                            -- default time) and raw source values

Everything here runs once per distinct series (a few thousand rows), except the final insert, which
orders the series by (host, entity, metric) before unnesting them: rows land grouped by host, so the
zonemaps prune by host, without sorting a million rows.
"""

from __future__ import annotations

import re
from datetime import datetime

import duckdb

from synestra_cli.catalog import CANONICAL, CANONICAL_BY_NAME, SOURCE_MAP
from synestra_cli.formats.base import IngestOptions
from synestra_cli.formats.hosts import HOST_NAMES_INSERT, full_names_select_sql, short_host_sql
from synestra_cli.store.sql import drop_temp, has_table, one_row, scalar, temp_table

# Labels that name the host, the entity or the GPU's identity. Any other label of a metric that is not in
# the catalog is appended to its entity (`gpu0{xid="42"}`) so that series differing only by it stay apart.
# dcgm-exporter's attribute labels (`DCGM_FI_DRIVER_VERSION`, `DCGM_FI_PROCESS_NAME`, `DCGM_FI_DEV_BRAND`,
# `DCGM_FI_DEV_SERIAL`, `DCGM_FI_DEV_NAME`, ...: any label named `DCGM_FI_*`) describe the GPU, not a series of
# it: they are never appended either (see ATTRIBUTE_LABEL_PREFIX).
ATTRIBUTE_LABEL_PREFIX = "DCGM_FI_"
IDENTITY_LABELS = [
    "__name__",
    "Hostname",
    "hostname",
    "instance",
    "gpu",
    "UUID",
    "uuid",
    "gpu_uuid",
    "pci_bus_id",
    "device",
    "modelName",
    "model_name",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "DCGM_FI_DRIVER_VERSION",
    "container",
    "namespace",
    "pod",
    "nvlink",
    "nvswitch",
    "ifName",
    "ifIndex",
    "ifDescr",
    "ifAlias",
    "port",
]

# DCGM clocks-event (throttle) reason bits (dcgm_fields.h DCGM_CLOCKS_EVENT_REASON_*, 1:1 with NVML), named
# as dcgm-exporter names them in the clock_event label of DCGM_EXP_CLOCK_EVENTS_COUNT.
CLOCK_EVENT_BITS: list[tuple[int, str]] = [
    (0x001, "gpu_idle"),
    (0x002, "clocks_setting"),
    (0x004, "power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal"),
    (0x040, "hw_thermal"),
    (0x080, "hw_power_brake"),
    (0x100, "display_clocks"),
]

# DCGM blanks (dcgm_structs.h): int64 0x7ffffffffffffff0..3 (all print as ~2^63 once read as a double)
# and fp64 2^47..2^47+3; DCGM_FP64_IS_BLANK is v >= 2^47, applied to gauges where larger is meaningless.
DCGM_BLANK_MACRO = """
CREATE OR REPLACE TEMP MACRO dcgm_blank(v, kind) AS
    NOT isnan(v) AND (v >= 9.223372036854775e18
                      OR (v >= 140737488355328.0 AND (v <= 140737488355331.0 OR kind <> 'counter')))
"""

# host:port, [v6]:port -> host
STRIP_PORT_MACRO = """
CREATE OR REPLACE TEMP MACRO prom_strip_port(s) AS
    CASE WHEN s LIKE '[%]%' THEN regexp_extract(s, '^\\[([^\\]]*)\\]', 1)
         WHEN length(s) - length(replace(s, ':', '')) = 1 THEN split_part(s, ':', 1)
         ELSE s END
"""

# 0000:9b:00.0, 9B:00.0, 00000000:9B:00.0 -> 00000000:9B:00.0 (the DCGM/NVML form the Xid events use).
PCI_MACRO = """
CREATE OR REPLACE TEMP MACRO prom_pci_bus_id(p) AS
    CASE WHEN regexp_full_match(p, '(?i)([0-9a-f]{1,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]')
         THEN upper(lpad(CASE WHEN p LIKE '%:%:%' THEN split_part(p, ':', 1) ELSE '0' END, 8, '0')
                    || ':' || split_part(p, ':', -2) || ':' || split_part(p, ':', -1))
    END
"""

RESOLVE_SQL = """
CREATE OR REPLACE TEMP TABLE prom_resolved AS
WITH s AS (
    SELECT sid, name, labels, m.metric AS canonical, m.scale, m.kind,
           coalesce(labels['Hostname'], labels['hostname'], prom_strip_port(labels['instance']), $host, u.host)
               AS full_host,
           CASE WHEN coalesce(labels['Hostname'], labels['hostname'], prom_strip_port(labels['instance']), $host)
                     IS NULL AND u.host IS NOT NULL THEN u.source_id END AS host_from_source,
           CASE
               WHEN labels['gpu'] IS NOT NULL THEN 'gpu' || labels['gpu']
                   || coalesce('/gi' || labels['GPU_I_ID'], '') || coalesce('/nvlink' || labels['nvlink'], '')
               WHEN labels['nvswitch'] IS NOT NULL
                   THEN 'nvswitch' || labels['nvswitch'] || coalesce('/nvlink' || labels['nvlink'], '')
               WHEN coalesce(labels['ifName'], '') <> '' THEN labels['ifName']
               WHEN labels['ifIndex'] IS NOT NULL THEN labels['ifIndex']
               WHEN labels['device'] IS NOT NULL THEN labels['device']
                   || CASE WHEN coalesce(labels['port'], '1') = '1' THEN '' ELSE ':' || labels['port'] END
           END AS base_entity,
           list_sort(list_transform(
               -- an empty value is no label at all (Prometheus: `pod=""` is the series without `pod`)
               list_filter(map_entries(labels), lambda e: NOT list_contains($identity, e.key) AND e.value <> ''
                                                         AND NOT starts_with(e.key, $attribute_prefix)),
               lambda e: e.key || '="' || e.value || '"')) AS residual
    FROM prom_series LEFT JOIN prom_source_map m ON m.source = prom_series.name
    LEFT JOIN prom_uuid_hosts u ON u.uuid = coalesce(labels['UUID'], labels['gpu_uuid'], labels['uuid'])
),
r AS (
    SELECT sid, name, labels, {short} AS host, full_host, host_from_source, scale, kind,
           (name LIKE 'DCGM\\_%' ESCAPE '\\' OR name LIKE 'dcgm\\_%' ESCAPE '\\') AS is_dcgm,
           coalesce(canonical, name) AS metric,
           CASE WHEN canonical IS NOT NULL OR len(residual) = 0 THEN base_entity
                ELSE coalesce(base_entity, '') || '{' || array_to_string(residual, ',') || '}' END AS entity
    FROM s
)
SELECT *, row_number() OVER (ORDER BY host, entity, metric) AS ord FROM r
""".replace("{short}", short_host_sql("full_host"))

METRICS_INSERT = "INSERT INTO metrics (ts, host, entity, metric, value, source_id) "
METRICS_SELECT_SQL = """
SELECT coalesce(epoch_ms(ms), $default_ts), host, entity, metric,
       CASE WHEN is_dcgm AND dcgm_blank(value, kind) THEN NULL ELSE value * coalesce(scale, 1.0) END, $sid
FROM (SELECT r.host, r.entity, r.metric, r.is_dcgm, r.kind, r.scale, unnest(p.vals) AS value, unnest(p.ms) AS ms
      FROM prom_samples p JOIN prom_resolved r USING (sid)
      ORDER BY r.ord)
"""

GPUS_INSERT = "INSERT INTO gpus (host, entity, pci_bus_id, uuid, model, source_id) "
GPUS_SELECT_SQL = """
SELECT host, gpu, max(pci), max(uuid), max(model), $sid
FROM (SELECT host, 'gpu' || labels['gpu'] AS gpu, prom_pci_bus_id(labels['pci_bus_id']) AS pci,
             coalesce(labels['UUID'], labels['gpu_uuid'], labels['uuid']) AS uuid,
             coalesce(labels['modelName'], labels['model_name'], labels['DCGM_FI_DEV_NAME']) AS model
      FROM prom_resolved WHERE is_dcgm AND labels['gpu'] IS NOT NULL)
GROUP BY host, gpu
ORDER BY host, gpu
"""
# A GPU's UUID is its identity anywhere (NVML): a scrape that names no host (a raw `curl :9400/metrics`, the
# pre-2.0 exporter) takes the host another source of the store gives the same UUID (a scrape with Hostname,
# --host), when exactly one host has it. Sources ingested later do not re-date earlier ones: ingest the
# host-labelled sources first, or pass --host.
UUID_HOSTS_SQL = """
CREATE OR REPLACE TEMP TABLE prom_uuid_hosts AS
SELECT uuid, min(host) AS host, min(source_id) AS source_id FROM {evidence}gpus
WHERE uuid IS NOT NULL AND host IS NOT NULL AND source_id <> $sid
GROUP BY uuid HAVING count(DISTINCT host) = 1
"""

CATALOG_INSERT = "INSERT INTO metric_catalog (metric, unit, kind, description) "
CATALOG_SELECT_SQL = """
SELECT c.metric, c.unit, c.kind, c.description
FROM prom_catalog c WHERE c.metric IN (SELECT metric FROM prom_resolved)
"""

LOOKUP_TABLES = ("prom_source_map", "prom_catalog")  # what create_lookups makes; its callers drop them


def clock_event_macro_sql() -> str:
    """SQL defining clock_event_names(bitmask) -> VARCHAR[] (e.g. 96 -> [sw_thermal, hw_thermal])."""
    bits = ", ".join(f"{{'bit': {bit}, 'name': '{name}'}}" for bit, name in CLOCK_EVENT_BITS)
    return (
        f"CREATE OR REPLACE TEMP MACRO clock_event_names(b) AS list_transform(list_filter([{bits}], "
        f"lambda x: (CAST(b AS UBIGINT) & x.bit) <> 0), lambda x: x.name)"
    )


def install_macros(conn: duckdb.DuckDBPyConnection) -> None:
    """Session macros the Prometheus parsers use; clock_event_names is also for explain and runbooks."""
    for sql in (DCGM_BLANK_MACRO, STRIP_PORT_MACRO, PCI_MACRO, clock_event_macro_sql()):
        conn.execute(sql)


def create_lookups(conn: duckdb.DuckDBPyConnection) -> None:
    """Temp tables prom_source_map(source, metric, scale, kind) and prom_catalog (CANONICAL)."""
    names = list(SOURCE_MAP)
    temp_table(
        conn,
        "prom_source_map",
        {
            "source": ("VARCHAR", names),
            "metric": ("VARCHAR", [SOURCE_MAP[n][0] for n in names]),
            "scale": ("DOUBLE", [float(SOURCE_MAP[n][1]) for n in names]),
            "kind": ("VARCHAR", [CANONICAL_BY_NAME[SOURCE_MAP[n][0]].kind for n in names]),
        },
    )
    temp_table(
        conn,
        "prom_catalog",
        {
            "metric": ("VARCHAR", [m.name for m in CANONICAL]),
            "unit": ("VARCHAR", [m.unit for m in CANONICAL]),
            "kind": ("VARCHAR", [m.kind for m in CANONICAL]),
            "description": ("VARCHAR", [m.description for m in CANONICAL]),
        },
    )


# A label that names the host (RESOLVE_SQL), as exposition text (`Hostname="n1"`) or API JSON (`"instance":`) writes it.
HOST_LABEL_RE = re.compile(r'\b(?:Hostname|hostname|instance)"?\s*[=:]')


def may_lack_a_host(head: str, options: IngestOptions) -> bool:
    """No --host, and no label naming a host in the head: series may take their host from other files'
    GPUs (UUID_HOSTS_SQL), which ingest then lets in first (formats/base.py Format.leans_on_others)."""
    return not options.host and HOST_LABEL_RE.search(head) is None


HOSTLESS_SQL = """
SELECT count(DISTINCT labels['gpu']) FILTER (WHERE is_dcgm AND labels['gpu'] IS NOT NULL), count(*)
FROM prom_resolved WHERE host IS NULL
"""
BY_UUID_SQL = """
SELECT r.host, count(DISTINCT r.labels['gpu']), coalesce(min(s.path), '#' || min(r.host_from_source))
FROM prom_resolved r LEFT JOIN {evidence}sources s ON s.source_id = r.host_from_source
WHERE r.host_from_source IS NOT NULL GROUP BY r.host ORDER BY r.host
"""


def host_notes(conn: duckdb.DuckDBPyConnection, evidence: str = "") -> list[str]:
    """What the report says of series that named no host: taken from the same GPU's UUID elsewhere in the
    store, or left without one (metric rows without a host; the GPUs kept by UUID, model and PCI id)."""
    notes = [
        f"no host label: host {host} taken from the UUID of its {n} GPU(s), which {path} names on that host"
        for host, n, path in conn.execute(BY_UUID_SQL.format(evidence=evidence)).fetchall()
    ]
    gpus, hostless = one_row(conn, HOSTLESS_SQL)
    if hostless:
        kept = f", and {gpus} GPU(s) kept by UUID, model and PCI id without a host" if gpus else ""
        notes.append(
            f"no host: {hostless} series carry no Hostname, hostname or instance label and no source of the store "
            f"names their GPU's UUID (their rows have no host{kept}): pass --host"
        )
    return notes


def write_series(
    conn: duckdb.DuckDBPyConnection,
    source_id: int,
    host: str | None,
    default_ts: datetime,
    notes: list[str] | None = None,
    evidence: str = "",
) -> int:
    """Map prom_series/prom_samples into metrics, gpus and metric_catalog; returns the metric rows written.

    host: for series without a host label (--host); default_ts: for samples without a timestamp; notes: where
    to say that series named no host; evidence: where the store's gpus and sources are seen from the file
    (LoadContext.evidence).
    """
    begin_series(conn, source_id, evidence)
    rows = write_batch(conn, source_id, host, default_ts)
    finish_series(conn, source_id, notes, evidence)
    return rows


# A file read in batches (formats/telemetry/prom_json.py) maps each batch on a scratch connection `work` (autocommit:
# what a batch replaces is freed at once, where the file's transaction would keep every batch's tables until
# COMMIT) and writes only its rows through `conn`, the file's transaction, streamed as Arrow batches. With
# `work` None (one batch: the exposition text) everything runs on `conn`.


def begin_series(conn: duckdb.DuckDBPyConnection, source_id: int, evidence: str = "") -> None:
    """What write_batch needs, once per file (on the connection that maps the batches)."""
    install_macros(conn)
    create_lookups(conn)
    conn.execute(UUID_HOSTS_SQL.format(evidence=evidence), {"sid": source_id})
    conn.execute(RESOLVED_ALL_DROP)


def write_batch(
    conn: duckdb.DuckDBPyConnection,
    source_id: int,
    host: str | None,
    default_ts: datetime,
    work: duckdb.DuckDBPyConnection | None = None,
) -> int:
    """The samples of the series in prom_series/prom_samples (on `work`) into metrics (through `conn`); their
    series are kept for finish_series (so sids must be unique across a file's batches). Returns the rows."""
    work = work or conn
    work.execute(RESOLVE_SQL, {"host": host, "identity": IDENTITY_LABELS, "attribute_prefix": ATTRIBUTE_LABEL_PREFIX})
    rows = _write(conn, work, METRICS_INSERT, METRICS_SELECT_SQL, {"sid": source_id, "default_ts": default_ts})
    work.execute(RESOLVED_ALL_APPEND)
    return rows


def finish_series(
    conn: duckdb.DuckDBPyConnection,
    source_id: int,
    notes: list[str] | None = None,
    evidence: str = "",
    work: duckdb.DuckDBPyConnection | None = None,
) -> None:
    """Once per file, over every batch's series: the notes on hosts, the GPUs, the host names, the catalog."""
    work = work or conn
    if not has_table(work, "prom_resolved_all", temporary=True):  # no batch held a series (`"result": []`)
        drop_temp(work, ("prom_uuid_hosts", *LOOKUP_TABLES))
        return
    work.execute("CREATE OR REPLACE TEMP TABLE prom_resolved AS SELECT * FROM prom_resolved_all")
    if notes is not None:
        notes += host_notes(work, evidence)
    _write(conn, work, GPUS_INSERT, GPUS_SELECT_SQL, {"sid": source_id})
    _write(conn, work, HOST_NAMES_INSERT, full_names_select_sql("prom_resolved", "full_host"), {"sid": source_id})
    _write(conn, work, CATALOG_INSERT, CATALOG_SELECT_SQL, None, "ON CONFLICT DO NOTHING")
    drop_temp(work, ("prom_resolved", "prom_resolved_all", "prom_uuid_hosts", *LOOKUP_TABLES))


STREAM_ROWS = 1 << 17  # rows per Arrow batch from the scratch connection into the file's transaction


def _write(
    conn: duckdb.DuckDBPyConnection,
    work: duckdb.DuckDBPyConnection,
    insert: str,
    select: str,
    params: dict[str, object] | None,
    tail: str = "",
) -> int:
    """INSERT `insert` the rows of `select`: one statement on one connection, else computed on `work` and
    streamed into `conn` (DuckDB reads the local reader by its name: a replacement scan, never a registered
    view, which the file's transaction would keep until COMMIT). Returns the rows inserted."""
    if work is conn:
        return int(scalar(conn, f"{insert}{select} {tail}", params))
    work.complete()  # a relation streams only once the last execute() result is done
    _prom_rows = work.sql(select, params=params).to_arrow_reader(STREAM_ROWS)  # noqa: F841
    # executed here, not through a helper: the replacement scan looks for `_prom_rows` in the caller's frame
    row = conn.execute(f"{insert}SELECT * FROM _prom_rows {tail}").fetchone()
    return int(row[0]) if row else 0


# Every batch's resolved series (one row per series, no samples: small), for finish_series.
RESOLVED_ALL_DROP = "DROP TABLE IF EXISTS prom_resolved_all"
RESOLVED_ALL_APPEND = """
CREATE TEMP TABLE IF NOT EXISTS prom_resolved_all AS SELECT * FROM prom_resolved LIMIT 0;
INSERT INTO prom_resolved_all SELECT * FROM prom_resolved
"""
