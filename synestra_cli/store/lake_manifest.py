"""The lake's files: where its parts and manifest entries live, and how one is written atomically.

A lake is a folder (or an object-store prefix) holding, for each ingested source, its Parquet parts and
one manifest entry `_manifest/source-<id>.json` that lists them (docs/lake.md). The entry is written
last: a reader sees a source's parts only through its entry, so a crash between the two leaves parts no
reader lists (the next ingest of that file writes them again under the same names). Every file lands
whole or not at all: on a local folder, written under a temporary name then renamed (POSIX rename is
atomic); on an object store, one PUT per object (an object appears whole or not at all).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from synestra_cli.errors import StoreError

LAYOUT = 1  # docs/lake.md's layout version; a lake written by a later layout is refused
LAKE_FILE = "_lake.json"  # {"layout": 1, "buckets": 16}: what every writer and reader must agree on
MANIFEST_DIR = "_manifest"
STAGING_DIR = "_staging"  # local parts being written (a crash may leave some: never listed)
DEFAULT_BUCKETS = 16
URL_SCHEMES = ("s3://", "gs://", "az://", "abfs://", "file://", "memory://")


@dataclass(frozen=True)
class Part:
    table: str
    path: str  # relative to the lake root, e.g. metrics/day=2026-11-29/bucket=3/part-00000012-0.parquet
    rows: int
    bytes: int
    day: str | None = None  # partition values (None: the table is not partitioned by it)
    bucket: int | None = None


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

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Entry:
        doc = json.loads(text)
        doc["parts"] = [Part(**p) for p in doc.get("parts", [])]
        return cls(**doc)


def entry_name(source_id: int) -> str:
    return f"{MANIFEST_DIR}/source-{source_id:08d}.json"


def part_source(rel: str) -> int | None:
    """The source id in a part's name (part-00000012.parquet, part-00000012-0.parquet)."""
    name = rel.rsplit("/", 1)[-1]
    digits = name.removeprefix("part-").split(".", 1)[0].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


class LakeFS(Protocol):
    """What the lake needs of a file system: whole-file writes, listing, reading, and a URL for DuckDB."""

    root: str

    def url(self, rel: str) -> str: ...
    def put_file(self, local: Path, rel: str) -> None: ...
    def write_text(self, rel: str, text: str) -> None: ...
    def read_text(self, rel: str) -> str | None: ...
    def listdir(self, rel_dir: str) -> list[str]: ...
    def parts(self) -> list[str]: ...
    def remove(self, rel: str) -> None: ...


class LocalFS:
    """A lake on a local (or mounted) folder: temp name then rename, fsynced so a power cut keeps it too."""

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve())

    def url(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def _replace(self, write: Any, rel: str) -> None:
        final = Path(self.url(rel))
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            write(tmp)
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)

    def put_file(self, local: Path, rel: str) -> None:
        """Move a finished local file into place: a rename when it is staged on the lake's own device."""
        final = Path(self.url(rel))
        final.parent.mkdir(parents=True, exist_ok=True)
        with open(local, "rb") as f:
            os.fsync(f.fileno())
        try:
            os.replace(local, final)
        except OSError:  # another device: copied under a temporary name, then renamed
            self._replace(lambda tmp: shutil.copyfile(local, tmp), rel)

    def write_text(self, rel: str, text: str) -> None:
        self._replace(lambda tmp: tmp.write_text(text, encoding="utf-8"), rel)

    def read_text(self, rel: str) -> str | None:
        try:
            return Path(self.url(rel)).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def listdir(self, rel_dir: str) -> list[str]:
        folder = Path(self.url(rel_dir))
        if not folder.is_dir():
            return []
        return sorted(f"{rel_dir}/{p.name}" for p in folder.iterdir() if not p.name.startswith("."))

    def parts(self) -> list[str]:
        root = Path(self.root)
        return sorted(p.relative_to(root).as_posix() for p in root.glob("*/**/part-*.parquet"))

    def remove(self, rel: str) -> None:
        Path(self.url(rel)).unlink(missing_ok=True)


class FsspecFS:
    """A lake on an object store through fsspec (s3fs for s3://): one PUT per object, atomic per object."""

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise StoreError(
                f"{url}: an object-store lake needs fsspec and s3fs: pip install 'synestra[lake-s3]'"
            ) from exc
        self.root = url.rstrip("/")
        self.protocol = url.split("://", 1)[0]
        try:
            self.fs = fsspec.filesystem(self.protocol, **_storage_options(self.protocol))
        except (ImportError, ValueError) as exc:
            raise StoreError(f"{url}: no file system for {self.protocol}:// ({exc}): pip install s3fs") from exc

    def url(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def put_file(self, local: Path, rel: str) -> None:
        self.fs.put_file(str(local), self.url(rel))

    def write_text(self, rel: str, text: str) -> None:
        self.fs.pipe_file(self.url(rel), text.encode("utf-8"))

    def read_text(self, rel: str) -> str | None:
        try:
            return str(self.fs.cat_file(self.url(rel)).decode("utf-8"))
        except FileNotFoundError:
            return None

    def listdir(self, rel_dir: str) -> list[str]:
        self.fs.invalidate_cache()
        try:
            names = self.fs.ls(self.url(rel_dir), detail=False)
        except FileNotFoundError:
            return []
        return sorted(f"{rel_dir}/{str(n).rstrip('/').rsplit('/', 1)[-1]}" for n in names)

    def parts(self) -> list[str]:
        self.fs.invalidate_cache()
        prefix = self.root.split("://", 1)[1] + "/"
        return sorted(str(p).split(prefix, 1)[1] for p in self.fs.glob(f"{self.root}/*/**/part-*.parquet"))

    def remove(self, rel: str) -> None:
        with suppress(FileNotFoundError):
            self.fs.rm_file(self.url(rel))


def _storage_options(protocol: str) -> dict[str, Any]:
    """$AWS_ENDPOINT_URL (MinIO, moto, a site's own S3) for s3://; the rest from the usual AWS settings."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("SYNESTRA_S3_ENDPOINT")
    if protocol == "s3" and endpoint:
        return {"client_kwargs": {"endpoint_url": endpoint}}
    return {}


def open_fs(target: str) -> LakeFS:
    if "://" in target and not target.startswith("file://"):
        return FsspecFS(target)
    return LocalFS(Path(target.removeprefix("file://")))


def read_settings(fs: LakeFS, create: bool) -> dict[str, int]:
    """The lake's _lake.json; written on the first ingest. A later layout is refused."""
    text = fs.read_text(LAKE_FILE)
    if text is None:
        if not create:
            return {"layout": LAYOUT, "buckets": DEFAULT_BUCKETS}
        settings = {"layout": LAYOUT, "buckets": DEFAULT_BUCKETS}
        fs.write_text(LAKE_FILE, json.dumps(settings))
        return settings
    try:
        settings = {k: int(v) for k, v in json.loads(text).items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise StoreError(f"lake {fs.root}: {LAKE_FILE} is not valid ({exc})") from exc
    if settings.get("layout", 0) > LAYOUT:
        raise StoreError(
            f"lake {fs.root} has layout {settings['layout']}, newer than this synestra's {LAYOUT}: upgrade synestra"
        )
    return settings


def read_entries(fs: LakeFS, live_only: bool = True) -> list[Entry]:
    """Every manifest entry, in source order, without the sources a later entry replaced (live_only)."""
    entries = []
    for name in fs.listdir(MANIFEST_DIR):
        if not name.endswith(".json"):
            continue
        text = fs.read_text(name)
        if text is None:  # removed between the listing and the read
            continue
        try:
            entries.append(Entry.from_json(text))
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"lake {fs.root}: manifest entry {name} is not valid ({exc})") from exc
    entries.sort(key=lambda e: e.source_id)
    if not live_only:
        return entries
    replaced = {sid for e in entries for sid in e.replaces}
    return [e for e in entries if e.source_id not in replaced]


@contextmanager
def staging_dir(fs: LakeFS) -> Iterator[Path]:
    """A local folder for parts being written: inside the lake when it is local (a rename then moves
    them), else in the system's temp folder."""
    if isinstance(fs, LocalFS):
        base = Path(fs.url(STAGING_DIR))
        base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))
    else:
        folder = Path(tempfile.mkdtemp(prefix="synestra-lake-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
