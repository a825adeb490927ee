"""What every format parser is, gets and returns.

A format is a module of this package defining ``FORMAT = Format(...)``: its name, a description,
``sniff(head) -> float`` (confidence 0..1 from the first 64 KiB of decoded text), ``load(ctx) ->
LoadResult`` and the store tables it writes (formats/__init__.py finds every such module). ``load`` runs
inside the file's transaction and writes with SQL through ``ctx.conn``; it must not loop over lines in
Python on a hot path: hand DuckDB the Arrow batch of lines (``ctx.line_batches()``) and parse it there.
How a file's bytes become that text and those batches (gzip, encodings, line endings): formats/reading.py.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

import duckdb
import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.envelope import Envelope
from synestra_cli.formats.reading import BATCH_BYTES, decode, iter_line_batches, open_binary, read_bytes
from synestra_cli.store.sql import scalar

MAX_REJECT_SAMPLES = 20  # the rejects of a file kept with their line and text (the rest are counted)


@dataclass(frozen=True)
class IngestOptions:
    timezone: str = "UTC"  # zone of timestamps that carry none
    year: int | None = None  # year of syslog lines without one (default: from the file's mtime)
    host: str | None = None  # host of files that do not name it (plain dmesg)
    job_id: str | None = None  # job of a log that does not name it
    strict: bool = False  # any reject fails the file
    format: str | None = None  # force a format instead of sniffing
    cluster: str | None = None  # cluster of the jobs the files name (synestra_cli/query/clusters.py)


# The options that change what a parser reads from the same bytes: part of a source's key.
KEYED_OPTIONS = ("timezone", "year", "host", "job_id", "cluster")


@dataclass(frozen=True)
class TrackedOptions(IngestOptions):
    """IngestOptions that note which keyed options the parser read: a source is keyed on those only, so
    that `--timezone` changes the key of a syslog file (it reads it) but not of a Prometheus export."""

    read: set[str] = field(default_factory=set, compare=False, repr=False)

    @classmethod
    def wrap(cls, options: IngestOptions) -> TrackedOptions:
        return cls(**{f.name: getattr(options, f.name) for f in fields(IngestOptions)})

    def __getattribute__(self, name: str):
        if name in KEYED_OPTIONS:
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)

    def read_values(self) -> dict[str, object]:
        """The keyed options the parser read, with their values."""
        opts = {f.name: object.__getattribute__(self, f.name) for f in fields(IngestOptions)}
        return {name: opts[name] for name in sorted(object.__getattribute__(self, "read"))}


@dataclass
class LoadResult:
    rows: int = 0
    rejected: int = 0
    # (line number, reason, text) of the first few rejects; the orchestrator stores them.
    reject_samples: list[tuple[int | None, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def reject(self, line: int | None, reason: str, text: str = "") -> None:
        self.rejected += 1
        if len(self.reject_samples) < MAX_REJECT_SAMPLES:
            self.reject_samples.append((line, reason, text[:200]))

    def rejects_from(
        self, conn: duckdb.DuckDBPyConnection, samples_sql: str, count_sql: str, params: dict[str, Any] | None = None
    ) -> None:
        """The rejects a parser marked in SQL: samples_sql gives (line, reason, text) of the first ones in
        file order (LIMIT MAX_REJECT_SAMPLES), with `params`; count_sql how many there are in all."""
        samples = conn.execute(samples_sql, params).fetchall()
        for line, reason, text in samples:
            self.reject(line, reason, text)
        self.rejected += scalar(conn, count_sql) - len(samples)


@dataclass
class LoadContext:
    conn: duckdb.DuckDBPyConnection
    source_id: int
    path: Path  # the file on disk (may be .gz)
    display: str  # how to name it to the user
    options: IngestOptions
    mtime: datetime  # UTC, naive
    offset: int = 0  # read from this byte on (a grown file: only its new lines)
    first_line: int = 1  # the line number of the first line read
    end: int | None = None  # read no further than this byte: what ingest hashed (a log written to meanwhile)
    # where the store's sources are seen from a file parsed apart from it (`catalog.schema.`; "": here)
    evidence: str = ""
    # How the text reached the user (formats/envelope.py), taken off before this load: `path` is then a
    # normalised copy. `envelope_columns`: (lineno, host, rank, local_rank, stream, ts, tag) the prefix gave each line.
    envelope: Envelope | None = None
    envelope_columns: pa.Table | None = None
    origin: Path | None = None  # the user's file when `path` is a copy (transcoded, normalised)

    @property
    def user_path(self) -> Path:
        """The file as the user named it: what a name or folder says (a job id, a pod, a port) is read here."""
        return self.origin or self.path

    @property
    def fallback_host(self) -> str | None:
        """--host, else the one host the envelope names (a pdsh prefix, a prompt's `root@gpu-7`)."""
        return self.options.host or (self.envelope.host if self.envelope is not None else None)

    def text_with_command(self) -> str:
        """read_text(), with the prompt line the envelope took off back on its line (`$ ethtool -S eth0`):
        the snapshot formats read their device from the echoed command."""
        text = self.read_text()
        echoed = self.echoed_command()
        if echoed is None or self.offset:
            return text
        line, command = echoed
        lines = text.split("\n")
        if 0 < line <= len(lines) and not lines[line - 1].strip():
            lines[line - 1] = self.envelope.command_text if self.envelope else f"$ {command}"
        return "\n".join(lines)

    def echoed_command(self) -> tuple[int, str] | None:
        """(line, command) of the command echoed behind the prompt the envelope took off, else None."""
        env = self.envelope
        return (env.command_line, env.command) if env is not None and env.command else None

    def read_text(self) -> str:
        """The decoded file from `offset` to `end` (all of it for a first load of a file not being
        written: small, context-heavy formats such as job logs read it whole)."""
        if not self.offset and self.end is None:
            return decode(read_bytes(self.path))
        try:
            with open_binary(self.path) as f:
                f.seek(self.offset)
                return decode(f.read(-1 if self.end is None else self.end - self.offset))
        except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
            raise InputError(f"{self.path}: truncated or corrupt gzip ({exc})") from exc

    def line_batches(self, batch_bytes: int | None = None) -> Iterator[pa.Table]:
        """Arrow tables (lineno int64, line string) covering the file, in order. CR is stripped."""
        yield from iter_line_batches(self.path, batch_bytes or BATCH_BYTES, self.offset, self.first_line, self.end)

    @property
    def default_year(self) -> int:
        return self.options.year or self.mtime.year


# The store tables a format may write rows to: each row carries its source_id (forget removes them), but
# metric_catalog's, which the formats share.
StoreTable = Literal[
    "events",
    "metrics",
    "metric_catalog",
    "gpus",
    "topology",
    "host_names",
    "jobs",
    "attempts",
    "job_nodes",
    "steps",
    "checkpoints",
    "job_incidents",
    "job_marks",
    "sacct_rows",
    "kube_runs",
]


@dataclass(frozen=True)
class Format:
    """One input format: how `ingest` recognises a file of it, reads it, and where its rows go."""

    name: str  # `ingest --format NAME`, sources.format
    description: str  # one line in `synestra formats`
    sniff: Callable[[str], float]  # confidence 0..1 that a head (decoded text) is of this format
    load: Callable[[LoadContext], LoadResult]  # runs in the file's transaction
    writes: frozenset[StoreTable]  # the tables load may add rows to (tests/test_formats_registry.py checks)
    # A grown file's new lines load on their own (ingest/plan.py), read from `ctx.offset`: no file-level
    # context (a header is read again from line 1). True, or a test of the file (a CSV, not a Parquet).
    appendable: bool | Callable[[Path], bool] = False
    # Job logs (joblog.py): SELECTs over jl_lines inserted into jl_facts, and statements run before them.
    # Every job log is read with the facts of every job-log format, whichever format was sniffed.
    facts: tuple[str, ...] = ()
    prepare: tuple[str, ...] = ()
    # Several files of this format at once, in one transaction: one result per context, in order; each
    # statement over all of them, so that a small file costs its lines, not its statements. Raising
    # fails the group: ingest then loads its files one by one with `load`, so a bad file fails alone.
    load_group: Callable[[list[LoadContext]], list[LoadResult]] | None = None
    # The highest score sniff ever returns: detection skips a format that cannot beat the best score found
    # (a sniff scans the 64 KiB head with regexes, up to ~10 ms each: the cost of a small file).
    top: float = 1.0
    # Whether a file with this head (and these options) may take a fact from other files (`evidence`: a
    # yearless log's year from dated sources of its hosts, a hostless scrape's host from its GPUs' UUIDs).
    # Ingest parses such a file once the run's other files are in the store, so that what it takes does not
    # depend on which of them happened to be committed first.
    leans_on_others: Callable[[str, IngestOptions], bool] | None = None
    # Which format wins a tie of equal sniff scores: the higher priority, then the name. Each format
    # declares it (keyword only, no default): the more specific format above the more general one, job
    # logs (a trainer's own before the generic torch_log) above syslog, logs above counter dumps, the
    # exposition text above the metric tables; a format that no other is known to tie with says 0.
    priority: int = field(kw_only=True)

    def resumes(self, path: Path) -> bool:
        """Whether this file, grown, loads only its new lines (else it is read again whole)."""
        return self.appendable(path) if callable(self.appendable) else self.appendable


_LEAP = re.compile(r"(\d{2}:\d{2}):60(?:[.,]\d*)?")


def leap_second(text: str) -> str:
    """A leap second's time text (`23:59:60[.f]`) as the last microsecond of its minute, `23:59:59.999999`:
    what the store's SQL macro leap_second does (store/connect.py), for the formats parsed in Python."""
    return _LEAP.sub(r"\1:59.999999", text) if ":60" in text else text


class _HasContext(Protocol):
    @property
    def ctx(self) -> LoadContext: ...


F = TypeVar("F", bound=_HasContext)
GZIP_TEXT_RATIO = 8  # a gzip log holds about 8x its size of text


def groups_by_text_size(files: list[F], limit: int) -> Iterator[list[F]]:
    """Files parsed together, in their order, in groups of about `limit` bytes of text (a gzip file
    counts GZIP_TEXT_RATIO times its size): every staging table holds its group's lines."""
    group: list[F] = []
    size = 0
    for f in files:
        path = f.ctx.path
        text = path.stat().st_size * (GZIP_TEXT_RATIO if path.name.endswith(".gz") else 1)
        if group and size + text > limit:
            yield group
            group, size = [], 0
        group.append(f)
        size += text
    if group:
        yield group
