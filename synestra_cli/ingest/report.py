"""What ingest says about each file."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class FileReport:
    path: str
    status: str  # loaded | skipped (already in store) | failed | empty (a folder)
    format: str | None = None
    rows: int = 0
    rejected: int = 0
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    hosts: list[str] = field(default_factory=list)
    error: str | None = None
    reject_samples: list[tuple[int | None, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    source_id: int | None = None
    replaced: list[int] = field(default_factory=list)  # sources this file replaced (it changed)
