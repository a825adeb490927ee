"""`nvidia-smi -q` (also `-a`, `-q -d ...`, `-q -l N`): the driver's own report of each GPU, in text.

A `==============NVSMI LOG==============` banner, `Timestamp` / `Driver Version` / `Attached GPUs`, then one
block per GPU opened by `GPU 00000000:07:00.0` (older drivers: `GPU 0000:01:00.0`), its attributes as
`Key : value` lines nested by 4 blanks under section titles (`PCI` > `GPU Link Info` > `Link Width`).
Layouts differ by driver: `Clocks Throttle Reasons` became `Clocks Event Reasons` (535), `Power Readings`
`GPU Power Readings`, `Temperature > Gpu` `GPU Current Temp`, ECC counts moved from `Single Bit` / `Double
Bit` > `Total` to `SRAM` / `DRAM Correctable` / `Uncorrectable`, `Remapped Rows` appeared with Ampere.
Sections are found by path (`ECC Errors/Volatile/DRAM Uncorrectable`), so every layout reads the same way.

What a GPU block becomes (docs/formats.md, "nvidia-smi"):
- `gpus`: host (--host), entity `gpuN` (N: the block's place in a full listing, NVML's index; with
  `-i` or a partial paste, the bus id), PCI bus id, UUID, product name;
- `metrics` at the capture's `Timestamp` (local time, read in --timezone): temperatures, power draw and
  limit, clocks, utilisation, memory, PCIe generation / width / replays, ECC counts (SRAM + DRAM summed
  into the canonical totals), retired pages and remapped rows, the clocks-event reasons as DCGM's bitmask;
  every other number of the kept sections as `nvsmi_<path>`;
- `events`: one `gpu_identity` per GPU (UUID, serial, board / GPU part numbers, VBIOS, driver), and what
  the snapshot says is wrong: `gpu_row_remap_pending`, `gpu_row_remap_failure`, `gpu_retired_pages_pending`,
  `gpu_reset_required`, `gpu_pcie_width_degraded`.
"""

from __future__ import annotations

import re

from synestra_cli.errors import InputError
from synestra_cli.formats import staged, years
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.snapshot import fallback_host
from synestra_cli.store.sql import drop_temp, sql_file, temp_table

PARSE_SQL = sql_file(__package__, "nvidia_smi_q.sql")

# path -> (metric, how): `value` as printed, `sum` of the parts a newer layout splits a total into.
CANONICAL: dict[str, tuple[str, str]] = {
    "Temperature/GPU Current Temp": ("gpu_temp_celsius", "value"),
    "Temperature/Gpu": ("gpu_temp_celsius", "value"),
    "Temperature/Memory Current Temp": ("gpu_memory_temp_celsius", "value"),
    "GPU Power Readings/Power Draw": ("gpu_power_watts", "value"),
    "Power Readings/Power Draw": ("gpu_power_watts", "value"),
    "GPU Power Readings/Current Power Limit": ("gpu_power_limit_watts", "value"),
    "Power Readings/Enforced Power Limit": ("gpu_power_limit_watts", "value"),
    "Clocks/SM": ("gpu_sm_clock_mhz", "value"),
    "Clocks/Memory": ("gpu_memory_clock_mhz", "value"),
    "Utilization/Gpu": ("gpu_util_percent", "value"),
    "FB Memory Usage/Used": ("gpu_fb_used_mib", "value"),
    "FB Memory Usage/Free": ("gpu_fb_free_mib", "value"),
    "PCI/Replays Since Reset": ("gpu_pcie_replay_total", "value"),
    "PCI/GPU Link Info/PCIe Generation/Current": ("gpu_pcie_link_gen", "value"),
    "PCI/GPU Link Info/PCIe Generation/Max": ("gpu_pcie_link_gen_max", "value"),
    "PCI/GPU Link Info/Link Width/Current": ("gpu_pcie_link_width", "value"),
    "PCI/GPU Link Info/Link Width/Max": ("gpu_pcie_link_width_max", "value"),
    "Retired Pages/Double Bit ECC": ("gpu_retired_pages_dbe", "value"),
    "Retired Pages/Single Bit ECC": ("gpu_retired_pages_sbe", "value"),
    "Retired Pages/Pending Page Blacklist": ("gpu_retired_pages_pending", "value"),
    "Retired Pages/Pending": ("gpu_retired_pages_pending", "value"),
    "Remapped Rows/Correctable Error": ("gpu_correctable_remapped_rows_total", "value"),
    "Remapped Rows/Uncorrectable Error": ("gpu_uncorrectable_remapped_rows_total", "value"),
    "Remapped Rows/Pending": ("gpu_row_remap_pending", "value"),
    "Remapped Rows/Remapping Failure Occurred": ("gpu_row_remap_failure", "value"),
}
UNCORRECTABLE_PARTS = (
    "DRAM Uncorrectable",
    "SRAM Uncorrectable",
    "SRAM Uncorrectable Parity",
    "SRAM Uncorrectable SEC-DED",
)
# ECC totals: the old layout prints them, the new one splits them by memory (DCGM's totals are the sums).
for _scope in ("Volatile", "Aggregate"):
    _sbe, _dbe = f"gpu_ecc_sbe_{_scope.lower()}_total", f"gpu_ecc_dbe_{_scope.lower()}_total"
    CANONICAL[f"ECC Errors/{_scope}/Single Bit/Total"] = (_sbe, "value")
    CANONICAL[f"ECC Errors/{_scope}/Double Bit/Total"] = (_dbe, "value")
    for _part in ("DRAM Correctable", "SRAM Correctable"):
        CANONICAL[f"ECC Errors/{_scope}/{_part}"] = (_sbe, "sum")
    for _part in UNCORRECTABLE_PARTS:
        CANONICAL[f"ECC Errors/{_scope}/{_part}"] = (_dbe, "sum")

# Sections whose other numbers are kept as nvsmi_<path> (identity numbers, processes, inforom are not samples).
KEEP_PREFIXES = [
    "Temperature/",
    "GPU Power Readings/",
    "Power Readings/",
    "Module Power Readings/",
    "GPU Memory Power Readings/",
    "Clocks/",
    "Max Clocks/",
    "Applications Clocks/",
    "Clocks Event Reasons Counters/",
    "Utilization/",
    "FB Memory Usage/",
    "BAR1 Memory Usage/",
    "ECC Errors/",
    "PCI/GPU Link Info/",
    "PCI/Replay",
    "PCI/Tx Throughput",
    "PCI/Rx Throughput",
    "Fan Speed",
    "Performance State",
    "Voltage/",
]
# NVML's clocks-event reasons, as nvidia-smi names them, and their bit (= DCGM's bitmask).
BITS = {
    "Idle": 0x1,
    "GPU Idle": 0x1,
    "Applications Clocks Setting": 0x2,
    "SW Power Cap": 0x4,
    "HW Slowdown": 0x8,
    "Sync Boost": 0x10,
    "SW Thermal Slowdown": 0x20,
    "HW Thermal Slowdown": 0x40,
    "HW Power Brake Slowdown": 0x80,
    "Display Clock Setting": 0x100,
}
BANNER = re.compile(r"^=+\s*NVSMI LOG\s*=+\s*$", re.MULTILINE)
GPU_HEADER = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$", re.MULTILINE)
ATTRIBUTE = re.compile(r"^ {4}(?:Product Name|GPU UUID|Serial Number|PCI|Temperature)\b", re.MULTILINE)
TEMP_TABLES = ("_nvq_lines", "_nvq", "_nvq_gpus", "_nvq_metrics", "_nvq_events", "_nvq_map", "_nvq_bits")


def sniff(head: str) -> float:
    """The banner with a GPU block, or (a paste without the banner) GPU blocks of known attributes."""
    if "GPU " not in head or not GPU_HEADER.search(head):
        return 0.0
    if BANNER.search(head):
        return 0.95
    return 0.9 if ATTRIBUTE.search(head) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    host = fallback_host(ctx, result)
    conn = ctx.conn
    staged.stage_lines(ctx, "_nvq_lines")
    temp_table(
        conn,
        "_nvq_map",
        {
            "path": ("VARCHAR", list(CANONICAL)),
            "metric": ("VARCHAR", [m for m, _ in CANONICAL.values()]),
            "how": ("VARCHAR", [h for _, h in CANONICAL.values()]),
        },
    )
    temp_table(conn, "_nvq_bits", {"reason": ("VARCHAR", list(BITS)), "bit": ("BIGINT", list(BITS.values()))})
    params = {"tz": ctx.options.timezone, "mtime": ctx.mtime, "host": host, "keep": KEEP_PREFIXES}
    statements = [s for s in PARSE_SQL.split(";\n") if s.strip()]
    for sql in statements:
        conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    if conn.execute("SELECT count(*) FROM _nvq WHERE key = 'Timestamp' AND depth = 0").fetchone() == (0,):
        result.notes.append(f"{ctx.display}: no `Timestamp` line; samples placed at the file's mtime {ctx.mtime} UTC")
        years.record(conn, ctx.source_id, "mtime", ctx.mtime.year)  # no evidence for another file's year
    staged.rejects(ctx, result, "_nvq")
    conn.execute(
        "INSERT INTO gpus (host, entity, pci_bus_id, uuid, model, source_id) "
        "SELECT DISTINCT $host, entity, bus, uuid, model, $sid FROM _nvq_gpus ORDER BY entity",
        {"host": host, "sid": ctx.source_id},
    )
    gpus = conn.execute("SELECT count(DISTINCT entity) FROM _nvq_gpus").fetchone()
    if not gpus or not gpus[0]:
        raise InputError(f"{ctx.display}: no `GPU <bus id>` block: not nvidia-smi -q output")
    result.rows = staged.write_metrics(ctx, "_nvq_metrics") + staged.write_events(ctx, "_nvq_events") + gpus[0]
    drop_temp(conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "nvidia_smi_q",
    "nvidia-smi -q text report: GPU identity, ECC, retired pages / remapped rows, clocks events, PCIe, power",
    sniff,
    load,
    writes=frozenset({"gpus", "metrics", "metric_catalog", "events"}),
    top=0.95,
    priority=0,
)
