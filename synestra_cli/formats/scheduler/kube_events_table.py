"""`kubectl get events` as a table: the default columns, `-A` (NAMESPACE first), `-o wide`, and the old
(kubectl before 1.14) FIRSTSEEN / LASTSEEN / COUNT / NAME / KIND / SUBOBJECT layout.

kubectl's tabwriter pads every column to the widest cell, so the header's column starts cut every row
(MESSAGE, with its blanks, runs to the next column or the end). `LAST SEEN` is an age (`68s`, `3m33s`,
`21m`, `5h2m`, `3d`: apimachinery's duration.HumanDuration) counted back from when the command ran, which the
output does not say: it is taken as the file's modification time (as a syslog's year is), so the times
are as good as that and as the age's rounding (a `21m` is 21 to 22 minutes); each row says so in its fields
(`age`, `approx_s`). The old layout prints absolute RFC 1123 times and needs neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synestra_cli.errors import InputError
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.hosts import short_host_sql
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.store.sql import drop_temp, scalar

NEW_HEADER = re.compile(r"^(?:NAMESPACE +)?LAST SEEN +TYPE +REASON +OBJECT +(?:SUBOBJECT +SOURCE +)?MESSAGE\b")
OLD_HEADER = re.compile(r"^(?:NAMESPACE +)?FIRSTSEEN +LASTSEEN +COUNT +NAME +KIND +SUBOBJECT +(?:TYPE +)?REASON +")
COLUMNS = re.compile(r"\S+(?: \S+)*")  # a header cell: words separated by one blank (`LAST SEEN`, `FIRST SEEN`)

# An age as HumanDuration prints it -> seconds, and the unit it was rounded to (its uncertainty).
MACROS_SQL = r"""
CREATE OR REPLACE TEMP MACRO _kube_age(a) AS (
    WITH x AS (SELECT regexp_extract(a, '^(?:(\d+)y)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$',
                                     ['y', 'd', 'h', 'm', 's']) AS p)
    SELECT CASE WHEN a ~ '^(\d+[ydhms])+$' THEN
        coalesce(try_cast(nullif(p.y, '') AS BIGINT), 0) * 31536000
        + coalesce(try_cast(nullif(p.d, '') AS BIGINT), 0) * 86400
        + coalesce(try_cast(nullif(p.h, '') AS BIGINT), 0) * 3600
        + coalesce(try_cast(nullif(p.m, '') AS BIGINT), 0) * 60
        + coalesce(try_cast(nullif(p.s, '') AS BIGINT), 0) END FROM x)
"""
UNIT_SQL = "CASE WHEN a LIKE '%s' THEN 1 WHEN a LIKE '%m' THEN 60 WHEN a LIKE '%h' THEN 3600 ELSE 86400 END"

PARSE_SQL = """
INSERT INTO _kube_table
WITH c AS (
    SELECT lineno, line, list_transform($starts, lambda s, i: trim(CASE WHEN i = len($starts) THEN substr(line, s)
                                              ELSE substr(line, s, $starts[i + 1] - s) END)) AS f
    FROM kube_table_lines WHERE lineno > $header_line AND trim(line) <> ''
), v AS (
    SELECT lineno, line, f[$c_ns] AS ns, f[$c_last] AS last_seen, f[$c_first] AS first_seen, f[$c_type] AS typ,
           f[$c_reason] AS reason, f[$c_object] AS obj, f[$c_name] AS name, f[$c_kind] AS okind,
           f[$c_source] AS src, f[$c_message] AS message, try_cast(f[$c_count] AS INTEGER) AS n
    FROM c
), t AS (
    SELECT *,
        CASE WHEN $old THEN try_strptime(leap_second(first_seen),
                                         ['%a, %d %b %Y %H:%M:%S %z', '%a, %d %b %Y %H:%M:%S.%f %z'])::TIMESTAMP
             ELSE $taken - to_seconds(coalesce(_kube_age(first_seen), _kube_age(last_seen))) END AS ts,
        CASE WHEN $old THEN 0 ELSE {unit} END AS approx_s,
        coalesce(nullif(okind, ''), split_part(obj, '/', 1)) AS object_kind,
        coalesce(nullif(name, ''), nullif(split_part(obj, '/', 2), ''), obj) AS object
    FROM (SELECT *, coalesce(first_seen, last_seen) AS a FROM v)
), placed AS (
    SELECT *, CASE WHEN lower(object_kind) = 'node' THEN object
                   ELSE coalesce(nullif(regexp_extract(src, '^\\{{?\\S+[ ,]+(\\S+?)\\}}?$', 1), ''),
                                 nullif(regexp_extract(message, ' on node (\\S+?)\\.?$', 1), ''),
                                 nullif(regexp_extract(message, '^Successfully assigned \\S+ to (\\S+)$', 1), ''))
              END AS node
    FROM t
)
SELECT lineno, line, ts, {short_host} AS host,
       CASE WHEN ts IS NULL THEN 'unreadable time ' || coalesce(a, '') END AS reject,
       CASE WHEN reason = 'NodeNotReady' AND lower(object_kind) = 'node' THEN 'node_not_ready'
            WHEN reason = 'OOMKilling' THEN 'oom_kill' ELSE 'k8s_event' END AS kind,
       CASE typ WHEN 'Warning' THEN 'warning' WHEN 'Normal' THEN 'info' END AS severity,
       concat_ws(' ', reason, object_kind || '/' || object || ':', message) AS message,
       json_object('reason', reason, 'type', typ, 'count', coalesce(n, 1), 'object_kind', object_kind,
                   'object', object, 'namespace', ns, 'node', node, 'age', a, 'approx_s', approx_s) AS fields
FROM placed
"""

CREATE_SQL = """
CREATE OR REPLACE TEMP TABLE _kube_table (lineno BIGINT, line VARCHAR, ts TIMESTAMP, host VARCHAR, reject VARCHAR,
    kind VARCHAR, severity VARCHAR, message VARCHAR, fields JSON)
"""
INSERT_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
SELECT ts, host, NULL, kind, NULL, severity, message, fields, $sid, lineno FROM _kube_table WHERE reject IS NULL
ORDER BY host, ts, lineno
"""
REJECT_COUNT_SQL = "SELECT count(*) FROM _kube_table WHERE reject IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT lineno, reject, line FROM _kube_table WHERE reject IS NOT NULL ORDER BY lineno LIMIT 20"


@dataclass(frozen=True)
class Layout:
    header_line: int
    starts: list[int]  # 1-based column starts
    names: list[str]
    old: bool


def _layout(head: str) -> Layout | None:
    for i, line in enumerate(head.splitlines()[:20]):
        old = OLD_HEADER.match(line)
        if old or NEW_HEADER.match(line):
            cells = list(COLUMNS.finditer(line.rstrip()))
            return Layout(i + 1, [m.start() + 1 for m in cells], [m.group(0) for m in cells], bool(old))
    return None


def sniff(head: str) -> float:
    return 0.95 if _layout(head) else 0.0


def _params(layout: Layout, ctx: LoadContext) -> dict[str, object]:
    index = {name: i for i, name in enumerate(layout.names, start=1)}
    col = {
        "c_ns": "NAMESPACE",
        "c_last": "LASTSEEN" if layout.old else "LAST SEEN",
        "c_first": "FIRSTSEEN" if layout.old else "FIRST SEEN",
        "c_type": "TYPE",
        "c_reason": "REASON",
        "c_object": "OBJECT",
        "c_name": "NAME",
        "c_kind": "KIND",
        "c_source": "SOURCE",
        "c_message": "MESSAGE",
        "c_count": "COUNT",
    }
    params: dict[str, object] = {k: index.get(v, 0) for k, v in col.items()}
    params.update(header_line=layout.header_line, starts=layout.starts, old=layout.old, taken=ctx.mtime)
    return params


def load(ctx: LoadContext) -> LoadResult:
    layout = _layout(decode(read_head(ctx.path)))
    if layout is None:
        raise InputError(f"{ctx.display}: no `kubectl get events` header (LAST SEEN  TYPE  REASON  OBJECT  MESSAGE)")
    conn = ctx.conn
    conn.execute(MACROS_SQL)
    conn.execute(CREATE_SQL)
    sql = PARSE_SQL.format(unit=UNIT_SQL, short_host=short_host_sql("node"))
    params = _params(layout, ctx)
    for batch in ctx.line_batches():
        kube_table_lines = batch  # noqa: F841 - DuckDB's replacement scan
        conn.execute(sql, params)
    result = LoadResult()
    conn.execute(INSERT_SQL, {"sid": ctx.source_id})
    result.rejects_from(conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    result.rows = scalar(conn, "SELECT count(*) FROM events WHERE source_id = $sid", {"sid": ctx.source_id})
    if not layout.old:
        result.notes.append(
            f"{ctx.display}: LAST SEEN is an age: times counted back from the file's modification time "
            f"({ctx.mtime:%Y-%m-%d %H:%M:%S}Z), to the age's unit; save events with -o json for exact times"
        )
    drop_temp(conn, ["_kube_table"])
    return result


FORMAT = Format(
    "kube_events_table",
    "kubectl get events (-A, -o wide, the old FIRSTSEEN layout) as a table",
    sniff,
    load,
    writes=frozenset({"events"}),
    top=0.95,
    priority=0,
)
