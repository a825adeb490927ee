"""A lake's parts against its manifest, as each reader checks them when it opens a local lake: a part
missing, or not the size it was written with (replaced by other Parquet, or by junk), is refused by name
before a query reads it (issue 38). `synestra check` (store/check.py) checks more: hashes and footers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from synestra_cli.errors import StoreError
from synestra_cli.store.lake_fs import LakeFS, LocalFS
from synestra_cli.store.lake_manifest import Entry, Part


@dataclass
class Damage:
    path: str
    source_id: int | None
    problem: str


def owner(entry: Entry, part: Part) -> int | None:
    return None if part.sources else entry.source_id


def size_problem(fs: LocalFS, part: Part) -> str | None:
    """Why a local part does not match its entry's size (None: it does)."""
    try:
        size = os.stat(fs.url(part.path)).st_size
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if size != part.bytes:
        return f"{size:,} bytes where the manifest says {part.bytes:,}: replaced or damaged"
    return None


def verify_sizes(fs: LakeFS, entries: list[Entry]) -> list[Damage]:
    """Every part of these entries that is missing or not the size it was written with (a local lake;
    an object store's sizes would cost a listing per open: `synestra check` reads them)."""
    if not isinstance(fs, LocalFS):
        return []
    return [
        Damage(p.path, owner(e, p), problem)
        for e in entries
        for p in e.parts
        if (problem := size_problem(fs, p)) is not None
    ]


def damaged_error(root: str, damage: list[Damage]) -> StoreError:
    first = damage[0]
    more = f" (and {len(damage) - 1} more part(s))" if len(damage) > 1 else ""
    owner = f" of source {first.source_id}" if first.source_id is not None else ""
    return StoreError(
        f"lake {root}: part {first.path}{owner} does not match the manifest: {first.problem}{more}; restore it "
        "from a copy, or `synestra forget` its source and ingest the file again (`synestra check` lists them all)"
    )
