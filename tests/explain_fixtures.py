"""Write a scenario's worth of store rows directly (no parsers): a job on 4 hosts behind one leaf switch.

Times are seconds from T0. A job logs one iteration line per LOG_INTERVAL steps of STEP_S seconds,
saves every SAVE_EVERY iterations (SAVE_S blocking), and the fixture can slow steps in a window,
end attempts, add restores, incidents, syslog events and metric series (counters or gauges).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

T0 = datetime(2026, 3, 1, 12, 0, 0)
STEP_S = 1.0
LOG_INTERVAL = 10
SAVE_EVERY = 200
SAVE_S = 20.0
HOSTS = ["gpu-001", "gpu-002", "gpu-003", "gpu-004"]
OTHER = "gpu-009"  # a node outside the job: its faults are decoys
LOG = "/logs/job-100.log"
SYSLOG = "/logs/syslog"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def bus_id(gpu: int) -> str:
    return f"00000000:{0x18 + 16 * gpu:02X}:00.0"


@dataclass
class Scenario:
    conn: object
    job: str = "100"
    sources: dict[str, int] = field(default_factory=dict)

    def source(self, path: str, fmt: str) -> int:
        if path not in self.sources:
            sid = len(self.sources) + 1
            self.conn.execute(
                "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected) "
                "VALUES (?, ?, ?, ?, 0, 0, 0)",
                [sid, path, f"sha-{sid}", fmt],
            )
            self.sources[path] = sid
        return self.sources[path]

    def cluster(self) -> Scenario:
        sid = self.source("/topo/topology.json", "topology")
        for i, h in enumerate([*HOSTS, OTHER]):
            rack = "rack-01" if i < 2 else "rack-02"
            self.conn.execute(
                "INSERT INTO topology VALUES (?, 'mlx5_0', 'leaf-01', ?, ?, ?)",
                [h, f"Ethernet{i + 1}", rack, sid],
            )
            for g in range(8):
                self.conn.execute("INSERT INTO gpus VALUES (?, ?, ?, NULL, 'H100', ?)", [h, f"gpu{g}", bus_id(g), sid])
        self.conn.execute(
            "INSERT INTO jobs VALUES (?, 'pretrain', 'alice', 32, NULL, ?)",
            [self.job, self.source("/sacct/sacct.txt", "sacct")],
        )
        return self

    def attempt(self, n: int, start: float, end: float, state: str, exit_code: str = "0:0") -> Scenario:
        self.conn.execute(
            "INSERT INTO attempts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                self.job,
                n,
                at(start),
                at(end),
                state,
                exit_code,
                HOSTS,
                self.source("/sacct/sacct.txt", "sacct"),
            ],
        )
        return self

    def steps(
        self, attempt: int, start: float, it0: int, it1: int, slow: tuple[float, float, float] | None = None
    ) -> float:
        """Iteration lines it0..it1 (multiples of LOG_INTERVAL) from `start`; returns the end time."""
        t, rows = start, []
        sid = self.source(LOG, "megatron")
        for it in range(it0, it1 + 1, LOG_INTERVAL):
            factor = slow[2] if slow and slow[0] <= t < slow[1] else 1.0
            t += LOG_INTERVAL * STEP_S * factor
            rows.append([self.job, attempt, it, at(t), STEP_S * factor, sid, it])
        self.conn.executemany("INSERT INTO steps VALUES (?, ?, ?, ?, 'exact', ?, NULL, NULL, NULL, NULL, ?, ?)", rows)
        return t

    def checkpoint(self, attempt: int, kind: str, iteration: int, start: float, duration: float = SAVE_S) -> Scenario:
        self.conn.execute(
            "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, 'exact', '/ckpt', false, NULL, NULL, ?, ?)",
            [
                self.job,
                attempt,
                kind,
                iteration,
                at(start),
                at(start + duration),
                self.source(LOG, "megatron"),
                100000 + iteration,
            ],
        )
        return self

    def incident(
        self,
        attempt: int,
        start: float,
        kind: str,
        ran_for_s: float | None = None,
        host: str | None = None,
        message: str = "",
    ) -> Scenario:
        logged = start + (ran_for_s or 0)
        fields = f'{{"host": "{host}"}}' if host else None
        self.conn.execute(
            "INSERT INTO job_incidents VALUES (?, ?, ?, ?, 'exact', ?, 0, NULL, NULL, NULL, ?, ?, ?, ?, 777)",
            [
                self.job,
                attempt,
                at(start),
                at(logged),
                kind,
                int(ran_for_s * 1000) if ran_for_s else None,
                message or kind,
                fields,
                self.source(LOG, "megatron"),
            ],
        )
        return self

    def event(
        self,
        t: float,
        host: str,
        kind: str,
        component: str | None = None,
        code: int | None = None,
        message: str = "",
    ) -> Scenario:
        self.conn.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, 'err', ?, NULL, ?, 42)",
            [at(t), host, component, kind, code, message or kind, self.source(SYSLOG, "syslog")],
        )
        return self

    def series(
        self,
        host: str,
        entity: str,
        metric: str,
        start: float,
        end: float,
        every: float,
        base: float,
        bad: tuple[float, float, float] | None = None,
        counter: bool = False,
        reset_at: float | None = None,
    ) -> Scenario:
        """A gauge (value base, or bad[2] inside bad[0]..bad[1]) or a counter with that rate per second."""
        rows, total, t = [], 1000.0, start
        sid = self.source(f"/metrics/{metric}.prom", "prometheus")
        while t <= end:
            v = bad[2] if bad and bad[0] <= t < bad[1] else base
            if counter:
                total = (0.0 if reset_at is not None and t - every < reset_at <= t else total) + v * every
            rows.append([at(t), host, entity, metric, total if counter else v, sid])
            t += every
        self.conn.executemany(
            "INSERT INTO metrics (ts, host, entity, metric, value, source_id) VALUES (?, ?, ?, ?, ?, ?)", rows
        )
        return self


def healthy_job(conn, attempts_end_state: str = "COMPLETED") -> tuple[Scenario, float]:
    """One attempt, 1000 iterations, periodic saves every SAVE_EVERY, final save at the end."""
    sc = Scenario(conn).cluster()
    t = 0.0
    for it0 in range(10, 1001, SAVE_EVERY):
        t = sc.steps(1, t, it0, it0 + SAVE_EVERY - 10)
        sc.checkpoint(1, "save", it0 + SAVE_EVERY - 10, t)
        t += SAVE_S
    sc.attempt(1, -60, t + 30, attempts_end_state)
    return sc, t


def reactive_job(conn, slow_from: float = 300.0, recovers: bool = False) -> tuple[Scenario, float]:
    """Periodic save at 200, a 1.5x slowdown from `slow_from` (over by the reactive save at 330 when it
    `recovers`), final save at 400; returns the scenario and the end of the final save."""
    sc = Scenario(conn).cluster()
    slow = (slow_from, 1e9, 1.5)
    t = sc.steps(1, 0, 10, 200)
    sc.checkpoint(1, "save", 200, t)
    t = sc.steps(1, t + SAVE_S, 210, 330, slow=slow)
    sc.checkpoint(1, "save", 330, t)
    t = sc.steps(1, t + SAVE_S, 340, 400, slow=None if recovers else slow)
    sc.checkpoint(1, "save", 400, t)
    sc.attempt(1, -60, t + SAVE_S + 30, "COMPLETED")
    return sc, t + SAVE_S


def reactive_job_with_a_lossy_port(conn, recovers: bool = False) -> Scenario:
    """reactive_job, and gpu-002's switch port (leaf-01 Ethernet2) loses symbols from 300 s."""
    sc, end = reactive_job(conn, recovers=recovers)
    for i, h in enumerate(HOSTS):
        window = (300, 1e9, 0.5) if h == "gpu-002" else None
        sc.series(
            "leaf-01",
            f"Ethernet{i + 1}",
            "port_symbol_errors_total",
            -1800,
            end - SAVE_S + 600,
            30,
            0.0,
            window,
            counter=True,
        )
    return sc
