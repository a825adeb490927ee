"""The one bound on what a compressed input inflates to: a decompression bomb is one file's refusal.

Every gzip stream ingest decompresses goes through it: Python's reader (reading.open_binary, for every
format that reads lines or text) and the check that inflates a Prometheus export before DuckDB's own
reader reads it (prometheus._inspect). Two limits, both settings (settings.py):

- the ratio: once a file has inflated to RATIO_FLOOR_BYTES of text, its text may be at most
  SYNESTRA_MAX_INFLATE_RATIO (200) times the compressed bytes read so far. Checked as it inflates, so
  a bomb is refused after its first 64 MiB, not after its gigabytes (a bomb is uniform: its first
  megabyte inflates as much as its last);
- the bytes: at most SYNESTRA_MAX_INFLATED (16 GB) of text from one file, whatever its ratio.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from synestra_cli import settings
from synestra_cli.errors import InputError

CHUNK = 1 << 20  # what a read of the whole stream inflates at a time, between two checks


class InflateBudget:
    """What one compressed file may inflate to; `check(out, read)` raises InputError past it."""

    def __init__(self, path: Path | str) -> None:
        self.path = path
        self.ratio = settings.max_inflate_ratio()
        self.limit, self.limit_text = settings.max_inflated()

    def check(self, out: int, read: int) -> None:
        """`out` bytes of text so far from `read` compressed bytes."""
        if out > self.limit:
            raise InputError(
                f"{self.path}: inflates to more than {self.limit_text} of text (SYNESTRA_MAX_INFLATED): refused "
                "as a decompression bomb; raise SYNESTRA_MAX_INFLATED if it is a genuine export"
            )
        if out > settings.RATIO_FLOOR_BYTES and out > self.ratio * max(read, 1):
            raise InputError(
                f"{self.path}: inflates more than {self.ratio:g} times its size ({out >> 20} MiB of text from "
                f"{max(read, 1) / (1 << 20):.1f} MiB so far): refused as a decompression bomb; raise "
                "SYNESTRA_MAX_INFLATE_RATIO if it is a genuine export"
            )


class BoundedGzipFile(gzip.GzipFile):
    """gzip.GzipFile whose reads stop with InputError past the file's InflateBudget. Its position
    (tell) is the text read, its file's position the compressed bytes read."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(filename=str(path), mode="rb")
        self._budget = InflateBudget(path)

    def _checked(self) -> None:
        raw = self.myfileobj  # the compressed file, opened by name
        self._budget.check(self.tell(), raw.tell() if raw is not None else 0)

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:  # all of it: in blocks, each checked, never the whole bomb at once
            return b"".join(iter(lambda: self.read(CHUNK), b""))
        data = super().read(size)
        self._checked()
        return data

    def read1(self, size: int = -1) -> bytes:
        data = super().read1(size)
        self._checked()
        return data

    def readline(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:  # a line without end: in blocks too
            parts = []
            while (part := self.readline(CHUNK)) and (len(part) == CHUNK and not part.endswith(b"\n")):
                parts.append(part)
            return b"".join([*parts, part])
        data = super().readline(size)
        self._checked()
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        # forward seeks decompress what they skip: read in blocks, each checked
        if whence == 0 and offset > self.tell():
            while self.tell() < offset and self.read(min(CHUNK, offset - self.tell())):
                pass
            return self.tell()
        return super().seek(offset, whence)
