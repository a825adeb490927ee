"""`ibswinfo` (stanford-rc/ibswinfo): vitals of unmanaged NVIDIA InfiniBand switches, read through MFT.

Default output: the node description between `=====` rules, then `key | value` lines: inventory (part and
serial number, PSID, GUID, firmware), `uptime (d-h:m:s)`, each `PSUn status` with its indented `P/N`, `S/N`,
`DC power`, `fan status`, `power (W)`, `temperature (C)`, `max temp (C)`, `fan status` and `fan#N (rpm)`.
`-o vitals` / `-o status` print `key : value` lines (`psu0.power (W)`, `cur.temp (C)`, `QSFP#01.temp (C)`,
`fan#1.speed (rpm)`, `psu0.dc`). A PSU that lost power prints its status lines but no `power (W)`.

Samples (`metrics`, host --host, else the switch's GUID): `ibswinfo_temp_celsius`,
`ibswinfo_max_temp_celsius`, `ibswinfo_uptime_seconds` on entity `switch`; `ibswinfo_psu_power_watts` on
`psu<N>`; `ibswinfo_fan_rpm` on `fan<N>`; a module's temperature (`-T`) as `optics_temp_celsius` on its port
number. Events: the switch's identity (`switch_identity`: part / serial number, PSID, GUID, firmware), and
each status that is not `OK` (`switch_hw_fault`, severity err: a PSU's DC power, a fan).
"""

from __future__ import annotations

import re

from synestra_cli.formats import staged
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.formats.snapshot import snapshot_time
from synestra_cli.store.sql import drop_temp

KEY_VALUE = re.compile(
    r"^\s*(?:part number|serial number|PSID|GUID|firmware version|uptime \(|fan#\d+|psu\d)", re.MULTILINE
)
PARSE_SQL = r"""
CREATE OR REPLACE TEMP TABLE _ibsw AS
WITH l AS (
    SELECT lineno, line,
           regexp_extract(line, '^(\s*)(\S.*?)\s+(\||:)(?:\s+(.*?))?\s*$', ['ind', 'key', 'sep', 'value']) AS kv
    FROM _ibsw_lines
), k AS (
    SELECT lineno, line, CASE WHEN kv.key <> '' THEN kv.key END AS key, kv.value AS value, kv.ind <> '' AS indented,
           regexp_matches(line, '^\s*[=-]{10,}\s*$') AS rule
    FROM l
), c AS (
    SELECT *, last_value(CASE WHEN NOT indented THEN regexp_extract(key, '^PSU(\d+) status$', 1) END
                         IGNORE NULLS) OVER (ORDER BY lineno ROWS UNBOUNDED PRECEDING) AS psu_ctx,
           lag(rule) OVER (ORDER BY lineno) AND lead(rule) OVER (ORDER BY lineno) AND key IS NULL
               AND trim(line) <> '' AS is_name
    FROM k
)
SELECT lineno, line, key, value, is_name,
       -- the PSU a line speaks of: `psu0.power (W)`, or an indented line under `PSU0 status`
       coalesce(nullif(regexp_extract(key, '^psu(\d+)\.', 1), ''), CASE WHEN indented THEN psu_ctx END,
                nullif(regexp_extract(key, '^PSU(\d+) status$', 1), '')) AS psu,
       CASE WHEN trim(line) = '' OR rule OR is_name OR key IS NOT NULL THEN NULL
            ELSE 'not an ibswinfo `key | value` (or `key : value`) line' END AS reason
FROM c;

CREATE OR REPLACE TEMP TABLE _ibsw_metrics AS
WITH v AS (
    SELECT lineno, key, psu, value, TRY_CAST(regexp_extract(value, '^(-?[0-9.]+)$', 1) AS DOUBLE) AS number,
           regexp_extract(value, '^(\d+)d-(\d+):(\d+):(\d+)$', ['d', 'h', 'm', 's']) AS up
    FROM _ibsw WHERE key IS NOT NULL
)
SELECT $ts AS ts, $host AS host,
       CASE WHEN key ~ '^fan#\d+' THEN 'fan' || regexp_extract(key, '^fan#(\d+)', 1)
            WHEN key ~ '^QSFP#\d+' THEN regexp_extract(key, '^QSFP#(\d+)', 1)::INTEGER::VARCHAR
            WHEN psu IS NOT NULL THEN 'psu' || psu ELSE 'switch' END AS entity,
       CASE WHEN key IN ('temperature (C)', 'cur.temp (C)') THEN 'ibswinfo_temp_celsius'
            WHEN key IN ('max temp (C)', 'max.temp (C)') THEN 'ibswinfo_max_temp_celsius'
            WHEN key ~ '^fan#\d+' THEN 'ibswinfo_fan_rpm'
            WHEN key ~ '^QSFP#\d+\.temp' THEN 'optics_temp_celsius'
            WHEN key ~ 'power \(W\)$' THEN 'ibswinfo_psu_power_watts'
            WHEN key ~ '^uptime' THEN 'ibswinfo_uptime_seconds' END AS metric,
       CASE WHEN key = 'uptime (d-h:m:s)'
            THEN TRY_CAST(up.d AS DOUBLE) * 86400 + TRY_CAST(up.h AS DOUBLE) * 3600 + TRY_CAST(up.m AS DOUBLE) * 60
                 + TRY_CAST(up.s AS DOUBLE)
            ELSE number END AS value, lineno, value AS raw
FROM v;

-- a measurement whose value is no number (a cut line, a stray word) is a reject; `N/A` and blank are no data
UPDATE _ibsw SET reason = 'ibswinfo value is not a number'
WHERE lineno IN (SELECT lineno FROM _ibsw_metrics
                 WHERE metric IS NOT NULL AND value IS NULL AND coalesce(raw, '') NOT IN ('', 'N/A', 'n/a'));

CREATE OR REPLACE TEMP TABLE _ibsw_events AS
WITH inv AS (
    SELECT max(value) FILTER (WHERE key = 'part number') AS part, max(value) FILTER (WHERE key = 'serial number')
           AS serial, max(value) FILTER (WHERE key = 'PSID') AS psid, max(value) FILTER (WHERE key = 'GUID') AS guid,
           max(value) FILTER (WHERE key = 'firmware version') AS firmware,
           max(value) FILTER (WHERE key = 'product name') AS product,
           max(trim(line)) FILTER (WHERE is_name) AS name, min(lineno) AS line
    FROM _ibsw
)
SELECT $ts AS ts, $host AS host, 'switch' AS component, 'switch_identity' AS kind, NULL::INTEGER AS code,
       'info' AS severity,
       'ibswinfo: ' || coalesce(name, 'switch') || coalesce(' ' || part, '') || coalesce(' serial ' || serial, '')
           || coalesce(' GUID ' || guid, '') AS message,
       json_object('name', name, 'part', part, 'serial', serial, 'psid', psid, 'guid', guid, 'firmware', firmware,
                   'product', product, 'tool', 'ibswinfo') AS fields, line
FROM inv WHERE coalesce(part, serial, guid, name) IS NOT NULL
UNION ALL
SELECT $ts, $host, CASE WHEN psu IS NOT NULL THEN 'psu' || psu ELSE 'fans' END, 'switch_hw_fault', NULL, 'err',
       'ibswinfo: ' || CASE WHEN psu IS NOT NULL THEN 'PSU' || psu || ' ' ELSE '' END || key || ' ' || value,
       json_object('what', key, 'status', value, 'psu', psu, 'tool', 'ibswinfo'), lineno
FROM _ibsw
WHERE value IS NOT NULL AND value <> '' AND upper(value) <> 'OK'
  AND (key ~ '(status|DC power|\.dc|\.fan)$' OR key = 'fans')
"""
TEMP_TABLES = ("_ibsw_lines", "_ibsw", "_ibsw_metrics", "_ibsw_events")


def sniff(head: str) -> float:
    found = KEY_VALUE.findall(head)
    return 0.9 if len(found) >= 3 and ("fan#" in head or "PSU" in head or "psu0" in head) else 0.0


def _host(ctx: LoadContext, head: str, result: LoadResult) -> str | None:
    """--host, else the switch's GUID (an unmanaged switch's description is its model's, the same on all)."""
    if ctx.options.host:
        return ctx.options.host
    m = re.search(r"^GUID\s*[|:]\s*(0x[0-9A-Fa-f]+)", head, re.MULTILINE)
    result.notes.append(f"{ctx.display}: ibswinfo names no host: stored under {m.group(1) if m else 'NULL'} (--host)")
    return m.group(1).lower() if m else None


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    head = decode(read_head(ctx.path))
    ts, _ = snapshot_time(ctx, head.splitlines()[:3], result)
    params = {"ts": ts, "host": _host(ctx, head, result)}
    staged.stage_lines(ctx, "_ibsw_lines")
    for sql in (s for s in PARSE_SQL.split(";\n") if s.strip()):
        ctx.conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    staged.rejects(ctx, result, "_ibsw")
    result.rows = staged.write_metrics(ctx, "_ibsw_metrics") + staged.write_events(ctx, "_ibsw_events")
    drop_temp(ctx.conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "ibswinfo",
    "ibswinfo report of an unmanaged InfiniBand switch: PSUs, fans, temperatures, module temperatures, identity",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog", "events"}),
    top=0.9,
    priority=0,
)
