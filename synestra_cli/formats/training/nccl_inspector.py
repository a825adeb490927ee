"""NCCL Inspector (nccl plugins/profiler/inspector, formerly ext-profiler/inspector): per-collective JSON.

Each record is one completed collective (or p2p op) of one rank's communicator: `header` {id (the
communicator's hash), comm_name, rank, n_ranks, nnodes}, `metadata` {inspector_output_format_version,
dump_timestamp_us, hostname, pid}, and `coll_perf` {coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us,
coll_timing_source, coll_algobw_gbs, coll_busbw_gbs, with NCCL_INSPECTOR_DUMP_VERBOSE=1 `event_trace_ts`
{coll_start_ts, coll_stop_ts}} or `p2p_perf` (the same with `p2p_`). The plugin writes one compact object
per line (inspector_json.cc); its README prints them indented: both are read.

The records become `metrics` of the host the record names (shortened as every source's), entity
`rank<r>{comm="<id or name>",coll="<AllReduce>"}` (one series per rank, communicator and collective type):
at each time, the collectives' mean `nccl_coll_busbw_gbs`, `nccl_coll_algobw_gbs`, `nccl_coll_exec_time_us`,
`nccl_coll_msg_size_bytes` and their `nccl_coll_count`. The time is the collective's end when the record
carries its trace (`coll_stop_ts`), else the dump's (`dump_timestamp_us`: every collective of a dump shares it,
hence the mean). A rank whose bus bandwidth falls behind its peers' in the same communicator is slower.
"""

from __future__ import annotations

from synestra_cli.errors import InputError
from synestra_cli.formats import staged
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.hosts import short_host_sql
from synestra_cli.store.sql import drop_temp

STAGE_SQL = """
CREATE OR REPLACE TEMP TABLE _insp AS
SELECT lineno, line, json_valid(line) AS ok,
       CASE WHEN NOT json_valid(line) THEN 'not a JSON record of NCCL Inspector' END AS reason
FROM _insp_lines WHERE trim(line) <> ''
"""
WHOLE_SQL = """
CREATE OR REPLACE TEMP TABLE _insp_docs AS
SELECT NULL::BIGINT AS lineno, json AS doc FROM read_json_objects($path, format = 'unstructured')
"""
METRICS_SQL = f"""
CREATE OR REPLACE TEMP TABLE _insp_metrics AS
WITH r AS (
    SELECT coalesce(doc->'coll_perf', doc->'p2p_perf') AS perf,
           doc->'header' AS h, doc->'metadata' AS m
    FROM _insp_docs
), v AS (
    SELECT m->>'hostname' AS hostname,
           'rank' || (h->>'rank') || '{{comm="' || coalesce(nullif(h->>'comm_name', 'unknown'), h->>'id') || '",coll="'
               || coalesce(perf->>'coll', perf->>'p2p') || '"}}' AS entity,
           make_timestamp(coalesce(TRY_CAST(perf->'event_trace_ts'->>'coll_stop_ts' AS BIGINT),
                                   TRY_CAST(perf->'event_trace_ts'->>'p2p_stop_ts' AS BIGINT),
                                   TRY_CAST(m->>'dump_timestamp_us' AS BIGINT))) AS ts,
           TRY_CAST(coalesce(perf->>'coll_busbw_gbs', perf->>'p2p_busbw_gbs') AS DOUBLE) AS busbw,
           TRY_CAST(coalesce(perf->>'coll_algobw_gbs', perf->>'p2p_algobw_gbs') AS DOUBLE) AS algobw,
           TRY_CAST(coalesce(perf->>'coll_exec_time_us', perf->>'p2p_exec_time_us') AS DOUBLE) AS exec_us,
           TRY_CAST(coalesce(perf->>'coll_msg_size_bytes', perf->>'p2p_msg_size_bytes') AS DOUBLE) AS bytes
    FROM r WHERE perf IS NOT NULL AND h->>'rank' IS NOT NULL
), g AS (
    SELECT ts, {short_host_sql("hostname")} AS host, entity, avg(busbw) AS busbw, avg(algobw) AS algobw,
           avg(exec_us) AS exec_us, avg(bytes) AS bytes, count(*)::DOUBLE AS n
    FROM v WHERE ts IS NOT NULL GROUP BY ALL
)
SELECT ts, host, entity, metric, value FROM g
UNPIVOT (value FOR metric IN (busbw AS 'nccl_coll_busbw_gbs', algobw AS 'nccl_coll_algobw_gbs',
                              exec_us AS 'nccl_coll_exec_time_us', bytes AS 'nccl_coll_msg_size_bytes',
                              n AS 'nccl_coll_count'))
"""
TEMP_TABLES = ("_insp_lines", "_insp", "_insp_docs", "_insp_metrics")


def sniff(head: str) -> float:
    body = head.lstrip()
    records = '"coll_perf"' in body or '"p2p_perf"' in body
    return 0.95 if body.startswith("{") and records and '"header"' in body and '"dump_timestamp_us"' in body else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    conn = ctx.conn
    staged.stage_lines(ctx, "_insp_lines")
    conn.execute(STAGE_SQL)
    one_per_line = conn.execute("SELECT bool_and(ok) OR count(*) FILTER (WHERE ok) > count(*) / 2 FROM _insp")
    if (one_per_line.fetchone() or (False,))[0]:
        # the plugin's own files: one object a line, a bad line is counted with its number
        conn.execute("CREATE OR REPLACE TEMP TABLE _insp_docs AS SELECT lineno, line::JSON AS doc FROM _insp WHERE ok")
        staged.rejects(ctx, result, "_insp")
    else:
        try:
            conn.execute(WHOLE_SQL, {"path": str(ctx.path)})
        except Exception as exc:  # DuckDB's JSON reader: a broken indented document is one error
            raise InputError(f"{ctx.display}: not NCCL Inspector JSON records ({exc})") from exc
    conn.execute(METRICS_SQL)
    result.rows = staged.write_metrics(ctx, "_insp_metrics")
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "nccl_inspector",
    "NCCL Inspector per-collective JSON (bus / algorithm bandwidth, execution time per rank and communicator)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.95,
    priority=0,
)
