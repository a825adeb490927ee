"""A PNG's pixels for the picture tests, without an imaging library: 8-bit RGB or RGBA, not interlaced
(what vl-convert and Chromium write)."""

from __future__ import annotations

import struct
import zlib


def pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows), each row bytes of RGB triples."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        (n,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, rows, prev = zlib.decompress(idat), [], bytearray(width * bpp)
    stride = width * bpp + 1
    for y in range(height):
        f, line = raw[y * stride], bytearray(raw[y * stride + 1 : (y + 1) * stride])
        for i in range(len(line)):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        prev = line
        rows.append(bytes(line) if bpp == 3 else bytes(v for j in range(0, len(line), 4) for v in line[j : j + 3]))
    return width, height, rows


def columns_of(rows: list[bytes], rgb: tuple[int, int, int], y0: int = 0, y1: int | None = None) -> list[int]:
    """The x of every pixel of exactly this colour in rows y0..y1."""
    want = bytes(rgb)
    xs = []
    for row in rows[y0:y1]:
        i = row.find(want)
        while i >= 0:
            if i % 3 == 0:
                xs.append(i // 3)
            i = row.find(want, i + 1)
    return xs


def widest_row(rows: list[bytes], rgb: tuple[int, int, int]) -> list[int]:
    """The x of this colour's pixels in the row that holds most of them: a band drawn in it, not its
    legend's swatch (a few pixels wide)."""
    best: list[int] = []
    for y in range(len(rows)):
        xs = columns_of(rows, rgb, y, y + 1)
        if len(xs) > len(best):
            best = xs
    return best
