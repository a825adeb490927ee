"""One renderer for every command: table (rich, for humans), csv, json, jsonl (for scripts)."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

import click


def to_jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        # Naive datetimes in the store are UTC.
        return value.isoformat(timespec="milliseconds").replace("+00:00", "") + "Z" if value.tzinfo is None \
            else value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def dumps(doc: Any) -> str:
    return json.dumps(to_jsonable(doc), ensure_ascii=False)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        shown = ", ".join(str(v) for v in value[:4])
        return shown + (f" (+{len(value) - 4})" if len(value) > 4 else "")
    return str(value)


def console(stderr: bool = False):
    """A rich console; when the output is not a terminal, wide enough that reports do not wrap."""
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 120, soft_wrap=False)


def render_rows(rows: Sequence[dict[str, Any]], columns: Sequence[str], fmt: str, title: str | None = None) -> None:
    """Write rows to stdout in fmt. Columns fix the order (and the CSV header even when rows is empty)."""
    if fmt == "json":
        click.echo(json.dumps([to_jsonable({c: r.get(c) for c in columns}) for r in rows], ensure_ascii=False))
    elif fmt == "jsonl":
        for r in rows:
            click.echo(dumps({c: r.get(c) for c in columns}))
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(columns)
        for r in rows:
            v = to_jsonable({c: r.get(c) for c in columns})
            writer.writerow(["" if v[c] is None else (json.dumps(v[c]) if isinstance(v[c], list) else v[c])
                             for c in columns])
        click.echo(buf.getvalue(), nl=False)
    else:
        from rich.table import Table

        table = Table(title=title, header_style="bold")
        for c in columns:
            table.add_column(c)
        for r in rows:
            table.add_row(*(_cell(r.get(c)) for c in columns))
        console().print(table)
