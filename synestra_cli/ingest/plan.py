"""What a file is, and how it relates to what the store holds: skip it, load it whole, load only its
new lines (it grew), or load it and replace the sources it supersedes (it changed).

A plan is a pure function of the file's digest and of `Known` (the store's sources, plus the files
staged before it): it is made once before parsing (against a snapshot, so that a file already in the
store costs no parse) and checked again at commit against the store as it is then (another ingest may
have committed in between), where a plan that no longer holds sends the file back to be parsed again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from synestra_cli import formats
from synestra_cli.errors import InputError, UnknownFormatError
from synestra_cli.formats import envelope, envelope_sql
from synestra_cli.formats.base import Format, IngestOptions
from synestra_cli.formats.envelope import Envelope
from synestra_cli.formats.reading import UTF8_BOM, decode, is_gzip, read_head, utf16_codec
from synestra_cli.formats.training import flight_recorder
from synestra_cli.store.sql import quote_ident

PARQUET_MAGIC = b"PAR1"  # binary formats read: long-form metrics as Parquet, Flight Recorder pickles
KNOWN_SQL = "SELECT source_id, path, sha256, format, bytes, options FROM {store}.main.sources ORDER BY source_id"


@dataclass(frozen=True)
class Digest:
    sha: str
    size: int
    prefix: int | None = None  # the length the prefix hash was asked for (an earlier source's bytes)
    prefix_sha: str | None = None  # of the first `prefix` bytes, when the file is that long
    prefix_lines: int = 0  # newlines in them
    prefix_ends_line: bool = False  # they end with a newline
    file_id: tuple[int, int] | None = None  # (device, inode) of the file hashed


def file_digest(path: Path, prefix: int | None = None) -> Digest:
    """sha256 of the file's bytes, and of its first `prefix` bytes (one pass: is the old content a prefix?)."""
    h, size, lines, prefix_sha, last = hashlib.sha256(), 0, 0, None, b""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        for block in iter(lambda: f.read(1 << 20), b""):
            if prefix is not None and prefix_sha is None and size + len(block) >= prefix:
                cut = prefix - size
                h.update(block[:cut])
                lines += block.count(b"\n", 0, cut)
                prefix_sha = h.hexdigest()
                last = block[cut - 1 : cut] if cut else last
                h.update(block[cut:])
            else:
                h.update(block)
                if prefix is not None and prefix_sha is None:
                    lines += block.count(b"\n")
                    last = block[-1:]
            size += len(block)
    return Digest(h.hexdigest(), size, prefix, prefix_sha, lines, last == b"\n", (st.st_dev, st.st_ino))


def check_unchanged(path: Path, digest: Digest) -> None:
    """Raise InputError when the file at `path` is no longer the one hashed, or is shorter (logrotate's
    rename or copytruncate while it loaded): its rows would be of one file under another's sha256, and
    the moved content would then be skipped as already in the store. Checked after the parse, in its
    transaction: the file fails, and loads whole at the next ingest (or `--follow` poll)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise InputError(f"{path}: moved or removed while it loaded (rotated?); ingest it again") from exc
    if digest.file_id is not None and (st.st_dev, st.st_ino) != digest.file_id or st.st_size < digest.size:
        raise InputError(f"{path}: replaced or truncated while it loaded (rotated?); ingest it again")


def check_readable(path: Path) -> tuple[str, str | None]:
    """Decoded head of the file and the codec to transcode it with (None: UTF-8 already), or InputError
    saying why it cannot be ingested."""
    try:
        if not path.exists():
            raise InputError(f"{path}: no such file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{path}: permission denied")
        if path.stat().st_size == 0:
            raise InputError(f"{path}: empty file")
        head = read_head(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    codec = utf16_codec(head)
    if codec:
        text = head.decode(codec, errors="replace")
    elif head.startswith(UTF8_BOM):
        codec, text = "utf-8-sig", decode(head)
    else:
        text = None
    if text is None:
        if b"\x00" in head[:8192] and not (head.startswith(PARQUET_MAGIC) or flight_recorder.is_pickled_dump(head)):
            raise InputError(f"{path}: binary file, not a log or metric export")
        text = decode(head)
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text, codec


_SNIFFED: dict[
    tuple[bytes, tuple[Format, ...], str | None], tuple[Format, Envelope | None]
] = {}  # a followed file's head is sniffed at every poll
_SNIFFED_MAX = 4096


def pick_format(head: str, options: IngestOptions, path: Path) -> tuple[Format, Envelope | None]:
    """The file's format, and the envelope to take off before it loads (None: read as it is). The
    envelope is taken off only when the text without it is recognised as well as with it, as the same
    format, or better: a file a sniffer recognises is never read as another format for its envelope."""
    try:
        key = (
            hashlib.blake2b(head.encode(errors="replace"), digest_size=16).digest(),
            tuple(formats.all_formats().values()),
            options.format,
        )
        found = _SNIFFED.get(key)
        if found is None:
            found = _pick(head, options.format)
            if len(_SNIFFED) >= _SNIFFED_MAX:
                _SNIFFED.clear()
            _SNIFFED[key] = found
        return found
    except InputError as exc:
        raise type(exc)(f"{path}: {exc}") from exc


def _pick(head: str, forced: str | None) -> tuple[Format, Envelope | None]:
    env = envelope.detect(head)
    if forced:  # a forced format reads the text without its envelope, unless the text as it is reads better
        fmt = formats.by_name(forced)
        unwrapped = env is not None and fmt.sniff(envelope_sql.normalise_head(head, env)) >= fmt.sniff(head)
        return fmt, env if unwrapped else None
    raw, raw_score = formats.detect_scored(head)
    if env is not None:
        bare, score = formats.detect_scored(envelope_sql.normalise_head(head, env))
        # another format only when it reads better; the same format reads the text unwrapped (a watchdog
        # line cut at the terminal's width is still a torch log, and only whole gives its collective)
        same = bare is raw and score == raw_score and not env.only_native
        if bare is not None and (score > raw_score or same):
            return bare, env
    if raw is None:
        raise UnknownFormatError(formats.unknown_message(head))
    return raw, None


def recognise(path: Path, options: IngestOptions | None = None) -> tuple[Format, Envelope | None]:
    """What ingest reads `path` as: its format and envelope (UnknownFormatError, InputError as ingest)."""
    head, _ = check_readable(path)
    return pick_format(head, options or IngestOptions(), path)


def reads_the_same(stored: str | None, options: IngestOptions) -> bool:
    """Whether a source read with `stored` options (the keyed ones its parser read) reads the same with
    these. {} (a source from before source keys) matches any."""
    return all(getattr(options, name, None) == value for name, value in json.loads(stored or "{}").items())


def _describe(stored: str) -> str:
    opts = json.loads(stored or "{}")
    shown = [f"--{name.replace('_id', '')} {value}" for name, value in opts.items() if value is not None]
    return " ".join(shown) or "default options"


@dataclass(frozen=True)
class Source:
    source_id: int
    path: str
    sha: str
    format: str
    bytes: int
    options: str


@dataclass
class Known:
    """The sources a plan is made against: the store's, plus those staged and not yet committed
    (`pending`: a plan that would replace or extend one of them waits for its commit)."""

    by_path: dict[str, list[Source]] = field(default_factory=dict)  # every format read from the path
    by_content: dict[tuple[str, str], list[Source]] = field(default_factory=dict)
    pending: set[int] = field(default_factory=set)

    @classmethod
    def load(cls, conn: duckdb.DuckDBPyConnection, store: str) -> Known:
        known = cls()
        for row in conn.execute(KNOWN_SQL.format(store=quote_ident(store))).fetchall():
            known.add(Source(*row))
        return known

    def add(self, source: Source, pending: bool = False) -> None:
        self.by_path.setdefault(source.path, []).append(source)
        self.by_content.setdefault((source.sha, source.format), []).append(source)
        if pending:
            self.pending.add(source.source_id)

    def earlier(self, path: str, fmt: str, options: IngestOptions) -> list[Source]:
        """Sources read from this path as this format with these options, oldest first."""
        found = [s for s in self.by_path.get(path, ()) if s.format == fmt and reads_the_same(s.options, options)]
        return sorted(found, key=lambda s: s.source_id)

    def as_other_formats(self, path: str, fmt: str, options: IngestOptions) -> list[Source]:
        """Sources read from this path with these options as another format than `fmt`: the same file,
        recognised otherwise before it grew (a job log whose MLPerf lines come after its NeMo ones)."""
        found = [s for s in self.by_path.get(path, ()) if s.format != fmt and reads_the_same(s.options, options)]
        return sorted(found, key=lambda s: s.source_id)

    def same_content(self, sha: str, fmt: str) -> list[Source]:
        return sorted(self.by_content.get((sha, fmt), ()), key=lambda s: s.source_id)


@dataclass
class Plan:
    """How to load one file: from where, and which earlier sources it replaces."""

    digest: Digest
    offset: int = 0
    first_line: int = 1
    replaces: list[int] = field(default_factory=list)
    grows: int | None = None  # the source whose new lines these are
    notes: list[str] = field(default_factory=list)

    def same_load(self, other: Plan) -> bool:
        return (self.offset, self.first_line, self.replaces, self.grows) == (
            other.offset,
            other.first_line,
            other.replaces,
            other.grows,
        )


SKIP = None  # the plan of a file the store already holds, read this way


def digest_for(known: Known, path: Path, fmt_name: str, options: IngestOptions) -> Digest:
    """The file's digest, with the prefix hash its latest earlier source needs."""
    earlier = known.earlier(str(path.resolve()), fmt_name, options)
    return file_digest(path, earlier[-1].bytes if earlier else None)


def decide(
    known: Known, path: Path, fmt: Format, options: IngestOptions, codec: str | None, digest: Digest
) -> Plan | None:
    """The plan, or SKIP when the store already holds this content read this way. Raises LookupError
    when the digest lacks the prefix hash the latest earlier source needs (digest it again)."""
    earlier = known.earlier(str(path.resolve()), fmt.name, options)
    if (earlier[-1].bytes if earlier else None) != digest.prefix:
        raise LookupError("digest against another earlier source")
    same = known.same_content(digest.sha, fmt.name)
    if any(reads_the_same(s.options, options) for s in same):
        return SKIP
    plan = Plan(digest)
    plan.notes += [
        f"the store also holds this content read with {_describe(s.options)} (source {s.source_id}): "
        f"`synestra forget {s.source_id}` if this load corrects it"
        for s in same
    ]
    # sniffed (not forced), the file is what its path holds now, whatever it was recognised as before
    other = [] if options.format else known.as_other_formats(str(path.resolve()), fmt.name, options)
    if other:
        plan.replaces = [s.source_id for s in [*earlier, *other]]
        plan.notes.append(
            f"read as {fmt.name} now (source(s) {', '.join(str(s.source_id) for s in other)} of this path "
            f"were read as {', '.join(sorted({s.format for s in other}))}): replaces them"
        )
        return plan
    if not earlier:
        return plan
    last = earlier[-1]
    grew = digest.size > last.bytes and digest.prefix_sha == last.sha and digest.prefix_ends_line
    if grew and codec is None and not is_gzip(path) and fmt.resumes(path):  # a line-oriented file
        plan.offset, plan.first_line, plan.grows = last.bytes, digest.prefix_lines + 1, last.source_id
        plan.notes.append(
            f"grew since source {last.source_id} was loaded: only its new lines "
            f"(from line {plan.first_line}) are loaded"
        )
        return plan
    plan.replaces = [s.source_id for s in earlier]
    ids = ", ".join(map(str, plan.replaces))
    plan.notes.append(
        f"grew since source {ids} was loaded: read again whole, replacing it"
        if grew
        else f"changed since source(s) {ids} were loaded from this path: replaces them"
    )
    return plan


def waits_for_pending(known: Known, plan: Plan) -> bool:
    """The plan replaces or extends a source that is staged, not committed: it must wait for it."""
    return plan.grows in known.pending or any(sid in known.pending for sid in plan.replaces)
