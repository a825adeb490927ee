"""Slurm hostlist expressions: `gpu-[001-004,009]`, `rack[1-2]-n[01-02]`, `a,b,c` -> host names.

Zero padding is kept as written (`[08-10]` -> 08, 09, 10). Each bracket group multiplies the names
(several groups form a cartesian product, as in Slurm). `None assigned` and `(null)` mean no hosts.
"""

from __future__ import annotations

import itertools
import re

# Top-level items: commas inside brackets do not separate hosts.
_ITEM_RE = re.compile(r"[^,\[]*(?:\[[^\]]*\][^,\[]*)*")
_PART_RE = re.compile(r"\[([^\]]*)\]")
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
# An expression expanding to more names than this is refused rather than exhausting memory.
MAX_HOSTS = 100_000
EMPTY = {"", "none assigned", "none", "(null)"}


class HostlistError(ValueError):
    """A hostlist expression that cannot be expanded (unbalanced brackets, bad range, too many names)."""


def _range_values(spec: str) -> list[str]:
    """`001-004,009` -> ['001', '002', '003', '004', '009']."""
    out: list[str] = []
    for piece in spec.split(","):
        m = _RANGE_RE.match(piece.strip())
        if not m:
            raise HostlistError(f"bad range {piece!r} in [{spec}]")
        lo_s, hi_s = m.group(1), m.group(2) or m.group(1)
        lo, hi = int(lo_s), int(hi_s)
        if hi < lo:
            raise HostlistError(f"descending range {piece!r}")
        if hi - lo + len(out) >= MAX_HOSTS:
            raise HostlistError(f"range [{spec}] expands to more than {MAX_HOSTS} names")
        width = len(lo_s)
        out.extend(str(i).zfill(width) for i in range(lo, hi + 1))
    return out


def _expand_item(item: str) -> list[str]:
    """One item with zero or more bracket groups: the cartesian product of its groups."""
    if item.count("[") != item.count("]"):
        raise HostlistError(f"unbalanced brackets in {item!r}")
    literals = _PART_RE.split(item)  # literal, group, literal, group, ..., literal
    choices = [[lit] if i % 2 == 0 else _range_values(lit) for i, lit in enumerate(literals)]
    total = 1
    for c in choices:
        total *= len(c)
    if total > MAX_HOSTS:
        raise HostlistError(f"{item!r} expands to more than {MAX_HOSTS} names")
    return ["".join(parts) for parts in itertools.product(*choices)]


def expand(expr: str | None) -> list[str]:
    """Host names of a Slurm hostlist expression, in order, duplicates removed."""
    if expr is None or expr.strip().lower() in EMPTY:
        return []
    text = expr.strip()
    items = [m.group(0) for m in _ITEM_RE.finditer(text) if m.group(0)]
    if ",".join(items) != text:
        raise HostlistError(f"malformed hostlist {expr!r}")
    hosts = [h for item in items for h in _expand_item(item.strip())]
    return list(dict.fromkeys(hosts))


_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress(hosts: list[str] | tuple[str, ...]) -> str:
    """The shortest hostlist of names `expand` reads back: `gpu-001,gpu-002,gpu-003,gpu-007` ->
    `gpu-[001-003,007]`. Names ending in digits group by prefix and width (zero padding kept: `gpu-9` and
    `gpu-009` are different names); the others are listed as they are. Duplicates are dropped; groups come in
    the order of their first name. A name with a bracket or comma cannot be written in a hostlist: ValueError."""
    groups: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for h in dict.fromkeys(hosts):
        if any(c in h for c in "[],") or not h.strip():
            raise HostlistError(f"{h!r} cannot be written in a hostlist")
        m = _NUMBERED.match(h)
        if not m:
            order.append(h)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = key = item
        nums = sorted(set(groups[key]))
        runs: list[list[int]] = []
        for n in nums:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        text = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs)
        parts.append(f"{prefix}{text}" if len(nums) == 1 else f"{prefix}[{text}]")
    return ",".join(parts)
