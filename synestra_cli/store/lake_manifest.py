"""The lake's files: where its parts and manifest entries live, and how one is written atomically.

A lake is a folder (or an object-store prefix) holding, for each ingested source, its Parquet parts and
one manifest entry `_manifest/source-<id>.json` that lists them (docs/lake.md). The entry is written
last: a reader sees a source's parts only through its entry, so a crash between the two leaves parts no
reader lists (the next ingest of that file writes them again under the same names). Every file lands
whole or not at all: on a local folder, written under a temporary name then renamed (POSIX rename is
atomic); on an object store, one PUT per object (an object appears whole or not at all).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synestra_cli import settings
from synestra_cli.errors import StoreError
from synestra_cli.store.lake_fs import LakeFS

# docs/lake.md's layout version; a lake written by a later layout is refused. 2: compacted parts, which
# hold rows of several sources (a layout-1 synestra would read them beside the parts they replace).
# 3: each part's sha256 in the manifest (a layout-2 synestra would fail on the field).
LAYOUT = 3
LAKE_FILE = "_lake.json"  # {"layout": 1, "buckets": 16}: what every writer and reader must agree on
MANIFEST_DIR = "_manifest"
DEFAULT_BUCKETS = settings.DEFAULT_LAKE_BUCKETS
SOURCE, FORGET, COMPACT = "source", "forget", "compact"  # an entry's kinds
CHECKPOINT_PREFIX = f"{MANIFEST_DIR}/checkpoint-"  # a compacted manifest: every live entry up to an id
READ_TRIES = 5  # a listing raced by a compaction or a replace is read again
URL_SCHEMES = ("s3://", "gs://", "az://", "abfs://", "file://", "memory://")


@dataclass(frozen=True)
class Part:
    table: str
    path: str  # relative to the lake root, e.g. metrics/day=2026-11-29/bucket=3/part-00000012-0.parquet
    rows: int
    bytes: int
    day: str | None = None  # partition values (None: the table is not partitioned by it)
    bucket: int | None = None
    # A compacted part (lake_compact.py): [[source id, rows], ...] of the sources whose rows it holds, in
    # source order. None: the rows of the source its name carries.
    sources: list[list[int]] | None = None
    sha256: str | None = None  # of its bytes as written (layout 3; None: written by an earlier layout)

    def order(self) -> int:
        """Where its rows stand in source order: its first source's id."""
        if self.sources:
            return self.sources[0][0]
        return part_source(self.path) or 0

    def to_doc(self) -> dict[str, Any]:
        doc = dict(self.__dict__)
        for optional in ("sources", "sha256"):
            if doc[optional] is None:
                del doc[optional]
        return doc


@dataclass
class Entry:
    """One manifest entry: a source and the parts it wrote, and the earlier sources it replaces."""

    source_id: int
    sha256: str
    source_key: str
    path: str
    format: str
    parts: list[Part] = field(default_factory=list)
    replaces: list[int] = field(default_factory=list)
    layout: int = LAYOUT
    # FORGET: `synestra forget`'s entry, which replaces the sources it removes; COMPACT: a compaction's
    # (or a rewrite's), which owns the compacted parts
    kind: str = SOURCE

    def to_json(self) -> str:
        return json.dumps(self.to_doc(), indent=1, sort_keys=True)

    def to_doc(self) -> dict[str, Any]:
        """As a JSON object (what asdict gives, without its deep copies: 10^4 entries in a checkpoint)."""
        doc = dict(self.__dict__)
        doc["parts"] = [p.to_doc() for p in self.parts]
        return doc

    @classmethod
    def from_json(cls, text: str) -> Entry:
        return cls.from_doc(json.loads(text))

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> Entry:
        return cls(**{**doc, "parts": [Part(**p) for p in doc.get("parts", [])]})


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes (a part just written: in the page cache)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def mark_layout(fs: LakeFS) -> None:
    """Raise the lake's layout to this synestra's as a writer adds what an earlier one cannot read
    (compacted parts, checksummed parts): that synestra then refuses the lake by name."""
    text = fs.read_text(LAKE_FILE)
    doc = json.loads(text) if text else {}
    if doc.get("layout", 0) < LAYOUT:
        fs.write_text(LAKE_FILE, json.dumps({**doc, "layout": LAYOUT}))


def entry_name(source_id: int) -> str:
    return f"{MANIFEST_DIR}/source-{source_id:08d}.json"


def checkpoint_name(last_id: int) -> str:
    return f"{CHECKPOINT_PREFIX}{last_id:08d}.json"


def _name_id(rel: str) -> int | None:
    digits = rel.rsplit("-", 1)[-1].removesuffix(".json")
    return int(digits) if digits.isdigit() else None


def part_source(rel: str) -> int | None:
    """The source id in a part's name (part-00000012.parquet, part-00000012-0.parquet)."""
    name = rel.rsplit("/", 1)[-1]
    digits = name.removeprefix("part-").split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


def read_settings(fs: LakeFS, create: bool) -> dict[str, int]:
    """The lake's _lake.json; written on the first ingest. A later layout is refused."""
    text = fs.read_text(LAKE_FILE)
    if text is None:
        if not create:
            return {"layout": LAYOUT, "buckets": DEFAULT_BUCKETS}
        # the host buckets, fixed for the lake's life: a job reads the buckets of its hosts, so a big
        # fleet wants more (an 8-host job spans 5 of 16, 8 of 256)
        doc = {"layout": LAYOUT, "buckets": settings.lake_buckets()}
        fs.write_text(LAKE_FILE, json.dumps(doc))
        return doc
    try:
        doc = {k: int(v) for k, v in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise StoreError(f"lake {fs.root}: {LAKE_FILE} is not valid ({exc})") from exc
    if doc.get("layout", 0) > LAYOUT:
        raise StoreError(
            f"lake {fs.root} has layout {doc['layout']}, newer than this synestra's {LAYOUT}: upgrade synestra"
        )
    return doc


@dataclass
class Manifest:
    """What a lake has committed: its entries in source order (a checkpoint's, then the loose ones after
    it), the last id it has used (replaced and forgotten ones included), how many entries are loose, and
    the parts a compaction retired that are not deleted yet ({"path", "at"}: lake_compact.py)."""

    entries: list[Entry]
    last_id: int
    checkpoint: int  # the id the newest checkpoint covers (0: none)
    loose: int
    retired: list[dict[str, Any]] = field(default_factory=list)

    def live(self) -> list[Entry]:
        """The sources a reader sees: entries no later entry replaces, without forget's own entries."""
        replaced = {sid for e in self.entries for sid in e.replaces}
        return [e for e in self.entries if e.source_id not in replaced and e.kind == SOURCE]

    def kept(self) -> list[Entry]:
        """Every entry whose parts a reader lists: live sources, and forget entries (which keep what a
        forgotten source added to keyed tables, as a store file's forget does)."""
        replaced = {sid for e in self.entries for sid in e.replaces}
        return [e for e in self.entries if e.source_id not in replaced]


def read_manifest(fs: LakeFS) -> Manifest:
    """The newest checkpoint and the loose entries after it. A file listed but gone when read (a
    compaction or a replace removed it meanwhile) means the listing is stale: it is listed again, so a
    reader never sees half a manifest."""
    for _ in range(READ_TRIES):
        manifest = _try_read(fs)
        if manifest is not None:
            return manifest
    raise StoreError(f"lake {fs.root}: its manifest kept changing while read ({READ_TRIES} tries); try again")


def _try_read(fs: LakeFS) -> Manifest | None:
    names = [n for n in fs.listdir(MANIFEST_DIR) if n.endswith(".json")]
    points = sorted((i, n) for n in names if n.startswith(CHECKPOINT_PREFIX) and (i := _name_id(n)) is not None)
    upto, entries, retired = 0, [], []
    if points:
        upto, name = points[-1]
        text = fs.read_text(name)
        if text is None:
            return None
        doc = _parse(fs, name, text)
        entries = [Entry.from_doc(e) for e in doc["entries"]]
        retired = list(doc.get("retired", []))
    loose = [n for n in names if not n.startswith(CHECKPOINT_PREFIX) and (_name_id(n) or 0) > upto]
    texts = fs.read_many(loose)
    if any(t is None for t in texts.values()):
        return None
    for name in loose:
        try:
            entries.append(Entry.from_json(texts[name] or ""))
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"lake {fs.root}: manifest entry {name} is not valid ({exc})") from exc
    entries.sort(key=lambda e: e.source_id)
    last = max([upto, *(e.source_id for e in entries)])
    return Manifest(entries, last, upto, len(loose), retired)


def _parse(fs: LakeFS, name: str, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            raise ValueError("no entries")
    except ValueError as exc:
        raise StoreError(f"lake {fs.root}: manifest checkpoint {name} is not valid ({exc})") from exc
    return doc


def read_entries(fs: LakeFS, live_only: bool = True) -> list[Entry]:
    """Every manifest entry, in source order; with live_only, the sources a reader sees."""
    manifest = read_manifest(fs)
    return manifest.live() if live_only else manifest.entries


def write_checkpoint(fs: LakeFS, manifest: Manifest, retain: float) -> str:
    """Compact the manifest: one object holding every kept entry up to its last id, written whole (a
    temporary name renamed, or one PUT); then the loose entries and older checkpoints it covers are
    removed. A reader lists either the old files or the checkpoint, never half of each (read_manifest).
    Retired parts older than `retain` seconds are deleted first and leave the list (`manifest.retired`
    is updated): a crash in between leaves them listed, and deleting them again is harmless."""
    now = time.time()
    due = [r for r in manifest.retired if now - float(r["at"]) >= retain]
    for item in due:
        fs.remove(str(item["path"]))
    manifest.retired = [r for r in manifest.retired if now - float(r["at"]) < retain]
    name = checkpoint_name(manifest.last_id)
    kept = [e.to_doc() for e in manifest.kept() if e.kind == SOURCE or e.parts]
    doc = {"layout": LAYOUT, "last_id": manifest.last_id, "entries": kept, "retired": manifest.retired}
    fs.write_text(name, json.dumps(doc))
    for old in fs.listdir(MANIFEST_DIR):
        if old != name and (_name_id(old) or 0) <= manifest.last_id:
            fs.remove(old)
    return name
