"""What every fabric snapshot parser shares: capture time, host fallback, columnar writes.

Snapshots (perfquery, ethtool -S, mlxlink, SONiC tables, sysfs dumps) are small and print no capture
time, so they are parsed in Python into column lists and written with one INSERT from an Arrow table.
Their time is a capture script's `date` line when the file starts with one, else the file's mtime.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa

from synestra_cli.catalog import CANONICAL
from synestra_cli.formats import years
from synestra_cli.formats.base import LoadContext, LoadResult
from synestra_cli.store.sql import registered

# A capture script's timestamp line before the tool's output: `date -Is`, `date -u +%FT%TZ`, or
# plain `date` in UTC (`Sun Nov 29 23:17:28 UTC 2026`), optionally behind a `#` or a `$ ` prompt echo.
ISO_LINE = re.compile(r"^#?\s*(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(Z|[+-]\d{2}:?\d{2})?\s*$")
DATE_LINE = re.compile(r"^#?\s*\w{3} (\w{3}) +(\d{1,2}) (\d{2}:\d{2}:\d{2}) (?:UTC|GMT) (\d{4})\s*$")

METRIC_SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us")),
        ("host", pa.string()),
        ("entity", pa.string()),
        ("metric", pa.string()),
        ("value", pa.float64()),
    ]
)

INSERT_METRICS_SQL = """
INSERT INTO metrics (ts, host, entity, metric, value, source_id)
SELECT ts, host, entity, metric, value, $sid FROM snapshot_rows ORDER BY host, entity, ts
"""
# Catalog rows for the canonical metrics this file wrote; other sources may have written them first.
INSERT_CATALOG_SQL = """
INSERT INTO metric_catalog (metric, unit, kind, description)
SELECT c.metric, c.unit, c.kind, c.description FROM snapshot_catalog c
WHERE c.metric IN (SELECT DISTINCT metric FROM snapshot_rows)
ON CONFLICT DO NOTHING
"""
INSERT_EVENTS_SQL = """
INSERT INTO events (ts, host, component, kind, code, severity, message, fields, source_id, line)
VALUES (?, ?, ?, 'log', NULL, 'info', ?, ?, ?, ?)
"""
INSERT_TOPOLOGY_SQL = """
INSERT INTO topology (host, nic, switch, switch_port, rack, source_id)
SELECT host, nic, switch, switch_port, rack, $sid FROM topology_rows ORDER BY host, nic
"""

CATALOG_TABLE = pa.table(
    {
        "metric": [m.name for m in CANONICAL],
        "unit": [m.unit for m in CANONICAL],
        "kind": [m.kind for m in CANONICAL],
        "description": [m.description for m in CANONICAL],
    }
)


def header_time(lines: list[str], tz: str) -> tuple[datetime | None, int]:
    """(UTC naive time, 1-based line) of a capture-time line among the first three, or (None, 0)."""
    for i, line in enumerate(lines[:3], start=1):
        iso = ISO_LINE.match(line)
        if iso:
            ts = datetime.fromisoformat(iso.group(1).replace(",", ".").replace(" ", "T") + (iso.group(2) or ""))
            return to_utc(ts, tz), i
        date = DATE_LINE.match(line)
        if date:
            mon, day, clock, year = date.groups()
            return datetime.strptime(f"{year} {mon} {day} {clock}", "%Y %b %d %H:%M:%S"), i
    return None, 0


def to_utc(ts: datetime, tz: str) -> datetime:
    """Naive UTC from an aware time, or from a naive one read in zone tz."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=ZoneInfo(tz))
    return ts.astimezone(UTC).replace(tzinfo=None)


def snapshot_time(ctx: LoadContext, lines: list[str], result: LoadResult) -> tuple[datetime, int]:
    """The capture time (header line, else mtime, with a note) and the header's line number (0: none)."""
    ts, lineno = header_time(lines, ctx.options.timezone)
    if ts is None:
        result.notes.append(
            f"{ctx.display}: no capture time in the file; using its mtime {ctx.mtime:%Y-%m-%d %H:%M:%S} UTC"
        )
        years.record(ctx.conn, ctx.source_id, "mtime", ctx.mtime.year)  # no evidence for another file's year
        return ctx.mtime, 0
    return ts, lineno


def fallback_host(ctx: LoadContext, result: LoadResult) -> str | None:
    """--host (or the host of the prompt or prefix it was pasted behind), else NULL with a note: the output
    itself does not name its host."""
    if ctx.fallback_host:
        return ctx.fallback_host
    result.notes.append(f"{ctx.display}: the output does not name its host; stored with host NULL (use --host)")
    return None


def to_float(text: str) -> float | None:
    """A number as tools print it: `2,998,448`, `1.18e-12`, `15E-255`; None for N/A and blanks."""
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def snake(name: str) -> str:
    """`Bias Current [mA]` -> `bias_current_ma`, `PortXmitWait` -> `port_xmit_wait`."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z][a-z])", "_", name.strip())
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


class MetricRows:
    """Column lists of metric samples, written at once by `write`."""

    def __init__(self) -> None:
        self.cols: dict[str, list[Any]] = {name: [] for name in METRIC_SCHEMA.names}

    def add(self, ts: datetime, host: str | None, entity: str | None, metric: str, value: float | None) -> None:
        for name, v in zip(METRIC_SCHEMA.names, (ts, host, entity, metric, value), strict=True):
            self.cols[name].append(v)

    def __len__(self) -> int:
        return len(self.cols["metric"])

    def write(self, ctx: LoadContext) -> int:
        """Insert the rows (sorted for zonemaps) and the catalog rows of the canonical metrics among them."""
        if not len(self):
            return 0
        rows = pa.table(self.cols, schema=METRIC_SCHEMA)
        with registered(ctx.conn, "snapshot_rows", rows), registered(ctx.conn, "snapshot_catalog", CATALOG_TABLE):
            ctx.conn.execute(INSERT_METRICS_SQL, {"sid": ctx.source_id})
            ctx.conn.execute(INSERT_CATALOG_SQL)
        return len(self)


# (time, host, entity, message, fields, line) of one descriptive `log` event
InfoEvent = tuple[datetime, str | None, str | None, str, dict[str, Any], int]


def write_info_events(ctx: LoadContext, rows: list[InfoEvent]) -> int:
    """Descriptive facts a metric cannot hold (FEC mode, module vendor): one `log` event per port.

    rows: (ts, host, component, message, fields, line).
    """
    if not rows:
        return 0
    ctx.conn.executemany(
        INSERT_EVENTS_SQL,
        [(ts, host, comp, msg, json.dumps(fields), ctx.source_id, line) for ts, host, comp, msg, fields, line in rows],
    )
    return len(rows)


def write_topology(ctx: LoadContext, cols: dict[str, list[Any]]) -> int:
    """Insert topology rows from column lists host, nic, switch, switch_port, rack."""
    table = pa.table({k: pa.array(cols[k], pa.string()) for k in ("host", "nic", "switch", "switch_port", "rack")})
    if not table.num_rows:
        return 0
    with registered(ctx.conn, "topology_rows", table):
        ctx.conn.execute(INSERT_TOPOLOGY_SQL, {"sid": ctx.source_id})
    return int(table.num_rows)
