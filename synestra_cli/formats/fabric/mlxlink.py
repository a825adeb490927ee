"""`mlxlink` (mstflint / MFT) port reports, text or `--json`.

Text: section titles underlined with dashes (`Operational Info`, `Module Info`, `Physical Counters and
BER Info`, `Troubleshooting Info`), then `Key   : value` lines. JSON nests the same sections under
`result.output`. Per-lane values are comma-joined (`1.886,1.989,2.281,1.976 [-10.41..6]`, the bracket
being the module's alarm range) or, in newer JSON, `{"values": [...]}`.

Numbers become metrics: BER and counters from the counters section, temperature, voltage, bias and
optical power from Module Info. A per-lane value is stored per lane under entity `<port>/lane<N>`
(N from 0, mlxlink's own numbering); Rx and Tx power also get the minimum over lanes on the port
entity (the weakest lane is what fails a link). Text facts (state, speed, width, FEC mode, module
vendor/part/serial, recommendation) go to one `log` event per report, in its `fields`.
The report names no device: the port comes from an echoed command line (`mlxlink -d mlx5_0 -p 1 ...`)
or, failing that, an `mlx5_<n>` in the file name; the host from --host.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.fabric.ib_counters import port_entity
from synestra_cli.formats.snapshot import (
    InfoEvent,
    MetricRows,
    fallback_host,
    snake,
    snapshot_time,
    to_float,
    write_info_events,
)

SECTIONS = (
    "Operational Info",
    "Supported Info",
    "Troubleshooting Info",
    "Module Info",
    "Physical Counters and BER Info",
    "Tool Information",
)
METRIC_SECTIONS = ("Module Info", "Physical Counters and BER Info")
# mlxlink key -> (canonical metric, low-threshold metric, high-threshold metric)
CANONICAL: dict[str, tuple[str, str | None, str | None]] = {
    "Temperature [C]": ("optics_temp_celsius", None, None),
    "Rx Power Current [dBm]": (
        "optics_rx_power_dbm",
        "optics_rx_power_low_alarm_dbm",
        "optics_rx_power_high_alarm_dbm",
    ),
    "Tx Power Current [dBm]": (
        "optics_tx_power_dbm",
        "optics_tx_power_low_alarm_dbm",
        "optics_tx_power_high_alarm_dbm",
    ),
    "Effective Physical BER": ("port_post_fec_ber", None, None),
    "Raw Physical BER": ("port_pre_fec_ber", None, None),
    "Raw Physical BER Per Lane": ("port_pre_fec_ber", None, None),
    "Symbol Errors": ("port_symbol_errors_total", None, None),
    "Link Down Counter": ("port_link_down_events_total", None, None),
}
MIN_OVER_LANES = {"optics_rx_power_dbm", "optics_tx_power_dbm"}
MESSAGE_KEYS = (
    "State",
    "Physical state",
    "Speed",
    "Width",
    "FEC",
    "Identifier",
    "Vendor Name",
    "Vendor Part Number",
    "Recommendation",
)

ANSI = re.compile(r"\x1b\[[0-9;]*m")
KEY_VALUE = re.compile(r"^(\S.*?)\s*:\s(.*)$")
COMMAND = re.compile(r"mlxlink\b.*?(?:-d|--device)[ =](\S+)(?:.*?(?:-p|--port)[ =](\d+))?")
VALUE = re.compile(r"^(.*?)\s*(?:\[(-?[\d.eE+-]+)\.\.(-?[\d.eE+-]+)\])?$")
TEXT_SNIFF = re.compile(r"^(?:{})\s*\n-{{5,}}".format("|".join(SECTIONS)), re.MULTILINE)
JSON_SNIFF = re.compile(r'"(?:{})"\s*:\s*\{{'.format("|".join(SECTIONS)))


@dataclass
class Report:
    """One mlxlink invocation: its port, first line, and section -> key -> raw value."""

    entity: str | None
    line: int
    sections: dict[str, dict[str, object]] = field(default_factory=dict)


def sniff(head: str) -> float:
    text = ANSI.sub("", head)
    if TEXT_SNIFF.search(text):
        return 0.95
    body = text[text.find("{") :] if "{" in "".join(text.splitlines()[:4]) else ""
    return 0.95 if '"result"' in body and JSON_SNIFF.search(body) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    lines = ANSI.sub("", ctx.text_with_command()).splitlines()
    ts, header_line = snapshot_time(ctx, lines, result)
    by_name = _entity_from_name(ctx.user_path.name)
    # --json output may follow a date line and the echoed command: they are its preamble
    json_start = next((i for i, line in enumerate(lines[:4]) if line.lstrip().startswith("{")), None)
    if json_start is None:
        reports = _parse_text(lines, header_line, by_name, result)
    else:
        commands = [COMMAND.search(line) for line in lines[:json_start]]
        entity = next((_command_entity(*c.groups()) for c in commands if c), by_name)
        reports = _parse_json(lines, json_start, entity, result)
    if any(r.entity is None for r in reports):
        result.notes.append(f"{ctx.display}: mlxlink does not name the port; entity NULL (echo the command)")
    host = fallback_host(ctx, result)
    rows = MetricRows()
    for report in reports:
        _add_metrics(rows, ts, host, report)
    events = [_info_event(ts, host, report) for report in reports]
    result.rows = rows.write(ctx) + write_info_events(ctx, events)
    return result


def _entity_from_name(filename: str) -> str | None:
    m = re.search(r"mlx\d+_\d+", filename)
    return m.group(0) if m else None


def _command_entity(device: str, port: str | None) -> str:
    if re.fullmatch(r"mlx\d+_\d+", device):
        return port_entity(device, port or "1")
    return port or device  # a switch ASIC (/dev/mst/...): the entity is the port label


def _parse_text(lines: list[str], skip: int, default_entity: str | None, result: LoadResult) -> list[Report]:
    reports: list[Report] = []
    section: dict[str, object] | None = None
    for lineno, line in enumerate(lines, start=1):
        command = COMMAND.search(line)
        nxt = lines[lineno] if lineno < len(lines) else ""
        if command:
            reports.append(Report(_command_entity(*command.groups()), lineno))
            section = None
        elif line.strip() in SECTIONS or (line.strip() and re.fullmatch(r"-{5,}", nxt.strip())):
            if not reports:
                reports.append(Report(default_entity, lineno))
            section = reports[-1].sections.setdefault(line.strip(), {})
        elif lineno == skip or not line.strip() or re.fullmatch(r"-+", line.strip()):
            continue
        elif (kv := KEY_VALUE.match(line)) and section is not None:
            section[kv.group(1)] = kv.group(2).strip()
        else:
            result.reject(lineno, "not an mlxlink section title or `Key : value` line", line)
    return reports


def _parse_json(lines: list[str], start: int, entity: str | None, result: LoadResult) -> list[Report]:
    text = "\n".join(lines[start:])
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        doc = _close_truncated(text)
        reason = "truncated JSON: kept the complete sections before this point" if doc else f"invalid JSON: {exc.msg}"
        result.reject(exc.lineno + start, reason, lines[-1])
    if not isinstance(doc, dict):
        return []
    status = doc.get("status") or {}
    if isinstance(status, dict) and status.get("code") not in (None, 0):
        # mlxlink said the query failed: whatever output it left is not data
        result.reject(start + 1, f"mlxlink status {status.get('code')}: {status.get('message')}", lines[start])
        return []
    output = (doc.get("result") or {}).get("output") or {}
    sections = {k: v for k, v in output.items() if isinstance(v, dict)} if isinstance(output, dict) else {}
    return [Report(entity, start + 1, sections)]


def _close_truncated(text: str) -> dict[str, Any] | None:
    """A cut-off JSON document closed after its last complete object or array, or None."""
    cut = max(text.rfind("}"), text.rfind("]"))
    body, stack, in_str, escaped = text[: cut + 1], [], False, False
    for ch in body:
        if in_str:
            escaped, in_str = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]" and stack:
            stack.pop()
    try:
        doc = json.loads(body + "".join(reversed(stack)))
    except json.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def lanes_and_range(raw: object) -> tuple[list[float | None], float | None, float | None]:
    """Per-lane values and the printed alarm range.

    `1.886,1.989 [-10.41..6]` -> ([1.886, 1.989], -10.41, 6.0); `{"values": [...]}` -> (values, None, None).
    """
    if isinstance(raw, dict):
        raw = raw.get("values", [])
    if isinstance(raw, list):
        return [to_float(str(v)) for v in raw], None, None
    body, low, high = VALUE.match(str(raw)).groups()  # type: ignore[union-attr]
    values = [to_float(v) for v in body.split(",")] if body else []
    return values, (to_float(low) if low else None), (to_float(high) if high else None)


def _add_metrics(rows: MetricRows, ts: datetime, host: str | None, report: Report) -> None:
    for section in METRIC_SECTIONS:
        for key, raw in report.sections.get(section, {}).items():
            values, low, high = lanes_and_range(raw)
            lanes = [v for v in values if v is not None]
            if (
                not values
                or len(lanes) < len(values)
                or (section == "Module Info" and "[" not in key and key not in CANONICAL)
            ):
                continue  # text (vendor, N/A) or a module identity number: kept in the info event
            metric, low_metric, high_metric = CANONICAL.get(key, (f"mlxlink_{snake(key)}", None, None))
            _add_lanes(rows, ts, host, report.entity, metric, lanes)
            for threshold_metric, threshold in ((low_metric, low), (high_metric, high)):
                if threshold_metric and threshold is not None:
                    rows.add(ts, host, report.entity, threshold_metric, threshold)


def _add_lanes(
    rows: MetricRows, ts: datetime, host: str | None, entity: str | None, metric: str, values: list[float]
) -> None:
    if len(values) == 1:
        rows.add(ts, host, entity, metric, values[0])
        return
    for lane, value in enumerate(values):
        rows.add(ts, host, f"{entity}/lane{lane}" if entity else f"lane{lane}", metric, value)
    if metric in MIN_OVER_LANES:
        rows.add(ts, host, entity, metric, min(values))


def _info_event(ts: datetime, host: str | None, report: Report) -> InfoEvent:
    info = {
        snake(section): {k: v for k, v in keys.items() if not isinstance(v, dict)}
        for section, keys in report.sections.items()
    }
    flat = {k: v for keys in report.sections.values() for k, v in keys.items()}
    said = ", ".join(f"{k} {flat[k]}" for k in MESSAGE_KEYS if k in flat)
    message = f"mlxlink {report.entity or 'port'}: {said or 'report'}"
    return ts, host, report.entity, message, {"tool": "mlxlink", **info}, report.line


FORMAT = Format(
    "mlxlink",
    "mlxlink port report (text or --json): FEC, BER, module optics per lane",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog", "events"}),
    top=0.95,
    priority=80,
)
