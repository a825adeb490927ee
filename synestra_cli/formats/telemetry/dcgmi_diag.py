"""`dcgmi diag -r N` results: the table people paste, and its JSON form (`-j`).

Table (dcgmi/Diag.cpp): a header `| Diagnostic | Result |`, section titles (`Metadata`, `Deployment`,
`Integration`, `Hardware`, `Stress`), one row per test. DCGM 3.x prints a result for all GPUs (`Pass`) or per
GPU (`Pass - GPU: 1` / `Fail - GPU: 0` on continuation rows); 4.x names plugins (`software`, `memory`) with
a `GPUn: Pass` row per GPU. `Warning` and `Info` rows (wrapped at the column width) belong to the test
above. What is printed before the table (`Successfully ran diagnostic for group.`, an echoed command, a
`kubectl exec` notice) is not a reject; a cut paste keeps the rows it has.

JSON: 3.x `{"DCGM GPU Diagnostic": {"test_categories": [{"category", "tests": [{"name", "results":
[{"gpu_ids" | "gpu_id", "status", "warnings", "info"}]}]}]}}`; 4.x `{"DCGM Diagnostic": ...}` with
`entity_id` per result.

Each result becomes an event `dcgm_diag` (severity from the status: Fail `err`, Warn `warning`, else
`info`) on --host, component `gpu<N>` for a GPU's own result (none for a result of all GPUs), with category,
test, status, warning and info text, DCGM and driver versions in `fields`. The output carries no time: the
file's mtime stands for it (the report says so).
"""

from __future__ import annotations

import json
import re

from synestra_cli.errors import InputError
from synestra_cli.formats import staged, years
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import fallback_host
from synestra_cli.store.sql import drop_temp, sql_file

TABLE_SQL = sql_file(__package__, "dcgmi_diag.sql")
JSON_SQL = """
CREATE OR REPLACE TEMP TABLE _diag_results AS
WITH d AS (SELECT coalesce(doc->'$."DCGM GPU Diagnostic"', doc->'$."DCGM Diagnostic"') AS diag
           FROM (SELECT $doc::JSON AS doc)),
c AS (SELECT unnest(from_json(diag->'test_categories', '["JSON"]')) AS cat FROM d),
t AS (SELECT cat->>'category' AS category, unnest(from_json(cat->'tests', '["JSON"]')) AS test FROM c),
r AS (SELECT category, test->>'name' AS test, unnest(from_json(test->'results', '["JSON"]')) AS res FROM t)
SELECT NULL::BIGINT AS line, category, test,
       upper(res->>'status')[1] || lower((res->>'status')[2:]) AS status,
       TRY_CAST(trim(unnest(string_split(coalesce(res->>'gpu_ids', res->>'gpu_id',
                CASE WHEN res->>'entity_group' IN ('GPU', NULL) THEN res->>'entity_id' END, ''), ','))) AS INTEGER)
           AS gpu,
       nullif(array_to_string(list_transform(from_json(coalesce(res->'warnings', '[]'), '["JSON"]'),
                              lambda w: coalesce(w->>'warning', w->>'message', trim(w::VARCHAR, '"'))), ' '), '')
           AS warning,
       nullif(array_to_string(from_json(coalesce(res->'info', '[]'), '["VARCHAR"]'), ' '), '') AS info,
       NULL::VARCHAR AS dcgm, NULL::VARCHAR AS driver
FROM r
"""
EVENTS_SQL = """
CREATE OR REPLACE TEMP TABLE _diag_events AS
SELECT $ts AS ts, $host AS host, CASE WHEN gpu IS NOT NULL THEN 'gpu' || gpu::VARCHAR END AS component,
       'dcgm_diag' AS kind, NULL::INTEGER AS code,
       CASE status WHEN 'Fail' THEN 'err' WHEN 'Warn' THEN 'warning' ELSE 'info' END AS severity,
       'dcgmi diag: ' || coalesce(category || ' / ', '') || test || ' ' || status
           || coalesce(' on GPU ' || gpu::VARCHAR, '') || coalesce(': ' || warning, '') AS message,
       json_object('category', category, 'test', test, 'status', status, 'gpu', gpu, 'warning', warning,
                   'info', info, 'dcgm_version', dcgm, 'driver', driver, 'tool', 'dcgmi diag') AS fields,
       line
FROM _diag_results
"""
ROW = re.compile(r"^\|.{27}\|.{48}\|\s*$", re.MULTILINE)
SECTION = re.compile(r"^[|+]-----\s+(?:Metadata|Deployment|Integration|Hardware|Stress)\s+-+\+", re.MULTILINE)
TEMP_TABLES = ("_diag_lines", "_diag", "_diag_results", "_diag_events")


def sniff(head: str) -> float:
    body = head.lstrip()
    if body.startswith("{") and '"test_categories"' in body and 'Diagnostic"' in body[:200]:
        return 0.95
    if "|" not in head:
        return 0.0
    if SECTION.search(head) or ("| Diagnostic" in head and "| Result" in head):
        return 0.95
    return 0.85 if len(ROW.findall(head)) >= 3 else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    host = fallback_host(ctx, result)
    conn = ctx.conn
    text = ctx.read_text()
    if text.lstrip().startswith("{"):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{ctx.display}:{exc.lineno}: invalid dcgmi diag JSON ({exc.msg})") from exc
        conn.execute(JSON_SQL, {"doc": text})
    else:
        staged.stage_lines(ctx, "_diag_lines")
        for sql in (s for s in TABLE_SQL.split(";\n") if s.strip()):
            conn.execute(sql)
        staged.rejects(ctx, result, "_diag")
    conn.execute(EVENTS_SQL, {"ts": ctx.mtime, "host": host})
    result.notes.append(f"{ctx.display}: dcgmi diag prints no time; results placed at the file's mtime {ctx.mtime} UTC")
    years.record(conn, ctx.source_id, "mtime", ctx.mtime.year)
    result.rows = staged.write_events(ctx, "_diag_events")
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "dcgmi_diag",
    "dcgmi diag results: the Pass / Fail / Warn / Skip table (3.x and 4.x layouts) or its JSON (-j)",
    sniff,
    load,
    writes=frozenset({"events"}),
    top=0.95,
    priority=0,
)
