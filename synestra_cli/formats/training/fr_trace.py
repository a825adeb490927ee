"""The Flight Recorder analysers' reports: which ranks never joined which collective.

`torchfrtrace <dump dir>` (pytorch tools/flight_recorder/fr_trace.py, torch.distributed.flight_recorder
since 2.9) prints one block per mismatch: `Not all ranks joining collective 5 at entry 4` (newer: `Not all
ranks joining collective, sequence number: 4`; older, one line: `Not all ranks joining collective for group
0:default_pg collective nccl:all_reduce Missing ranks are {1}`), then `group info: 0:default_pg`,
`collective: nccl:all_reduce`, `missing ranks: {1}`, `expected ranks: 2`, `collective state: scheduled` and
the stack. nvidia-resiliency-ext's CollectiveAnalyzer summarises the same as a table, `PGID | Process Group
Desc | Op Type | Size | Dtype | Missing Ranks`.

Each missing rank becomes a `job_incidents` row `fr_missing_rank` (rank, collective, sequence number, the
group in `fields`) of the job named by --job, else by the report's folder; the report carries no time.
"""

from __future__ import annotations

import re

from synestra_cli.formats import staged
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.training.flight_recorder import job_of
from synestra_cli.store.sql import drop_temp, scalar, sql_file

PARSE_SQL = sql_file(__package__, "fr_trace.sql")
HEAD = re.compile(r"^\s*Not all ranks joining collective", re.MULTILINE)
TABLE = re.compile(r"^\s*PGID\s*\|\s*Process Group Desc\s*\|\s*Op Type\s*\|.*\|\s*Missing Ranks\s*$", re.MULTILINE)


def sniff(head: str) -> float:
    if "joining collective" in head and HEAD.search(head):
        return 0.95
    return 0.95 if "PGID" in head and TABLE.search(head) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    staged.stage_lines(ctx, "_frt_lines")
    params = {"job": job_of(ctx, result), "sid": ctx.source_id}
    for sql in (s for s in PARSE_SQL.split(";\n") if s.strip()):
        ctx.conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    staged.rejects(ctx, result, "_frt")
    result.rows = int(scalar(ctx.conn, "SELECT count(*) FROM job_incidents WHERE source_id = ?", [ctx.source_id]))
    drop_temp(ctx.conn, ["_frt_lines", "_frt", "_frt_missing"])
    return result


FORMAT = Format(
    "fr_trace",
    "Flight Recorder analyser report (torchfrtrace, NVRx CollectiveAnalyzer): ranks missing from a collective",
    sniff,
    load,
    writes=frozenset({"job_incidents"}),
    top=0.95,
    priority=0,
)
