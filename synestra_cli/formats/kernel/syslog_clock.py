"""The clock scan of staged syslog lines: where each file's month goes down (a new year, for lines without
one), its last line's month, and whether the stage is stored in (host, time) order (formats/kernel/syslog.py).
"""

from __future__ import annotations

import itertools

import duckdb
import numpy as np
import pyarrow as pa

CLOCK_BATCH_ROWS = 1 << 17  # the clock-order scan reads this many lines at a time: memory flat in file size
# The stage's clock in storage order, as numpy arrays (see clock_order), and each file's number of hosts.
CLOCK_SQL = "SELECT sid, lineno, coalesce(epoch_us(ts), 0) AS us, coalesce(month(ts), 0) AS mon FROM _syslog_stage"
HOSTS_SQL = (
    "SELECT sid, count(DISTINCT host) + coalesce(max(CASE WHEN host IS NULL THEN 1 ELSE 0 END), 0) "
    "FROM _syslog_stage GROUP BY sid"
)


def clock_order(conn: duckdb.DuckDBPyConnection, clocks: dict[int, ClockScan]) -> bool:
    """Feed this chunk's clock to each file's scan (the line numbers where the month goes down: a new
    year, for noyear files; the last line's month), and say whether the stage is stored in (host, ts)
    order: one host per file, lines stored in order, no time going back but at a new year. That is the
    norm for one node's log, and spares sorting the wide rows. Vectorised numpy over three narrow
    columns, streamed in batches (a window over lineno would sort them, ~0.1 s per 1M; the whole
    columns at once cost 24 bytes a line: 1.4 GB at 60M lines)."""
    conn.complete()  # a relation streams only once the last execute() result is done
    before = {sid: clock.copy() for sid, clock in clocks.items()}
    _feed_clocks(clocks, conn.sql(CLOCK_SQL).to_arrow_reader(CLOCK_BATCH_ROWS))
    stored_in_order = all(c.in_line_order for c in clocks.values())
    if not stored_in_order:  # rare: rescan in line order (DuckDB sorts, spilling beyond its memory limit)
        for sid, clock in clocks.items():
            clock.restore(before[sid])
        _feed_clocks(clocks, conn.sql(CLOCK_SQL + " ORDER BY sid, lineno").to_arrow_reader(CLOCK_BATCH_ROWS))
    hosts = max((n for _, n in conn.execute(HOSTS_SQL).fetchall()), default=0)
    return stored_in_order and not any(c.back for c in clocks.values()) and hosts <= 1


def _feed_clocks(clocks: dict[int, ClockScan], reader: pa.RecordBatchReader) -> None:
    """Each file's run of rows (in storage order) to its own scan: a Python step per run, not per line."""
    for clock in clocks.values():
        clock.begin()
    for batch in reader:
        sid, lineno, us, mon = (batch.column(n).to_numpy(zero_copy_only=False) for n in ("sid", "lineno", "us", "mon"))
        cuts = [0, *(np.flatnonzero(np.diff(sid)) + 1).tolist(), len(sid)]
        for a, b in itertools.pairwise(cuts):
            if b > a:
                clocks[int(sid[a])].feed(lineno[a:b], us[a:b], mon[a:b])


class ClockScan:
    """clock_order's running state over batches: each batch is compared with the last line before it.
    What it keeps across chunks is fixed in size: the last line, the new years passed (a count)."""

    def __init__(self, noyear: bool) -> None:
        self.noyear = noyear
        self.prev: tuple[int, int, int] | None = None  # (lineno, us, month) of the last line seen
        self.in_line_order = True  # of the current chunk
        self.back = False  # of the current chunk
        self.wrapped = 0  # new years (the month going down) in the chunks before the current one
        self.found: list[np.ndarray] = []  # the current chunk's: the line numbers where the month goes down
        self.last_month: int | None = None

    def copy(self) -> ClockScan:
        other = ClockScan(self.noyear)
        other.restore(self)
        return other

    def restore(self, other: ClockScan) -> None:
        self.prev, self.wrapped, self.last_month = other.prev, other.wrapped, other.last_month
        self.begin()

    def begin(self) -> None:
        """A new scan of the current chunk."""
        self.in_line_order, self.back, self.found = True, False, []

    def take_wraps(self) -> tuple[int, np.ndarray]:
        """The new years passed before the current chunk, and the chunk's own (line numbers); the scan then
        counts them as passed."""
        found = np.concatenate(self.found) if self.found else np.empty(0, dtype=np.int64)
        before = self.wrapped
        self.wrapped, self.found = before + len(found), []
        return before, found

    def feed(self, lineno: np.ndarray, us: np.ndarray, mon: np.ndarray) -> None:
        if not len(lineno):
            return
        if self.prev is not None:
            lineno, us, mon = (np.concatenate(([p], a)) for p, a in zip(self.prev, (lineno, us, mon), strict=True))
        self.in_line_order &= not np.any(np.diff(lineno) < 0)
        down = mon[1:] < mon[:-1]
        back = us[1:] < us[:-1]
        if self.noyear:
            back &= ~down
        self.back |= bool(back.any())
        if down.any():
            self.found.append(lineno[1:][down])
        self.prev = (int(lineno[-1]), int(us[-1]), int(mon[-1]))
        self.last_month = int(mon[-1])
