"""The format registry: every parser Synestra has, and content-based detection.

Order matters only to break ties between equal sniff scores (more specific formats first).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from synestra_cli.errors import UnknownFormatError

# Module names under synestra_cli.formats, one per input format family.
FORMAT_MODULES: list[str] = [
    "mlperf",
    "megatron",
    "nemo",
    "torchtitan",
    "deepspeed",
    "orbax",
    "torch_failures",
    "syslog",
    "sacct",
    "ib_counters",
    "ethtool",
    "mlxlink",
    "sonic_fec",
    "gnmi",
    "topology_csv",
    "ibnetdiscover",
    "prometheus",
    "prom_json",
    "metrics_long",
]


def all_formats() -> dict[str, ModuleType]:
    """NAME -> parser module. A module may declare several names via NAMES."""
    found: dict[str, ModuleType] = {}
    for mod_name in FORMAT_MODULES:
        mod = importlib.import_module(f"synestra_cli.formats.{mod_name}")
        found[mod.NAME] = mod
    return found


def detect(head: str) -> ModuleType:
    """The parser that recognises this content best, or UnknownFormatError."""
    best: tuple[float, ModuleType | None] = (0.0, None)
    for mod in all_formats().values():
        score = float(mod.sniff(head))
        if score > best[0]:
            best = (score, mod)
    if best[1] is None:
        raise UnknownFormatError("unknown format (use --format NAME to force one; `synestra formats` lists them)")
    return best[1]


def by_name(name: str) -> ModuleType:
    formats = all_formats()
    if name not in formats:
        raise UnknownFormatError(f"no format named {name!r}; known: {', '.join(sorted(formats))}")
    return formats[name]
