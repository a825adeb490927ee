"""One job log of a group being loaded, shared by the reader (joblog.py) and the writer (joblog_rows.py)."""

from __future__ import annotations

from synestra_cli.formats.base import LoadContext, LoadResult


class LogFile:
    """One job log of a group: its context, source id and result."""

    def __init__(self, ctx: LoadContext) -> None:
        self.ctx, self.sid, self.result = ctx, ctx.source_id, LoadResult()
