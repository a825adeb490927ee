"""Builders for hand-made job histories, written the way the parsers write them."""

from __future__ import annotations

from datetime import datetime, timedelta

T0 = datetime(2026, 11, 1, 0, 0, 0)


class JobBuilder:
    """Writes one job's sacct attempts and Megatron-like log rows the way the parsers do."""

    def __init__(self, conn, job_id: str = "42", gpus: int = 16):
        self.conn, self.job = conn, job_id
        conn.execute(
            "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected) "
            "VALUES (1, 'sacct.txt', 'a', 'sacct', 0, 0, 0), (2, '42.log', 'b', 'megatron', 0, 0, 0)"
        )
        conn.execute("INSERT INTO jobs (job_id, gpus, source_id) VALUES (?, ?, 1)", [job_id, gpus])

    def attempt(self, n: int, start: float, end: float, state: str, log_start: float, log_end: float):
        self.conn.execute(
            "INSERT INTO attempts (job_id, attempt, start_ts, end_ts, state, source_id) VALUES (?, ?, ?, ?, ?, 1)",
            [self.job, n, T0 + timedelta(seconds=start), T0 + timedelta(seconds=end), state],
        )
        self.conn.execute(
            "INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id) VALUES (?, ?, ?, ?, 2)",
            [self.job, n, T0 + timedelta(seconds=log_start), T0 + timedelta(seconds=log_end)],
        )

    def steps(self, attempt: int, first_iter: int, last_iter: int, t_first: float, step_s: float):
        """One line per iteration; returns the time the last one ended."""
        rows = [
            (self.job, attempt, i, T0 + timedelta(seconds=t_first + step_s * (i - first_iter + 1)), step_s)
            for i in range(first_iter, last_iter + 1)
        ]
        self.conn.executemany(
            "INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, step_time_s, "
            "source_id) VALUES (?, ?, ?, ?, 'exact', ?, 2)",
            rows,
        )
        return t_first + step_s * (last_iter - first_iter + 1)

    def checkpoint(self, attempt: int, kind: str, iteration: int, start: float, end: float | None):
        self.conn.execute(
            "INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, end_ts, ts_precision, source_id) "
            "VALUES (?, ?, ?, ?, ?, ?, 'exact', 2)",
            [
                self.job,
                attempt,
                kind,
                iteration,
                T0 + timedelta(seconds=start),
                None if end is None else T0 + timedelta(seconds=end),
            ],
        )


def crash_and_resume(conn):
    """Attempt 1 saves at 20, crashes after 50 and hangs 600 s; attempt 2 restores 20 and finishes 100."""
    b = JobBuilder(conn)
    b.attempt(1, 0, 1260, "FAILED", 100, 660)
    b.attempt(2, 1500, 2520, "COMPLETED", 1550, 2510)
    b.steps(1, 1, 20, 100, 10.0)  # 100 s start-up, then 20 steps: t = 300
    b.checkpoint(1, "save", 20, 300, 360)  # 60 s save
    b.steps(1, 21, 50, 360, 10.0)  # last progress at 660, then hang to 1260
    b.checkpoint(2, "restore", 20, 1550, 1610)  # requeue 240 s, 50 s start-up + 60 s restore + 40 s
    b.steps(2, 21, 100, 1650, 10.0)  # ... to 2450
    b.checkpoint(2, "save", 100, 2450, 2510)  # final save, exit at 2520
