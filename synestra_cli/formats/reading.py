"""An input file's bytes as text: a gzip stream (bounded), its encoding, its lines as Arrow tables.

What every format reads through (formats/base.py's LoadContext, ingest's planning and sniffing): the
head that sniffing sees, the whole text, or batches of (lineno, line) built with numpy and Arrow buffers,
never a Python object per line.
"""

from __future__ import annotations

import codecs
import gzip
import os
import stat
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.inflate import BoundedGzipFile

HEAD_BYTES = 64 * 1024
BATCH_BYTES = 32 * 1024 * 1024  # lines are parsed in batches of about this size: bounded memory
UTF8_BOM = codecs.BOM_UTF8

GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == GZIP_MAGIC


def open_binary(path: Path):
    """The file's bytes; a gzip stream's text, bounded against decompression bombs (formats/inflate.py)."""
    return BoundedGzipFile(path) if is_gzip(path) else open(path, "rb")


def text_bytes(path: Path) -> int:
    """What a regular file holds once decompressed: a gzip file's trailer (ISIZE) gives its last member's
    size, mod 4 GiB (an estimate); any other file's size on disk."""
    st = path.stat()
    on_disk = st.st_size
    if not stat.S_ISREG(st.st_mode) or on_disk < 18:  # a FIFO or device is not opened (it would block)
        return on_disk
    with open(path, "rb") as f:
        if f.read(2) != GZIP_MAGIC:
            return on_disk
        f.seek(-4, os.SEEK_END)
        return max(on_disk, int.from_bytes(f.read(4), "little"))


def content_mtime(path: Path) -> datetime:
    """When the content was last written (UTC, naive): a gzip header's MTIME when set (gunzip restores
    it: it survives copies and checkouts that reset the file's own), else the file's mtime."""
    with open(path, "rb") as f:
        header = f.read(8)
    if header[:2] == GZIP_MAGIC and len(header) == 8:
        stamp = int.from_bytes(header[4:8], "little")
        if stamp:
            return datetime.fromtimestamp(stamp, UTC).replace(tzinfo=None)
    return datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(tzinfo=None)


def read_bytes(path: Path) -> bytes:
    try:
        with open_binary(path) as f:
            return f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip ({exc})") from exc


def decode(data: bytes) -> str:
    # Invalid UTF-8 is replaced (U+FFFD), never fatal: the line is kept and still parsed. A BOM
    # (Windows tools write one) is not part of the first line.
    return data.decode("utf-8-sig", errors="replace")


def utf16_codec(head: bytes) -> str | None:
    """'utf-16' (with a BOM), 'utf-16-le' / 'utf-16-be' (without one, ASCII-range text), else None."""
    if head[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
        return "utf-16"
    sample = head[:4096] if len(head) >= 4 else b""
    if not sample:
        return None
    even, odd = sample[0::2], sample[1::2]
    if odd.count(0) > 0.9 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if even.count(0) > 0.9 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    return None


def transcode_to_utf8(path: Path, codec: str, out: Path, block: int = 1 << 20) -> None:
    """Write the UTF-16 (or BOM-prefixed UTF-8) file as plain UTF-8, streaming: parsers then read the copy."""
    decoder = codecs.getincrementaldecoder(codec)(errors="replace")
    with open_binary(path) as src, open(out, "wb") as dst:
        for chunk in iter(lambda: src.read(block), b""):
            dst.write(decoder.decode(chunk).encode("utf-8"))
        dst.write(decoder.decode(b"", final=True).encode("utf-8"))


def read_head(path: Path, size: int = HEAD_BYTES) -> bytes:
    try:
        with open_binary(path) as f:
            return f.read(size)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip ({exc})") from exc


def cr_only(data: bytes) -> bool:
    """Lines that end in a carriage return alone (classic Mac OS, some serial-console captures): no LF at
    all, and a CR. A CR inside an LF file (a progress bar redrawn) stays inside its line, as `sed -n Np`
    and editors number lines."""
    return b"\r" in data and b"\n" not in data


def lines_to_table(text: str | bytes, first_lineno: int, cr_lines: bool | None = None) -> pa.Table:
    """Split into lines (lineno int64, line string) with numpy and Arrow buffers: no Python object
    per line. LF or CRLF endings, or CR alone (`cr_lines`; None: when the text has no LF at all, see
    cr_only); a last line without a newline is kept; invalid UTF-8 is replaced."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if not _valid_utf8(data):
        data = decode(data).encode("utf-8")
    if cr_only(data) if cr_lines is None else cr_lines:
        data = data.replace(b"\r", b"\n")
    if b"\r" in data and b"\r\n" in data:  # the first test is a cheap memchr
        data = data.replace(b"\r\n", b"\n")
    if data.endswith(b"\n"):
        data = data[:-1]
    if data.endswith(b"\r"):
        data = data[:-1]
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    n = len(newlines) + 1
    # In the packed buffer (newlines removed), line k ends where its newline was, less the k before it.
    offsets = np.empty(n + 1, dtype=np.int64)
    offsets[0] = 0
    offsets[1:n] = newlines - np.arange(len(newlines), dtype=np.int64)
    offsets[n] = len(data) - len(newlines)
    packed = data.replace(b"\n", b"") if len(newlines) else data
    lines = pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(packed))
    return pa.table({"lineno": pa.array(np.arange(first_lineno, first_lineno + n, dtype=np.int64)), "line": lines})


def _valid_utf8(data: bytes) -> bool:
    try:
        pa.array([data], pa.binary()).cast(pa.string())  # validates in C, no Python str built
        return True
    except pa.ArrowInvalid:
        return False


def iter_line_batches(
    path: Path, batch_bytes: int = BATCH_BYTES, offset: int = 0, first_line: int = 1, end: int | None = None
) -> Iterator[pa.Table]:
    lineno = first_line
    carry = b""
    cr_lines: bool | None = None  # decided on the file's first block (cr_only): its line endings
    try:
        with open_binary(path) as f:
            if offset:
                f.seek(offset)  # a gzip stream seeks forward by decompressing
            first = offset == 0
            left = None if end is None else end - offset
            while True:
                block = f.read(batch_bytes if left is None else min(batch_bytes, left))
                if left is not None:
                    left -= len(block)
                if not block:
                    break
                if first and block.startswith(UTF8_BOM):
                    block = block[len(UTF8_BOM) :]
                first = False
                if cr_lines is None:
                    cr_lines = cr_only(block)
                if cr_lines:
                    block = block.replace(b"\r", b"\n")
                block = carry + block
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry = block
                    continue
                carry = block[cut + 1 :]
                tables = [lines_to_table(block[: cut + 1], lineno, False)]
                lineno += tables[0].num_rows
                block = b""
                # popped, not named: while suspended here this frame holds neither the batch (its reader
                # frees it once parsed) nor the block it was cut from
                yield tables.pop()
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputError(f"{path}: truncated or corrupt gzip ({exc})") from exc
    if carry:
        yield lines_to_table(carry, lineno, False)
