"""SONiC `show interfaces counters fec-stats`: per-interface FEC codewords and pre/post-FEC BER.

A whitespace-aligned table: a header row (`IFACE STATE FEC_CORR FEC_UNCORR FEC_SYMBOL_ERR FEC_PRE_BER
FEC_POST_BER [FEC_PRE_BER_MAX]`), a row of dashes, then one row per interface with thousands
separators (`2,998,448`) and `N/A` for counters the ASIC does not report (stored as NULL). Columns are
found by header name, so older releases without FEC_PRE_BER_MAX parse too. The host is the switch,
which the table does not name: pass `--host leaf-02`; the entity is the interface (`Ethernet48`).
"""

from __future__ import annotations

import re
from datetime import datetime

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import MetricRows, fallback_host, snake, snapshot_time, to_float

COLUMNS: dict[str, str] = {
    "FEC_CORR": "port_fec_corrected_codewords_total",
    "FEC_UNCORR": "port_fec_uncorrectable_codewords_total",
    "FEC_SYMBOL_ERR": "port_symbol_errors_total",
    "FEC_PRE_BER": "port_pre_fec_ber",
    "FEC_POST_BER": "port_post_fec_ber",
}
# SONiC STATE column -> IF-MIB ifOperStatus (1 up, 2 down), the vocabulary of if_oper_status.
OPER_STATUS = {"U": 1.0, "D": 2.0}
HEADER = re.compile(r"^\s*IFACE\s+STATE\s+FEC_CORR\s+FEC_UNCORR\b")
SEPARATOR = re.compile(r"^[\s-]+$")


def sniff(head: str) -> float:
    return 0.95 if any(HEADER.match(line) for line in head.splitlines()[:5]) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ctx.read_text().splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    host = fallback_host(ctx, result)
    rows = MetricRows()
    names: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        if HEADER.match(line):
            names = line.split()
        elif lineno == header_line or not line.strip() or SEPARATOR.match(line):
            continue
        elif not names or len(line.split()) != len(names):
            result.reject(lineno, f"expected {len(names)} columns under the fec-stats header", line)
        else:
            _add_row(rows, ts, host, dict(zip(names, line.split(), strict=True)))
    result.rows = rows.write(ctx)
    return result


def _add_row(rows: MetricRows, ts: datetime, host: str | None, row: dict[str, str]) -> None:
    iface = row["IFACE"]
    if row.get("STATE") in OPER_STATUS:
        rows.add(ts, host, iface, "if_oper_status", OPER_STATUS[row["STATE"]])
    for column, text in row.items():
        if column in ("IFACE", "STATE"):
            continue
        rows.add(ts, host, iface, COLUMNS.get(column, f"sonic_{snake(column)}"), to_float(text))


FORMAT = Format(
    "sonic_fec_stats",
    "SONiC show interfaces counters fec-stats table",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.95,
    priority=70,
)
