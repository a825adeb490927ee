"""One writer at a time on a lake, as DuckDB's single-writer rule gives a store file (readers never wait).

A local (or mounted) lake: an exclusive flock on `_lake.lock`, released by the kernel when the writer
dies. An S3 lake: a lock object `_lake.lock` created with a conditional PUT (`If-None-Match: *`: of two
writers, exactly one creates it) holding its owner and a lease. The holder renews the lease from a
background thread (a PUT with `If-Match` on the ETag it last wrote) and checks before each manifest
commit that it still holds it; a writer that died leaves a lease that expires, and the next writer takes
it over with the same `If-Match` (of two, one wins). Other object stores (gs://, az://) have no lock:
docs/lake.md says to give each prefix one writer.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from synestra_cli import settings
from synestra_cli.errors import StoreBusyError, StoreError
from synestra_cli.store.lake_fs import FsspecFS, LakeFS, LocalFS

LOCK_FILE = "_lake.lock"
DEFAULT_LEASE_S = settings.DEFAULT_LAKE_LEASE_S


class WriterLock(Protocol):
    def check(self) -> None:
        """Raise StoreBusyError unless this writer still holds the lake (called before each commit)."""

    def release(self) -> None: ...


def take(fs: LakeFS) -> WriterLock | None:
    """The lake's writer lock, waited for up to $SYNESTRA_LOCK_WAIT seconds; None where there is none."""
    if isinstance(fs, LocalFS):
        return FileLock(Path(fs.root))
    if isinstance(fs, FsspecFS) and fs.protocol in ("s3", "s3a"):
        return S3Lock(fs)
    return None


def lease_s() -> float:
    """SYNESTRA_LAKE_LEASE: seconds an S3 writer's lease lasts unrenewed (a dead writer's, before another
    may take the lake over)."""
    return settings.lake_lease_s()


def _busy(root: str, holder: str) -> StoreBusyError:
    return StoreBusyError(
        f"lake {root} is being written by another synestra ({holder}); wait for it, or use another --db "
        "(one writer at a time: docs/lake.md)"
    )


class FileLock:
    """flock on LAKE/_lake.lock: released when the process ends, however it ends."""

    def __init__(self, root: Path) -> None:
        try:
            root.mkdir(parents=True, exist_ok=True)
            self._file: Any = open(root / LOCK_FILE, "a+")  # noqa: SIM115 - held until release()
        except OSError as exc:
            raise StoreError(f"cannot create lake {root}: {exc.strerror}") from exc
        deadline = time.monotonic() + settings.lock_wait_s()
        while True:
            try:
                fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._file.close()
                    raise _busy(str(root), "an ingest, forget or compaction on this machine") from None
                time.sleep(0.2)

    def check(self) -> None:
        return None  # the kernel keeps it for as long as we live

    def release(self) -> None:
        self._file.close()


class S3Lock:
    """A lock object with a lease, created and renewed by conditional PUTs."""

    def __init__(self, fs: FsspecFS) -> None:
        self.fs = fs
        self.bucket, _, prefix = fs.root.split("://", 1)[1].partition("/")
        self.key = f"{prefix}/{LOCK_FILE}" if prefix else LOCK_FILE
        self.owner = f"{socket.gethostname()} pid {os.getpid()} {uuid.uuid4().hex[:8]}"
        self.lease = lease_s()
        self.etag = ""
        self.renewed = 0.0
        self.lost = False
        self._stop = threading.Event()
        self._acquire(time.monotonic() + settings.lock_wait_s())
        self._thread = threading.Thread(target=self._renew_loop, name="synestra-lake-lease", daemon=True)
        self._thread.start()

    def _body(self) -> bytes:
        now = time.time()
        doc = {
            "owner": self.owner,
            "lease_s": self.lease,
            "renewed": datetime.fromtimestamp(now, UTC).isoformat(timespec="seconds"),
            "expires": now + self.lease,
        }
        return json.dumps(doc).encode()

    def _put(self, **condition: str) -> str | None:
        """PUT the lock object under `condition`; its new ETag, or None when the condition failed."""
        try:
            out = self.fs.fs.call_s3("put_object", Bucket=self.bucket, Key=self.key, Body=self._body(), **condition)
        except Exception as exc:  # s3fs maps a 412 (or a 409 of a concurrent conditional PUT) to OSError
            if _precondition_failed(exc):
                return None
            raise StoreError(f"lake {self.fs.root}: cannot write its lock object {LOCK_FILE}: {exc}") from exc
        return str(out.get("ETag", ""))

    def _current(self) -> tuple[dict[str, Any], str] | None:
        """The lock object's body and ETag (two requests: a takeover with a stale ETag just fails)."""
        url = self.fs.url(LOCK_FILE)
        self.fs.fs.invalidate_cache(url)
        try:
            etag = str(self.fs.fs.info(url).get("ETag", ""))
            raw = self.fs.fs.cat_file(url)
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = {}
        return (doc if isinstance(doc, dict) else {}), etag

    def _acquire(self, deadline: float) -> None:
        while True:
            etag = self._put(IfNoneMatch="*")
            if etag is None:
                held = self._current()
                if held is not None and float(held[0].get("expires", 0)) < time.time():
                    etag = self._put(IfMatch=held[1])  # a dead writer's lease: take it over, if no one else does
                elif held is None:
                    continue  # released between our PUT and our GET: try again at once
            if etag is not None:
                self.etag, self.renewed = etag, time.monotonic()
                return
            if time.monotonic() >= deadline:
                doc = held[0] if held else {}
                holder = f"{doc.get('owner', 'unknown')}, lease renewed {doc.get('renewed', '?')}"
                raise _busy(self.fs.root, f"{holder} for {doc.get('lease_s', '?')} s")
            time.sleep(0.5)

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease / 3):
            try:
                etag = self._put(IfMatch=self.etag)
            except StoreError:
                continue  # a failed request: the next one may pass; check() counts the time unrenewed
            if etag is None:
                self.lost = True  # another writer took it over: our lease had expired
                return
            self.etag, self.renewed = etag, time.monotonic()

    def check(self) -> None:
        if self.lost or time.monotonic() - self.renewed > self.lease * 0.9:
            raise _busy(self.fs.root, "this ingest's lease expired before its commit; the lake may have another writer")

    def release(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self.lost:
            return
        held = self._current()
        if held is not None and held[0].get("owner") == self.owner:
            self.fs.remove(LOCK_FILE)


def _precondition_failed(exc: Exception) -> bool:
    text = f"{type(exc).__name__} {exc} {getattr(exc, '__cause__', '')}"
    return any(s in text for s in ("PreconditionFailed", "412", "ConditionalRequestConflict", "409"))
