"""gnmic `--format event` JSON: OpenConfig interface counters and transceiver optical power.

Each event is `{"name", "timestamp" (ns since the epoch), "tags", "values"}`; path keys are tags named
`<element>_<key>` (`interface_name`, `component_name`, `channel_index`) and `values` is keyed by the
full path. A file holds a JSON array of events, several arrays, or one event or array per line.
Host: the `source` tag (the target, port stripped, short name). Entity: the interface, or the
component, with `/lane<index>` for a transceiver physical channel. Paths with a canonical twin are
renamed; any other numeric value is kept under its path, module prefixes stripped
(`/components/component/power-supply/state/input-current`).

A raw gNMI protobuf text print (`update:{path:{elem:{name:...}}} val:{decimal_val:...}}`) is a debug
dump, not an export: no format claims it and ingest refuses it as an unknown format.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.formats.snapshot import MetricRows, to_float

COUNTERS = "/interfaces/interface/state/counters/"
ETH_COUNTERS = "/interfaces/interface/ethernet/state/counters/"
CHANNEL = "/components/component/transceiver/physical-channels/channel/state/"
TRANSCEIVER = "/components/component/transceiver/state/"
CANONICAL: dict[str, str] = {
    COUNTERS + "in-octets": "if_in_octets_total",
    COUNTERS + "out-octets": "if_out_octets_total",
    COUNTERS + "in-unicast-pkts": "if_in_ucast_pkts_total",
    COUNTERS + "out-unicast-pkts": "if_out_ucast_pkts_total",
    COUNTERS + "in-errors": "if_in_errors_total",
    COUNTERS + "out-errors": "if_out_errors_total",
    COUNTERS + "in-discards": "if_in_discards_total",
    COUNTERS + "out-discards": "if_out_discards_total",
    "/interfaces/interface/state/oper-status": "if_oper_status",
    ETH_COUNTERS + "fec-corrected-blocks": "port_fec_corrected_codewords_total",
    ETH_COUNTERS + "fec-uncorrectable-blocks": "port_fec_uncorrectable_codewords_total",
    CHANNEL + "input-power/instant": "optics_rx_power_dbm",
    CHANNEL + "output-power/instant": "optics_tx_power_dbm",
    TRANSCEIVER + "input-power/instant": "optics_rx_power_dbm",
    TRANSCEIVER + "output-power/instant": "optics_tx_power_dbm",
    "/components/component/state/temperature/instant": "optics_temp_celsius",
}
# OpenConfig oper-status enum -> IF-MIB ifOperStatus numbers (what if_oper_status holds).
OPER_STATUS = {
    "UP": 1.0,
    "DOWN": 2.0,
    "TESTING": 3.0,
    "UNKNOWN": 4.0,
    "DORMANT": 5.0,
    "NOT_PRESENT": 6.0,
    "LOWER_LAYER_DOWN": 7.0,
}
ENTITY_TAGS = ("interface_name", "name", "component_name")
PREFIX = re.compile(r"(?<=/)[\w-]+:")  # module prefixes: /openconfig-platform:components -> /components
KEYS = re.compile(r"\[[^\]]*\]")  # inline keys when a collector keeps them in the path
NON_SPACE = re.compile(r"\S")
SNIFF = re.compile(r'"timestamp"\s*:\s*\d{16,}.*?"(?:tags|values)"\s*:\s*\{', re.DOTALL)


def sniff(head: str) -> float:
    text = head.lstrip()
    return 0.9 if text[:1] in "[{" and SNIFF.search(text[:8192]) and '"values"' in text else 0.0


def appendable(path: Path) -> bool:
    """JSON Lines (gnmic's file output with `multiline: false`: one event or array per line) grows by
    lines that parse on their own; an indented array does not end at a line of its own."""
    first = next((ln for ln in decode(read_head(path)).splitlines() if ln.strip()), "")
    try:
        json.loads(first)
    except ValueError:
        return False
    return True


def events(text: str, result: LoadResult, first_line: int = 1) -> list[tuple[int, dict[str, Any]]]:
    """(line, event) for every event in arrays or objects laid one after another (JSON lines too);
    `text` starts at line `first_line` of the file."""
    decoder, pos, skip = json.JSONDecoder(), 0, first_line - 1
    found: list[tuple[int, dict[str, Any]]] = []
    while (start := NON_SPACE.search(text, pos)) is not None:
        pos = start.start()
        line = text.count("\n", 0, pos) + 1 + skip
        try:
            doc, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            lines = text.splitlines()
            result.reject(
                exc.lineno + skip,
                f"invalid JSON ({exc.msg})",
                lines[exc.lineno - 1] if exc.lineno <= len(lines) else "",
            )
            resume = text.find("\n", exc.pos)  # JSON lines: the next line may be a good event
            pos = len(text) if resume < 0 else resume + 1
            continue
        found.extend((line, e) for e in (doc if isinstance(doc, list) else [doc]))
    return found


def _host(tags: dict[str, Any]) -> str | None:
    source = str(tags.get("source") or "")
    if not source:
        return None
    host = source.rsplit(":", 1)[0] if source.count(":") == 1 else source
    return host if re.fullmatch(r"[\d.]+", host) else host.split(".")[0]


def _entity(tags: dict[str, Any], path: str) -> str | None:
    entity = next((str(tags[t]) for t in ENTITY_TAGS if tags.get(t)), None)
    if entity is None:
        key = re.search(r"\[name=([^\]]+)\]", path)
        entity = key.group(1) if key else None
    if "/physical-channels/channel/" in path:
        index = tags.get("channel_index") or (re.search(r"channel\[index=(\d+)\]", path) or [None, None])[1]
        return f"{entity}/lane{index}"
    return entity


def _value(metric: str, raw: object) -> float | None:
    if metric == "if_oper_status" and isinstance(raw, str):
        return OPER_STATUS.get(raw.upper())
    if isinstance(raw, bool):
        return float(raw)
    return raw if isinstance(raw, float) else to_float(str(raw)) if isinstance(raw, int | str) else None


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    rows = MetricRows()
    skipped = 0
    for line, event in events(ctx.read_text(), result, ctx.first_line):
        if (
            not isinstance(event, dict)
            or not isinstance(event.get("values"), dict)
            or not isinstance(event.get("timestamp"), int)
        ):
            result.reject(line, "gnmic event without an integer `timestamp` and a `values` object", str(event))
            continue
        ts = datetime.fromtimestamp(event["timestamp"] / 1e9, UTC).replace(tzinfo=None)
        tags = event.get("tags") or {}
        host = _host(tags) or ctx.options.host
        for raw_path, raw in event["values"].items():
            path = KEYS.sub("", PREFIX.sub("", raw_path))
            metric = CANONICAL.get(path, path)
            value = _value(metric, raw)
            if value is None:
                skipped += 1  # text leaves (descriptions, enums other than oper-status): not metrics
                continue
            rows.add(ts, host, _entity(tags, raw_path), metric, value)
    if skipped:
        result.notes.append(f"{ctx.display}: {skipped} non-numeric values (text leaves) not stored as metrics")
    result.rows = rows.write(ctx)
    return result


FORMAT = Format(
    "gnmic_event",
    "gnmic event-format JSON (OpenConfig interface counters, transceiver power)",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog"}),
    top=0.9,
    appendable=appendable,
    priority=60,
)
