"""Topology CSV: `host,nic,switch,switch_port[,rack]`, one row per NIC port cable.

The header is required (it is how the file is recognised, and it keeps this format apart from long
metric CSVs). `switch_port` is spelled as the switch's metrics name it (`Ethernet21`, or the IB port
number). Blank lines and `#` comments are skipped; a row with the wrong number of fields or no host is
rejected with its line number.
"""

from __future__ import annotations

import csv
import io
import re

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import write_topology

COLUMNS = ["host", "nic", "switch", "switch_port", "rack"]
HEADER = re.compile(r"^\s*host\s*,\s*nic\s*,\s*switch\s*,\s*switch_port\s*(,\s*rack\s*)?$", re.IGNORECASE)


def _first_data_line(text: str) -> tuple[int, str]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("#"):
            return lineno, line.lstrip("\ufeff")
    return 0, ""


def sniff(head: str) -> float:
    return 0.95 if HEADER.match(_first_data_line(head)[1]) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    text = ctx.read_text()
    header_line, header = _first_data_line(text)
    if not HEADER.match(header):
        result.reject(header_line or None, "missing header host,nic,switch,switch_port[,rack]", header)
        return result
    width = len(header.split(","))
    cols: dict[str, list[str | None]] = {c: [] for c in COLUMNS}
    lines = text.splitlines()[header_line:]
    for lineno, line in enumerate(lines, start=header_line + 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in next(csv.reader(io.StringIO(line)))]
        if len(fields) != width or not fields[0]:
            result.reject(lineno, f"expected {width} fields with a host, got {len(fields)}", line)
            continue
        for name, value in zip(COLUMNS, fields + [""] * (5 - width), strict=True):
            cols[name].append(value or None)
    result.rows = write_topology(ctx, cols)
    return result


FORMAT = Format(
    "topology_csv",
    "topology CSV with header host,nic,switch,switch_port[,rack]",
    sniff,
    load,
    writes=frozenset({"topology"}),
    top=0.95,
    priority=50,
)
