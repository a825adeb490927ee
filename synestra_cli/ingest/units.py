"""The inputs cut into units of work: what one worker parses at a time (ingest/run.py hands them out)."""

from __future__ import annotations

from pathlib import Path

from synestra_cli.formats.reading import text_bytes
from synestra_cli.ingest.walk import WalkIssue

# Consecutive small files are handed to a worker together, up to UNIT_FILES or UNIT_TEXT_BYTES of text: those
# of a format that loads many at once (Format.load_group) are then parsed by the same statements. Text, not
# bytes on disk: a unit's memory is its lines, and gzip holds ~9x more per byte. Units of 16 MB of gzipped
# optics CSV (~140 MB of lines), two at once, spilled DuckDB's pool to disk: the campus's 512 files took 24 s
# with two workers, 16 s with one; 32 MB of text: 16 s with two, 1.1 GB peak instead of 1.5. A file over
# UNIT_ALONE_BYTES on disk is a unit of its own: the workers share the big files.
UNIT_FILES = 256
UNIT_TEXT_BYTES = 32 << 20
UNIT_ALONE_BYTES = 1 << 20


def work_units(items: list[Path | WalkIssue], chosen: list[int] | None = None) -> list[list[int]]:
    """The indices of the inputs (those chosen, in order), cut into units of work (a WalkIssue alone)."""
    units: list[list[int]] = []
    unit: list[int] = []
    size = 0
    for i in range(len(items)) if chosen is None else chosen:
        item = items[i]
        on_disk, text = (0, 0) if isinstance(item, WalkIssue) else _sizes(item)
        if isinstance(item, WalkIssue) or on_disk > UNIT_ALONE_BYTES:  # alone, in order
            units += [unit, [i]] if unit else [[i]]
            unit, size = [], 0
            continue
        if unit and (len(unit) >= UNIT_FILES or size + text > UNIT_TEXT_BYTES):
            units.append(unit)
            unit, size = [], 0
        unit.append(i)
        size += text
    return units + [unit] if unit else units


def _sizes(path: Path) -> tuple[int, int]:
    """The file's bytes on disk and of text (0, 0: unreadable, it fails when planned)."""
    try:
        return path.stat().st_size, text_bytes(path)
    except OSError:
        return 0, 0
