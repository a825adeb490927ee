"""Prometheus text: exposition (scraped, with or without ms timestamps), `promtool tsdb dump` (ms) and
`promtool tsdb dump-openmetrics` (seconds, ends with `# EOF`).

Series repeat: a 1M-sample file holds a few thousand distinct label sets. So each line is only cut in
two (series text | "value [timestamp]", by DuckDB's CSV reader at "} ") and grouped by series text;
labels are parsed, mapped and resolved once per distinct series (prom_text.py, prom_labels.py).
"""

from __future__ import annotations

import re
import zlib

from synestra_cli.errors import InputError
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.inflate import InflateBudget
from synestra_cli.formats.reading import GZIP_MAGIC
from synestra_cli.formats.telemetry import prom_labels, prom_text

# `name value`, `name{labels} value`, `{__name__=...} value` (dumps); blanks (spaces or TABs) before `{` and after
# `}` are optional; an optional integer or decimal timestamp.
_SAMPLE = re.compile(
    r"^(?:[A-Za-z_:][\w:]*[ \t]*\{.*\}[ \t]*|\{.*\}[ \t]*|[A-Za-z_:][\w:]*[ \t]+)"
    r"(\S+)(?:[ \t]+-?\d+(?:\.\d+)?)?[ \t]*$"
)
_FOREIGN = re.compile(r"^\s|^\{(?!__name__)")
# The gzip check inflates the whole file for its CRC (DuckDB read a gzip with one byte flipped without an
# error) and keeps its last bytes: 64 KB of text at a time, each dropped but its tail. Unbounded, each
# 1 MB read was ~35 MB of text to allocate and join: 0.075 s per campus DCGM file, against 0.038.
INSPECT_BLOCK = 1 << 16
INSPECT_TEXT = 1 << 16
TAIL_BYTES = 64


def sniff(head: str) -> float:
    """Exposition/OpenMetrics: HELP/TYPE comments or `name{labels} value [ts]` lines; dumps: `{__name__=...}`."""
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    data = [ln for ln in lines if not ln.startswith("#")]
    good = sum(1 for ln in data if not _FOREIGN.match(ln) and _is_sample(ln))
    if not good:
        return 0.0
    if any(ln.startswith(("# HELP ", "# TYPE ", "# EOF")) for ln in lines) and good >= 0.5 * len(data):
        return 0.9
    return 0.85 if good >= 0.8 * len(data) else 0.0


def _is_sample(line: str) -> bool:
    m = _SAMPLE.match(line)
    if not m:
        return False
    try:
        float(m.group(1))
    except ValueError:
        return False
    return True


def load(ctx: LoadContext) -> LoadResult:
    compression, tail = _inspect(ctx)
    openmetrics = tail.rstrip().endswith(b"# EOF")  # then timestamps are seconds, even without a fraction
    if compression and prom_text.fast_path(ctx, compression, openmetrics):
        result = LoadResult()
    else:
        result = prom_text.numbered_path(ctx)
    result.notes += prom_text.untimed_note(ctx)
    result.rows = prom_labels.write_series(
        ctx.conn, ctx.source_id, ctx.fallback_host, ctx.mtime, result.notes, ctx.evidence
    )
    prom_text.drop_staged(ctx.conn)
    return result


def _inspect(ctx: LoadContext) -> tuple[str | None, bytes]:
    """(compression for DuckDB's reader, or None for the numbered path; the last bytes of the text).

    A gzip stream is checked first, so that a truncated file is a clear InputError rather than a failed
    statement in the file's transaction; a multi-member gzip goes the numbered way (Python reads those).
    """
    with open(ctx.path, "rb") as f:
        if f.read(2) != GZIP_MAGIC:
            f.seek(max(0, ctx.path.stat().st_size - TAIL_BYTES))
            return "none", f.read()
    inflater, tail, out = zlib.decompressobj(16 + zlib.MAX_WBITS), b"", 0
    budget = InflateBudget(ctx.display)  # a bomb is refused here, before DuckDB's reader inflates it
    try:
        with open(ctx.path, "rb") as f:
            while not inflater.eof and (block := f.read(INSPECT_BLOCK)):
                while block and not inflater.eof:
                    text = inflater.decompress(block, INSPECT_TEXT)
                    out += len(text)
                    budget.check(out, f.tell() - len(inflater.unconsumed_tail))
                    tail = (tail + text[-TAIL_BYTES:])[-TAIL_BYTES:]
                    block = inflater.unconsumed_tail
            tail = (tail + inflater.flush()[-TAIL_BYTES:])[-TAIL_BYTES:]  # the text a full buffer held back
            more = bool(inflater.unused_data) or bool(f.read(1))  # another gzip member, or bytes after it
    except zlib.error as exc:
        raise InputError(f"{ctx.display}: truncated or corrupt gzip ({exc})") from exc
    if not inflater.eof:
        raise InputError(f"{ctx.display}: truncated or corrupt gzip (stream ends early)")
    return (None if more else "gzip"), tail


FORMAT = Format(
    "prometheus",
    "Prometheus exposition text (dcgm-exporter, node_exporter, snmp_exporter), promtool tsdb dumps",
    sniff,
    load,
    writes=frozenset({"metrics", "metric_catalog", "gpus", "host_names"}),
    top=0.9,
    leans_on_others=prom_labels.may_lack_a_host,
    priority=30,
)
