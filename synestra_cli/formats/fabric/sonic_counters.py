"""SONiC `show interfaces counters` (also `-a`, `-p N`, `errors`, `rates`, `rif`): portstat's tables.

A header (`IFACE STATE RX_OK RX_BPS RX_UTIL RX_ERR RX_DRP RX_OVR TX_OK ...`), a line of dashes whose runs
give each column's span (values hold blanks: `653.87 MB/s`), then one row per interface. Counts carry
thousands separators (`471,729,839,997`); `N/A` is no data. Columns are found by name, so every variant
of the command (and `rif`, which has no STATE) reads the same way; fec-stats is formats/fabric/sonic_fec.py's.

What portstat's columns are (sonic-utilities utilities_common/portstat.py, counter_bucket_dict): RX_ERR =
SAI IF_IN_ERRORS, RX_DRP = IF_IN_DISCARDS, TX_ERR / TX_DRP the same outbound: they are stored under the IF-MIB
canonical names (`if_in_errors_total`, `if_in_discards_total`, `if_out_errors_total`,
`if_out_discards_total`); STATE `U` / `D` is `if_oper_status` 1 / 2. The rest keep portstat's name behind
`sonic_`: `sonic_rx_ok_total` (RX_OK, packets), `sonic_rx_ovr_total` (oversize), `sonic_rx_bytes_per_second`
(RX_BPS; `MB/s` is 10^6, as portstat's format_brate divides), `sonic_rx_packets_per_second`,
`sonic_rx_util_percent`, and the same for TX. The counts are
since the last `sonic-clear counters`. The host is the switch: pass `--host`; the entity is the interface.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synestra_cli.errors import InputError
from synestra_cli.formats import staged
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.formats.snapshot import fallback_host, snapshot_time
from synestra_cli.store.sql import drop_temp, temp_table

CANONICAL = {
    "RX_ERR": "if_in_errors_total",
    "RX_DRP": "if_in_discards_total",
    "TX_ERR": "if_out_errors_total",
    "TX_DRP": "if_out_discards_total",
    "STATE": "if_oper_status",
}
HEADER = re.compile(r"^\s*IFACE\s+(?:STATE\s+)?(?:RX_|TX_|TRIM)")
DASHES = re.compile(r"^-+(?: +-+)+ *$")
PARSE_SQL = """
CREATE OR REPLACE TEMP TABLE _portstat AS
SELECT lineno, line,
       list_transform($starts, lambda s, i: trim(substr(line, s, $widths[i]))) AS cells,
       CASE WHEN lineno > $dash_line AND trim(line) <> '' AND NOT regexp_matches(line, '^[\\s-]+$')
                 AND trim(line) <> trim($header)
                 AND (length(rtrim(line)) > $width + 2
                      OR list_contains(list_transform($starts, lambda s, i: trim(substr(line, s, $widths[i])) = ''),
                                       true))
            THEN 'not a row of the portstat table: a cell under ' || $names_text || ' is empty' END AS reason
FROM _portstat_lines;

CREATE OR REPLACE TEMP TABLE _portstat_metrics AS
WITH rows AS (
    SELECT lineno, cells[1] AS iface, cells FROM _portstat
    WHERE reason IS NULL AND lineno > $dash_line AND trim(line) <> '' AND NOT regexp_matches(line, '^[\\s-]+$')
      AND trim(line) <> trim($header)
), cells AS (
    SELECT r.iface, c.name, c.metric, r.cells[c.i] AS text FROM rows r CROSS JOIN _portstat_cols c
)
SELECT $ts AS ts, $host AS host, iface AS entity, metric,
       CASE WHEN name = 'STATE' THEN CASE text WHEN 'U' THEN 1.0 WHEN 'D' THEN 2.0 END
            WHEN text ~ '^-?[0-9.,]+ (B|KB|MB|GB)/s$'
                THEN replace(split_part(text, ' ', 1), ',', '')::DOUBLE
                     * CASE split_part(text, ' ', 2) WHEN 'KB/s' THEN 1e3 WHEN 'MB/s' THEN 1e6 WHEN 'GB/s' THEN 1e9
                                                     ELSE 1 END
            ELSE TRY_CAST(replace(regexp_replace(text, '(%|/s)$', ''), ',', '') AS DOUBLE) END AS value
FROM cells WHERE name <> 'IFACE'
"""
TEMP_TABLES = ("_portstat_lines", "_portstat", "_portstat_cols", "_portstat_metrics")


@dataclass(frozen=True)
class Layout:
    header: str
    dash_line: int  # 1-based line of the dashes under the header
    names: list[str]
    spans: list[tuple[int, int]]  # (1-based start, width) of each column


def layout(head: str) -> Layout | None:
    lines = head.splitlines()[:10]
    for i, line in enumerate(lines[:-1]):
        if HEADER.match(line) and "FEC_CORR" not in line and DASHES.match(lines[i + 1]):
            spans = [(m.start() + 1, m.end() - m.start()) for m in re.finditer(r"-+", lines[i + 1])]
            names = [line[s - 1 : s - 1 + w].strip() for s, w in spans]
            if names and names[0] == "IFACE":
                return Layout(line, i + 2, names, spans)
    return None


def sniff(head: str) -> float:
    return 0.95 if "IFACE" in head and layout(head) else 0.0


# portstat's own columns, named by what they hold: counts end in _total, rates in their unit.
OWN = {
    "OK": "ok_total",
    "OVR": "ovr_total",
    "BPS": "bytes_per_second",
    "PPS": "packets_per_second",
    "UTIL": "util_percent",
}


def _metric(name: str) -> str:
    direction, _, what = name.partition("_")
    if name in CANONICAL:
        return CANONICAL[name]
    if direction in ("RX", "TX") and what in OWN:
        return f"sonic_{direction.lower()}_{OWN[what]}"
    return "sonic_" + re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def load(ctx: LoadContext) -> LoadResult:
    head = decode(read_head(ctx.path))
    found = layout(head)
    if found is None:
        raise InputError(f"{ctx.display}: no portstat header (`IFACE ...`) with its line of dashes under it")
    result = LoadResult()
    ts, _ = snapshot_time(ctx, head.splitlines()[:3], result)
    host = fallback_host(ctx, result)
    conn = ctx.conn
    staged.stage_lines(ctx, "_portstat_lines")
    temp_table(
        conn,
        "_portstat_cols",
        {
            "i": ("INTEGER", list(range(1, len(found.names) + 1))),
            "name": ("VARCHAR", found.names),
            "metric": ("VARCHAR", [_metric(n) for n in found.names]),
        },
    )
    params = {
        "starts": [s for s, _ in found.spans],
        "widths": [w for _, w in found.spans],
        "dash_line": found.dash_line,
        "header": found.header,
        "width": found.spans[-1][0] + found.spans[-1][1] - 1,
        "names_text": " ".join(found.names),
        "ts": ts,
        "host": host,
    }
    for sql in (s for s in PARSE_SQL.split(";\n") if s.strip()):
        conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    staged.rejects(ctx, result, "_portstat")
    result.rows = staged.write_metrics(ctx, "_portstat_metrics")
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "sonic_counters",
    "SONiC show interfaces counters (portstat: counters, errors, rates, rif tables)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.95,
    priority=0,
)
