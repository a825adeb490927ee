"""A Prometheus API answer read as a stream: its `data.result` array cut into batches of whole results.

A `query_range` answer for a big job is one JSON object of hundreds of MB: every parser that builds it
whole (DuckDB's JSON reader, `json.loads`) holds several times its size, past the memory budget. DuckDB
reads arrays of records as a stream but not an array nested in an object, so the answer is walked here:
the few small members around the result array (`status`, `resultType`, `error`, `warnings`, ...) are
decoded with the standard library, in any order (a `jq -S` dump puts `data` before `status` and `result`
before `resultType`), and the array itself is cut into batches of about `batch_bytes` at the boundaries
between its results (`}` `,` `{`, any whitespace between), which DuckDB then parses (formats/telemetry/prom_json.py).
Such a boundary can also sit inside a label's value: a batch cut there is not valid JSON, and the caller's
`accept` rejects it, so the batch grows to the next boundary. The array's end is found the same way: the
first `}` `]` after which the batch is valid. Memory: one batch and one read chunk, whatever the file.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any

from synestra_cli.errors import InputError

CHUNK = 8 << 20  # bytes read at a time
BOUNDARY = re.compile(rb"\}\s*,\s*\{")
ARRAY_END = re.compile(rb"\}\s*\]")
STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
WS = b" \t\r\n"
_DECODER = json.JSONDecoder()


class Malformed(Exception):
    """Not a JSON object of the API's shape (the caller says so with the file's name)."""


class AnswerStream:
    """Walks one answer: `batches()` yields the result array's elements as JSON array texts (bytes); the
    answer's small members are in `members` once it is done."""

    def __init__(self, f: IO[bytes], limit: int | None = None) -> None:
        self.not_series = 0  # results that are not objects (null, a number, a string)
        self.f, self.limit = f, limit  # read at most `limit` bytes (what ingest hashed)
        self.buf, self.pos, self.eof = b"", 0, False
        self.members: dict[str, Any] = {}  # status, error, errorType, warnings; data's resultType
        self.result_seen = False

    # --- reading ---------------------------------------------------------------------------------------

    def _more(self) -> bool:
        """Read the next chunk (dropping what is consumed); False at the end of the file."""
        if self.eof:
            return False
        size = CHUNK if self.limit is None else min(CHUNK, self.limit)
        data = self.f.read(size) if size > 0 else b""
        if self.limit is not None:
            self.limit -= len(data)
        if not data:
            self.eof = True
            return False
        self.buf, self.pos = self.buf[self.pos :] + data, 0
        return True

    def _ws(self) -> None:
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in WS:
                self.pos += 1
            if self.pos < len(self.buf) or not self._more():
                return

    def _peek(self) -> int | None:
        self._ws()
        return self.buf[self.pos] if self.pos < len(self.buf) else None

    def _expect(self, ch: bytes) -> None:
        if self._peek() != ch[0]:
            raise Malformed(f"expected {ch.decode()!r}")
        self.pos += 1

    def _string(self) -> str:
        self._ws()
        while True:
            m = STRING.match(self.buf, self.pos)
            if m:
                self.pos = m.end()
                return str(json.loads(m.group().decode("utf-8", errors="replace")))
            if not self._more():
                raise Malformed("expected a string")

    def _value(self) -> Any:
        """One small JSON value (any member but the result array), decoded whole."""
        self._ws()
        while True:
            # surrogateescape: a chunk's end may cut a character in two; its bytes map back one to one
            text = self.buf[self.pos :].decode("utf-8", errors="surrogateescape")
            try:
                value, end = _DECODER.raw_decode(text)
            except json.JSONDecodeError:
                if self._more():
                    continue
                raise Malformed("truncated or invalid JSON") from None
            self.pos += len(text[:end].encode("utf-8", errors="surrogateescape"))
            return value

    # --- the answer's shape ----------------------------------------------------------------------------

    def batches(self, batch_bytes: int, accept: Callable[[bytes], bool]) -> Iterator[bytes]:
        """The result array's elements, a batch at a time, each as the text of a JSON array; `accept`
        says whether a candidate batch is valid JSON (else it grows to the next boundary)."""
        if not self.buf:
            self._more()
        if self.buf.startswith(b"\xef\xbb\xbf"):
            self.pos = 3  # a BOM (Windows tools write one)
        self._expect(b"{")
        for key in self._members():
            if key == "data" and self._peek() == ord("{"):
                self.pos += 1
                for inner in self._members():
                    if inner == "result" and self._peek() == ord("[") and not self.result_seen:
                        self.result_seen = True
                        yield from self._array(batch_bytes, accept)
                    else:
                        value = self._value()
                        if inner == "resultType":
                            self.members["resultType"] = value
            else:
                self.members[key] = self._value()
        if self._peek() is not None:
            raise Malformed("text after the answer's object")

    def _members(self) -> Iterator[str]:
        """The keys of an object whose `{` was read, each left for the caller to read its value; then `}`."""
        if self._peek() == ord("}"):
            self.pos += 1
            return
        while True:
            key = self._string()
            self._expect(b":")
            yield key
            c = self._peek()
            self.pos += 1
            if c == ord("}"):
                return
            if c != ord(","):
                raise Malformed("expected ',' or '}'")

    def _array(self, batch_bytes: int, accept: Callable[[bytes], bool]) -> Iterator[bytes]:
        self.pos += 1  # '['
        if self._peek() == ord("]"):
            self.pos += 1
            return
        if self._peek() != ord("{"):  # a scalar or string result: no series (the caller says so)
            while True:
                self._value()
                self.not_series += 1
                c = self._peek()
                self.pos += 1
                if c == ord("]"):
                    return
                if c != ord(","):
                    raise Malformed("expected ',' or ']'")
        while True:
            batch, last = self._cut(batch_bytes, accept)
            yield batch
            if last:
                return

    def _cut(self, batch_bytes: int, accept: Callable[[bytes], bool]) -> tuple[bytes, bool]:
        """The next batch from `pos` (at a result's `{`): to the first boundary past `batch_bytes` whose
        text is valid, else to the array's end; True when it was the last."""
        start, search = self.pos, self.pos + batch_bytes
        while True:
            m = BOUNDARY.search(self.buf, max(search, start))
            if m is not None:
                text = b"[" + self.buf[start : m.start() + 1] + b"]"
                if accept(text):
                    self.pos = m.end() - 1
                    return text, False
                search = m.end() - 1  # a boundary inside a string: grow to the next one
                continue
            end = self._end(start, accept)
            if end is not None:
                return end, True
            if not self._more():  # drops what precedes `pos` (== start): the batch now begins at 0
                raise Malformed("the result array does not end")
            start, search = 0, search - start

    def _end(self, start: int, accept: Callable[[bytes], bool]) -> bytes | None:
        """The array's end in what is read: the first `}` `]` after `start` before which the batch is valid."""
        for m in ARRAY_END.finditer(self.buf, start):
            text = b"[" + self.buf[start : m.start() + 1] + b"]"
            if accept(text):
                self.pos = m.end()
                return text
        return None


def answer_batches(
    f: IO[bytes], batch_bytes: int, accept: Callable[[bytes], bool], display: str, limit: int | None = None
) -> tuple[AnswerStream, Iterator[bytes]]:
    """(the stream, its batches): the batches as AnswerStream.batches, a malformed answer as InputError."""
    stream = AnswerStream(f, limit)

    def walk() -> Iterator[bytes]:
        try:
            yield from stream.batches(batch_bytes, accept)
        except Malformed as exc:
            raise InputError(
                f"{display}: not a successful Prometheus API answer (status missing or not JSON: {exc})"
            ) from None

    return stream, walk()
