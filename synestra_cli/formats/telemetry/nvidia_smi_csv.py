"""`nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]`, also looped (`-l N`, `-lms N`).

The header names the fields with their unit (`utilization.gpu [%], memory.used [MiB]`); without `nounits`
each value carries it (`99 %`, `30994 MiB`, `176.98 W`). A field the GPU cannot report prints `[N/A]` or
`[Not Supported]` (older drivers `N/A`): no data, not a reject. `noheader` output names no field, so its
columns come from the echoed command (`$ nvidia-smi --query-gpu=memory.total,... --format=csv,noheader`);
without one it is refused, as sacct's headerless output is.

Rows become `metrics` at the row's `timestamp` field (`2020/11/12 13:48:11.412`, local time, read in
--timezone) or the file's mtime; the entity is `gpu<index>` (the `index` field), else the PCI bus id, else
the UUID. Fields with a canonical twin are stored under it (`temperature.gpu` -> `gpu_temp_celsius`,
`clocks_event_reasons.active` 0x...04 -> `gpu_clock_events_bitmask` 4); the other numbers as
`nvsmi_<field>`. GPUs named by UUID or bus id get their `gpus` row (and a `gpu_identity` event with the
serial when the query asked for it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from synestra_cli.errors import InputError
from synestra_cli.formats import staged, years
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.formats.snapshot import fallback_host
from synestra_cli.store.sql import drop_temp, sql_file, temp_table

PARSE_SQL = sql_file(__package__, "nvidia_smi_csv.sql")

# nvidia-smi --help-query-gpu names -> canonical metric (aliases: `clocks.sm` = `clocks.current.sm`).
CANONICAL = {
    "temperature.gpu": "gpu_temp_celsius",
    "temperature.memory": "gpu_memory_temp_celsius",
    "utilization.gpu": "gpu_util_percent",
    "power.draw": "gpu_power_watts",
    "power.draw.instant": "gpu_power_watts",
    "enforced.power.limit": "gpu_power_limit_watts",
    "clocks.sm": "gpu_sm_clock_mhz",
    "clocks.current.sm": "gpu_sm_clock_mhz",
    "clocks.mem": "gpu_memory_clock_mhz",
    "clocks.current.memory": "gpu_memory_clock_mhz",
    "memory.used": "gpu_fb_used_mib",
    "memory.free": "gpu_fb_free_mib",
    "pcie.link.gen.current": "gpu_pcie_link_gen",
    "pcie.link.gen.gpucurrent": "gpu_pcie_link_gen",
    "pcie.link.gen.max": "gpu_pcie_link_gen_max",
    "pcie.link.width.current": "gpu_pcie_link_width",
    "pcie.link.width.max": "gpu_pcie_link_width_max",
    "clocks_event_reasons.active": "gpu_clock_events_bitmask",
    "clocks_throttle_reasons.active": "gpu_clock_events_bitmask",
    "ecc.errors.corrected.volatile.total": "gpu_ecc_sbe_volatile_total",
    "ecc.errors.uncorrected.volatile.total": "gpu_ecc_dbe_volatile_total",
    "ecc.errors.corrected.aggregate.total": "gpu_ecc_sbe_aggregate_total",
    "ecc.errors.uncorrected.aggregate.total": "gpu_ecc_dbe_aggregate_total",
    "retired_pages.double_bit.count": "gpu_retired_pages_dbe",
    "retired_pages.sbe": "gpu_retired_pages_sbe",
    "retired_pages.dbe": "gpu_retired_pages_dbe",
    "retired_pages.pending": "gpu_retired_pages_pending",
    "remapped_rows.correctable": "gpu_correctable_remapped_rows_total",
    "remapped_rows.uncorrectable": "gpu_uncorrectable_remapped_rows_total",
    "remapped_rows.pending": "gpu_row_remap_pending",
    "remapped_rows.failure": "gpu_row_remap_failure",
}
# Fields that name or describe a GPU: identity, never samples (`driver_version` 440.64 is no measurement).
TEXT_FIELDS = {
    "index",
    "uuid",
    "gpu_uuid",
    "name",
    "gpu_name",
    "pci.bus_id",
    "gpu_bus_id",
    "serial",
    "gpu_serial",
    "timestamp",
    "driver_version",
    "vbios_version",
    "inforom.img",
    "inforom.image",
    "inforom.oem",
    "inforom.ecc",
    "inforom.pwr",
    "pci.device_id",
    "pci.sub_device_id",
    "pci.domain",
    "pci.bus",
    "pci.device",
    "compute_mode",
    "compute_cap",
    "driver_model.current",
    "driver_model.pending",
    "display_mode",
    "display_active",
    "persistence_mode",
    "mig.mode.current",
    "mig.mode.pending",
}
FIELD = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*(?: \[[^\]]+\])?$")
COMMAND = re.compile(r"(?:--query-gpu=|(?:^|\s)gpu=)([a-z0-9_.,]+)(?:.*?--format[= ]([a-z,]+))?")
TEMP_TABLES = ("_nvc_lines", "_nvc", "_nvc_fields", "_nvc_cells", "_nvc_metrics", "_nvc_gpus")


@dataclass(frozen=True)
class Layout:
    names: list[str]  # query field names, units dropped
    header_line: int  # 1-based: the header (or the echoed command of noheader output); rows follow
    header: str  # the header line as printed ('' without one): repeated headers are not rows


def _fields(line: str) -> list[str] | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) < 2 or not all(FIELD.match(p) for p in parts):
        return None
    names = [p.split(" [", 1)[0] for p in parts]
    known = sum(n in CANONICAL or n in TEXT_FIELDS or "[" in p for n, p in zip(names, parts, strict=True))
    return names if any("." in n or "[" in p for n, p in zip(names, parts, strict=True)) and known else None


def layout(head: str) -> Layout | None:
    """The header among the first lines, else the echoed command (which noheader output needs)."""
    lines = head.splitlines()[:20]
    for i, line in enumerate(lines, start=1):
        names = _fields(line)
        if names:
            return Layout(names, i, line.strip())
        command = COMMAND.search(line)
        if command and "csv" in (command.group(2) or "csv"):
            names = command.group(1).strip(",").split(",")
            if "noheader" in (command.group(2) or ""):
                return Layout(names, i, "")
            following = next((n for n in lines[i:] if n.strip()), "")
            found = _fields(following)
            return Layout(found, i + 1 + lines[i:].index(following), following.strip()) if found else None
    return None


def sniff(head: str) -> float:
    if "," not in head:
        return 0.0
    found = layout(head)
    if found is None:
        return 0.0
    return 0.95 if not found.header or "--query-gpu" in head else 0.9


def load(ctx: LoadContext) -> LoadResult:
    found = layout(decode(read_head(ctx.path)))
    if found is None:
        raise InputError(
            f"{ctx.display}: no nvidia-smi --query-gpu header nor echoed command: without them the columns "
            "cannot be known; re-run with --format=csv (no noheader), or keep the command line"
        )
    result = LoadResult()
    host = fallback_host(ctx, result)
    conn = ctx.conn
    staged.stage_lines(ctx, "_nvc_lines")
    metrics = [None if n in TEXT_FIELDS else CANONICAL.get(n, _own_name(n)) for n in found.names]
    temp_table(
        conn,
        "_nvc_fields",
        {
            "i": ("INTEGER", list(range(1, len(found.names) + 1))),
            "name": ("VARCHAR", found.names),
            "metric": ("VARCHAR", metrics),
        },
    )
    params = {
        "tz": ctx.options.timezone,
        "mtime": ctx.mtime,
        "host": host,
        "names": found.names,
        "header_line": found.header_line,
        "header": found.header or "\x00",
    }
    for sql in (s for s in PARSE_SQL.split(";\n") if s.strip()):
        conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    if "timestamp" not in found.names:
        result.notes.append(f"{ctx.display}: no `timestamp` field queried; samples placed at the file's mtime")
        years.record(conn, ctx.source_id, "mtime", ctx.mtime.year)  # no evidence for another file's year
    staged.rejects(ctx, result, "_nvc")
    conn.execute(
        "INSERT INTO gpus (host, entity, pci_bus_id, uuid, model, source_id) "
        "SELECT $host, entity, bus, uuid, model, $sid FROM _nvc_gpus ORDER BY entity",
        {"host": host, "sid": ctx.source_id},
    )
    gpus = conn.execute("SELECT count(*) FROM _nvc_gpus").fetchone()
    result.rows = staged.write_metrics(ctx, "_nvc_metrics") + (gpus[0] if gpus else 0) + _identity(ctx, host)
    drop_temp(conn, TEMP_TABLES)
    return result


def _own_name(field: str) -> str:
    """`clocks.current.graphics` -> `nvsmi_clocks_current_graphics`."""
    return "nvsmi_" + re.sub(r"[^a-z0-9]+", "_", field)


def _identity(ctx: LoadContext, host: str | None) -> int:
    """A `gpu_identity` event per GPU whose serial the query asked for (what a replacement ticket names)."""
    ctx.conn.execute(
        "CREATE OR REPLACE TEMP TABLE _nvc_events AS SELECT ts, $host AS host, bus AS component, "
        "'gpu_identity' AS kind, NULL::INTEGER AS code, 'info' AS severity, "
        "'nvidia-smi: GPU ' || coalesce(bus, entity) || ' ' || coalesce(model, '') || ' serial ' || serial AS message, "
        "json_object('uuid', uuid, 'serial', serial, 'pci_bus_id', bus, 'entity', entity, 'product', model, "
        "'tool', 'nvidia-smi') AS fields, line FROM _nvc_gpus WHERE serial IS NOT NULL",
        {"host": host},
    )
    n = staged.write_events(ctx, "_nvc_events")
    drop_temp(ctx.conn, ["_nvc_events"])
    return n


FORMAT = Format(
    "nvidia_smi_csv",
    "nvidia-smi --query-gpu=... --format=csv output (header with units, or noheader after the echoed command)",
    sniff,
    load,
    writes=frozenset({"gpus", "metrics", "metric_catalog", "events"}),
    top=0.95,
    priority=0,
)
