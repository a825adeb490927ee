"""The file systems a lake lives on: a local (or mounted) folder, where each file is written under a
temporary name then renamed, or an object store through fsspec (s3://, gs://, az://), where each object
is one PUT; both behind `LakeFS`, what the lake needs of a file system (store/lake_manifest.py: what it
writes there). Split from lake_manifest.py."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

from synestra_cli.errors import StoreError

STAGING_DIR = "_staging"  # local parts being written (a crash may leave some: never listed)


class LakeFS(Protocol):
    """What the lake needs of a file system: whole-file writes, listing, reading, and a URL for DuckDB."""

    root: str

    def url(self, rel: str) -> str: ...
    def put_file(self, local: Path, rel: str) -> None: ...
    def write_text(self, rel: str, text: str) -> None: ...
    def read_text(self, rel: str) -> str | None: ...
    def read_many(self, rels: list[str]) -> dict[str, str | None]: ...
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

    def read_many(self, rels: list[str]) -> dict[str, str | None]:
        return {rel: self.read_text(rel) for rel in rels}

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

    def read_many(self, rels: list[str]) -> dict[str, str | None]:
        """Many small objects at once (s3fs fetches them concurrently), None for those gone."""
        if not rels:
            return {}
        got = self.fs.cat([self.url(r) for r in rels], on_error="omit")
        by_path = {str(k).split("://", 1)[-1]: v for k, v in got.items()}
        return {
            r: (v.decode("utf-8") if (v := by_path.get(self.url(r).split("://", 1)[-1])) is not None else None)
            for r in rels
        }

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
