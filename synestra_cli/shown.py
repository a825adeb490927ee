"""How times and paths are shown to a person, the same in every command.

One time style: ISO 8601 in UTC with a `Z` (`2026-11-02T12:37:54Z`), the style the JSON outputs write and
`--since`/`--until` read back (the store's naive datetimes are UTC). A path under the working directory
is shown relative to it (`sample_data/exports/jobs/1003.log:215`): a ticket pasted from an analyst's
checkout does not carry their home folder, and the line still opens from where the command ran. A count
agrees with its noun (`1 job`, `2 jobs`), not `job(s)`."""

from __future__ import annotations

import os
from datetime import UTC, datetime


def iso(t: datetime | None, minutes: bool = False) -> str:
    """`2026-11-02T12:37:54Z` (`minutes`: `2026-11-02T12:37Z`, for a header's span); '' for None."""
    if t is None:
        return ""
    if t.tzinfo is not None:
        t = t.astimezone(UTC).replace(tzinfo=None)
    return t.strftime("%Y-%m-%dT%H:%M" if minutes else "%Y-%m-%dT%H:%M:%S") + "Z"


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 job`, `2 jobs`, `1 host`, `3 hosts`: a count with its noun in agreement."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def path(p: str | None, cwd: str | None = None) -> str:
    """p relative to the working directory when it lies under it, else as it is ('' for None)."""
    if not p:
        return ""
    base = cwd or os.getcwd()
    if os.path.isabs(p) and (p == base or p.startswith(base.rstrip("/") + "/")):
        return os.path.relpath(p, base)
    return p


def relative_in(text: str, cwd: str | None = None) -> str:
    """Every absolute path under the working directory inside text (a ticket, an action's `why`) made
    relative to it."""
    base = (cwd or os.getcwd()).rstrip("/")
    return text.replace(base + "/", "") if base else text
