"""One renderer for every command: table (rich, for humans), csv, json, jsonl (for scripts).

Rows arrive in batches (`write_batches`): `synestra sql` streams a query's Arrow record batches, so an
export of millions of rows holds one batch in memory, never the whole result. What reaches a terminal
goes through `printable`: a log line or a file name may hold escape sequences (set the window title,
clear the screen, write the clipboard with OSC 52), and a human view shows them, escaped, instead of
obeying them. Machine formats (csv, json, jsonl) carry the text as it is.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from decimal import Decimal
from typing import Any

import click

# C0 controls (but newline and tab, which rich lays out), DEL, C1 controls (0x9b is a one-byte CSI on
# some terminals) and the bidirectional overrides that reorder what a reader sees.
_UNSAFE = [
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    0x7F,
    *range(0x80, 0xA0),
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
]
_ESCAPES = {c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in _UNSAFE}
# Inside a table cell or on a one-line message a newline or a tab would break the layout too.
_ESCAPES_LINE = {**_ESCAPES, 0x09: "\\t", 0x0A: "\\n"}
TABLE_MAX_ROWS = 10_000  # a terminal table past this says so and points to csv/jsonl


def printable(text: Any, one_line: bool = True) -> str:
    """text with every control character shown as an escape (`\\x1b`), for a terminal."""
    return str(text).translate(_ESCAPES_LINE if one_line else _ESCAPES)


def safe(value: Any) -> str:
    """Text from the store (job ids, hosts, causes, log words) for a rich console: shown as it is, no
    markup (a host named `[bold]x` prints those brackets), no escape sequences."""
    from rich.markup import escape

    return escape(printable(value))


def to_jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        # Naive datetimes in the store are UTC.
        return (
            value.isoformat(timespec="milliseconds").replace("+00:00", "") + "Z"
            if value.tzinfo is None
            else value.isoformat()
        )
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Decimal):  # DECIMAL columns: a JSON number
        return float(value)
    return value


def dumps(doc: Any) -> str:
    # default=str: any other type a query can return (INTERVAL, UUID, BLOB) is written as text, never a crash
    return json.dumps(to_jsonable(doc), ensure_ascii=False, default=str)


def human_duration(seconds: float | None) -> str:
    """4h17m, 12m05s, 38.7s, 2d03h: what a reader takes in at a glance (csv and json keep the seconds)."""
    if seconds is None or (isinstance(seconds, float) and not math.isfinite(seconds)):
        return ""
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 10:
        return f"{sign}{s:.1f}s"
    s = round(s)
    m, sec = divmod(s, 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    if d:
        return f"{sign}{d}d{h:02d}h"
    if h:
        return f"{sign}{h}h{m:02d}m"
    return f"{sign}{m}m{sec:02d}s" if m else f"{sign}{sec}s"


def show_time(value: datetime) -> str:
    """A time for a human: UTC, and saying so (the store's naive times are UTC)."""
    from synestra_cli.api.shared import iso

    return iso(value)


def _cell(value: Any, column: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return show_time(value)
    if column.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool):
        return human_duration(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(str(v) for v in value[:4])
        return printable(shown + (f" (+{len(value) - 4})" if len(value) > 4 else ""))
    return printable(value)


FLEX_WIDTH = 40  # a wider cell (a file path) is wrapped by rich: fit_columns counts it at this width
DEFAULT_WIDTH = 120  # a pipe without $COLUMNS: wide enough that reports do not wrap


def width() -> int | None:
    """The width to lay out for: the terminal's, else $COLUMNS, else DEFAULT_WIDTH."""
    import os
    import sys

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return None if sys.stdout.isatty() else DEFAULT_WIDTH


def console(stderr: bool = False):
    """A rich console laid out for width(): the terminal, or $COLUMNS when piped. Colour only where a view
    asks for it (no automatic highlighting of numbers inside host names or paths); a reader that went away
    (`| head -1`) ends the command quietly with 0 (cli/common.py handle_errors), where rich would exit 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            raise BrokenPipeError

    return _Console(stderr=stderr, width=width(), soft_wrap=False, highlight=False)


def render_rows(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[str],
    fmt: str,
    title: str | None = None,
    drop_first: Sequence[str] = (),
) -> None:
    """Write rows to stdout in fmt. Columns fix the order (and the CSV header even when rows is empty).
    A table too wide for the screen leaves out the columns of drop_first, in that order, until it fits
    (and says which), rather than cutting every cell."""
    if fmt == "table" and drop_first:
        columns = fit_columns(rows, columns, drop_first, width() or _terminal_width())
        hidden = [c for c in drop_first if c not in columns]
        if hidden:
            title = f"{title or ''} (not shown at this width: {', '.join(hidden)}; see --format csv)".strip()
    write_batches([rows], columns, fmt, title)


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size().columns


def fit_columns(
    rows: Sequence[dict[str, Any]], columns: Sequence[str], drop_first: Sequence[str], max_width: int
) -> list[str]:
    """The columns that fit in max_width, leaving out those of drop_first in order. A cell takes its
    widest value, up to FLEX_WIDTH (rich wraps a longer one, a path), and rich's box adds 3 characters
    per column and 1 at the end."""

    def need(c: str) -> int:
        return min(FLEX_WIDTH, max([len(c), *(len(_cell(r.get(c), c)) for r in rows[:TABLE_MAX_ROWS])])) + 3

    widths = {c: need(c) for c in columns}
    kept = {c for c in columns if c not in drop_first}
    room = max_width - 1 - sum(widths[c] for c in kept)
    for c in reversed(drop_first):  # the most wanted of the droppable columns first, while they fit
        if c in widths and widths[c] <= room:
            kept.add(c)
            room -= widths[c]
    kept_in_order = [c for c in columns if c in kept]
    return kept_in_order


def write_batches(
    batches: Iterable[Sequence[dict[str, Any]]], columns: Sequence[str], fmt: str, title: str | None = None
) -> None:
    """Write batches of rows to stdout in fmt as they come: one batch in memory at a time."""
    if fmt == "table":
        _table(batches, columns, title)
        return
    if fmt == "csv":
        _echo_csv([columns])
    elif fmt == "json":
        click.echo("[", nl=False)
    first = True
    for rows in batches:
        if not rows:
            continue
        if fmt == "json":
            click.echo(
                ("" if first else ", ") + ", ".join(dumps({c: r.get(c) for c in columns}) for r in rows), nl=False
            )
        elif fmt == "jsonl":
            click.echo("".join(dumps({c: r.get(c) for c in columns}) + "\n" for r in rows), nl=False)
        elif fmt == "csv":
            _echo_csv(_csv_row(r, columns) for r in rows)
        first = False
    if fmt == "json":
        click.echo("]")


def _csv_value(value: Any) -> Any:
    """A CSV cell is a scalar: a list is its items joined with spaces (`column -s, -t` keeps its columns),
    a dict its text (an action) or its JSON."""
    v = to_jsonable(value)
    if v is None:
        return ""
    if isinstance(v, list):
        return " ".join(str(_csv_value(x)) for x in v)
    if isinstance(v, dict):
        return v["text"] if isinstance(v.get("text"), str) else json.dumps(v, default=str)
    return v


def _csv_row(r: dict[str, Any], columns: Sequence[str]) -> list:
    return [_csv_value(r.get(c)) for c in columns]


def _echo_csv(rows: Iterable[Sequence]) -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    click.echo(buf.getvalue(), nl=False)


def _table(batches: Iterable[Sequence[dict[str, Any]]], columns: Sequence[str], title: str | None) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=printable(title) if title else None, header_style="bold")
    for c in columns:  # fold, never cut: an id or a path cut to `/work/sample_data/exp…` names nothing
        table.add_column(Text(printable(c)), overflow="fold")
    shown, more = 0, False
    for rows in batches:
        for r in rows:
            if shown == TABLE_MAX_ROWS:  # stop reading: the rest of a huge result is not for a terminal
                more = True
                break
            table.add_row(*(Text(_cell(r.get(c), c)) for c in columns))  # Text: a cell is never markup
            shown += 1
        if more:
            break
    console().print(table)
    if more:
        click.echo(
            f"only the first {TABLE_MAX_ROWS:,} rows are shown: use --format csv or jsonl for all of them", err=True
        )
