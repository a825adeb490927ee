"""Taking the envelope (formats/envelope.py) off a table of lines, in one DuckDB statement.

Every line keeps its number: a prompt line, and the continuation of a joined line, become empty lines
(every format skips those), so a row's `line` is the user's line. The prefix's information is returned
per line number as `columns` (lineno, host, rank, local_rank, stream, ts, tag): rank is a task's or a
global rank (srun -l, Open MPI), local_rank a rank within its node (torchrun's `[default3]:`), never taken
for a global one; ts is UTC (kubectl, CRI and docker write RFC 3339 with a zone).
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from synestra_cli.formats.envelope import BY_KIND, LINE_PREFIXES, Envelope, continued_sql
from synestra_cli.formats.reading import iter_line_batches, lines_to_table
from synestra_cli.store.session import LEAP_SECOND_SQL
from synestra_cli.store.sql import registered

GROUPS = ("body", "host", "rank", "local_rank", "stream", "ts", "tag", "partial")
ZONED = ("cri", "kubectl_timestamps", "docker_json")

NORMALISE_SQL = """
WITH b AS (
    SELECT lineno, line AS raw,
        CASE WHEN $indent = '' THEN q WHEN starts_with(q, $indent) THEN substr(q, length($indent) + 1)
             ELSE ltrim(q, ' ' || chr(9)) END AS l
    FROM (SELECT lineno, line, CASE WHEN $quote THEN regexp_replace(line, '^> ?', '') ELSE line END AS q FROM env_raw)
), c AS (
    SELECT lineno, CASE WHEN list_contains($prompts, lineno) THEN '' ELSE l END AS l FROM b
), p AS (
    SELECT lineno, l, hit, {groups} AS g FROM (SELECT lineno, l, {hit} AS hit, {extract} AS r FROM c)
), d AS (
    SELECT lineno, l, hit,
        CASE WHEN hit THEN {body} ELSE l END AS body,
        CASE WHEN hit THEN nullif(g.host, '') END AS host,
        CASE WHEN hit THEN TRY_CAST(nullif(g.rank, '') AS INTEGER) END AS rank,
        CASE WHEN hit THEN TRY_CAST(nullif(g.local_rank, '') AS INTEGER) END AS local_rank,
        CASE WHEN hit THEN nullif({stream}, '') END AS stream,
        CASE WHEN hit AND $zoned THEN timezone('UTC', TRY_CAST({leap_ts} AS TIMESTAMPTZ)) END AS ts,
        CASE WHEN hit THEN nullif(g.tag, '') END AS tag,
        CASE WHEN hit THEN {partial} ELSE false END AS partial
    FROM p
), e AS (
    SELECT *, lag(body) OVER w AS prev, lag(l) OVER w AS prev_l, lag(hit) OVER w AS prev_hit,
           lag(partial) OVER w AS prev_partial
    FROM d WINDOW w AS (ORDER BY lineno)
), f AS (
    SELECT *, CASE
        WHEN prev IS NULL THEN NULL
        WHEN prev_partial THEN ''
        WHEN trim(body) = '' OR trim(prev) = '' THEN NULL
        WHEN $width > 0 AND length(prev_l) = $width AND NOT ends_with(prev_l, ' ')
             AND NOT starts_with(l, left(prev_l, 2)) THEN ''
        WHEN {continued} AND NOT ({starts}) THEN
            CASE WHEN ends_with(prev, ' ') OR starts_with(body, ' ') THEN '' ELSE ' ' END
        WHEN $line_prefix AND prev_hit AND NOT hit THEN
            CASE WHEN ends_with(prev, ' ') OR starts_with(body, ' ') THEN '' ELSE ' ' END
        END AS sep
    FROM e
), g AS (
    SELECT *, sum(CASE WHEN sep IS NULL THEN 1 ELSE 0 END) OVER (ORDER BY lineno ROWS UNBOUNDED PRECEDING) AS grp
    FROM f
), j AS (
    SELECT grp, min(lineno) AS head, string_agg(coalesce(sep, '') || body, '' ORDER BY lineno) AS text,
           arg_min(host, lineno) AS host, arg_min(rank, lineno) AS rank, arg_min(local_rank, lineno) AS local_rank,
           arg_min(stream, lineno) AS stream,
           arg_min(ts, lineno) AS ts, arg_min(tag, lineno) AS tag
    FROM g GROUP BY grp
)
SELECT g.lineno, CASE WHEN g.lineno = j.head THEN j.text ELSE '' END AS line,
       CASE WHEN g.lineno = j.head THEN j.host END AS host, CASE WHEN g.lineno = j.head THEN j.rank END AS rank,
       CASE WHEN g.lineno = j.head THEN j.local_rank END AS local_rank,
       CASE WHEN g.lineno = j.head THEN j.stream END AS stream, CASE WHEN g.lineno = j.head THEN j.ts END AS ts,
       CASE WHEN g.lineno = j.head THEN j.tag END AS tag
FROM g JOIN j USING (grp) ORDER BY g.lineno
"""
STARTS_SQL = "contains(body, 'Watchdog caught collective operation timeout') OR contains(body, 'detected by watchdog')"


def _groups(present: list[str]) -> str:
    """A struct of every GROUPS field: those of the pattern from its match `r`, the others NULL."""
    fields = [f"{n} := r.{n}" if n in present else f"{n} := NULL::VARCHAR" for n in GROUPS]
    return "struct_pack(" + ", ".join(fields) + ")"


def _statement(env: Envelope) -> str:
    """NORMALISE_SQL for this envelope's prefix (its pattern's groups by position: RE2 has no names)."""
    parts = {"continued": continued_sql(), "starts": STARTS_SQL, "extract": "NULL", "groups": _groups([])}
    if env.prefix == "docker_json":
        log = "json_extract_string(l, '$.log')"
        parts |= {
            "hit": "json_valid(l) AND starts_with(l, '{\"log\":')",
            "body": f"regexp_replace({log}, '\\r?\\n$', '')",
            "stream": "json_extract_string(l, '$.stream')",
            "ts": "json_extract_string(l, '$.time')",
            "partial": f"NOT ends_with({log}, chr(10))",
        }
    elif env.prefix is None:
        parts |= {"hit": "false", "body": "l", "stream": "NULL", "ts": "NULL", "partial": "false"}
    else:
        index = re.compile(BY_KIND[env.prefix].pattern).groupindex
        names = sorted(index, key=index.__getitem__)
        parts |= {
            "hit": "regexp_matches(l, $pattern)",
            "extract": f"regexp_extract(l, $pattern, {names!r})",
            "groups": _groups(names),
            "body": "coalesce(g.body, '')",
            "stream": "g.stream",
            "ts": "g.ts",
            "partial": "coalesce(g.partial = 'P', false)",
        }
    # a leap second (23:59:60) kept as the minute's last microsecond, inline: `conn` may be any connection
    parts["leap_ts"] = LEAP_SECOND_SQL.format(t=f"nullif({parts['ts']}, '')")
    return NORMALISE_SQL.format(**parts)


def normalise(conn: duckdb.DuckDBPyConnection, lines: pa.Table, env: Envelope) -> pa.Table:
    """(lineno, line, host, rank, local_rank, stream, ts, tag) of every line, the envelope taken off."""
    params: dict[str, object] = {
        "indent": env.indent,
        "quote": env.quote,
        "prompts": list(env.prompt_lines),
        "zoned": env.prefix in ZONED,
        "width": env.wrap_width,
        "line_prefix": env.prefix in LINE_PREFIXES,
    }
    if env.prefix and env.prefix != "docker_json":
        params["pattern"] = BY_KIND[env.prefix].pattern
    with registered(conn, "env_raw", lines):
        return conn.sql(_statement(env), params=params).to_arrow_table()


def normalise_head(head: str, env: Envelope) -> str:
    """The head as the formats will see it (for sniffing)."""
    conn = duckdb.connect()
    try:
        out = normalise(conn, lines_to_table(head, 1), env)
    finally:
        conn.close()
    return "\n".join(out.column("line").to_pylist()) + "\n"  # a 64 KiB head: a few thousand lines at most


def columns_of(table: pa.Table) -> pa.Table | None:
    """The per-line columns worth keeping: lines whose prefix said something."""
    cols = table.drop_columns(["line"])
    keep = pc.or_(
        pc.or_(pc.or_(pc.is_valid(cols["host"]), pc.is_valid(cols["rank"])), pc.is_valid(cols["local_rank"])),
        pc.or_(pc.or_(pc.is_valid(cols["stream"]), pc.is_valid(cols["ts"])), pc.is_valid(cols["tag"])),
    )
    kept = cols.filter(keep)
    return kept if kept.num_rows else None


def _text(lines: pa.ChunkedArray) -> bytes:
    """The lines joined with newlines, from Arrow buffers (no Python string per line)."""
    sep = pa.scalar("\n", lines.type)
    joined = pa.chunked_array(pc.binary_join_element_wise(lines, pa.scalar("", lines.type), sep))
    out = []
    for chunk in joined.chunks:
        if len(chunk):
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
            out.append(chunk.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]])
    return b"".join(out)


def write_copy(conn: duckdb.DuckDBPyConnection, src: Path, dst: Path, env: Envelope) -> pa.Table | None:
    """Write `src` (decompressed, UTF-8) with its envelope taken off to `dst`; the per-line columns."""
    batches = list(iter_line_batches(src))
    lines = pa.concat_tables(batches) if batches else lines_to_table("", 1)
    out = normalise(conn, lines, env)
    with open(dst, "wb") as f:
        f.write(_text(out.column("line").cast(pa.large_string())))
    return columns_of(out)
