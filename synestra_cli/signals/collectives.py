"""Ranks left behind in a collective: what NCCL's Flight Recorder says about a hang.

When a collective hangs every rank that reached it waits, and the NCCL watchdog of each of them times out:
the timeouts name the waiting ranks, not the one they wait for. The Flight Recorder dumps of all ranks
(or an analyser's report of them) show the front of each process group, the furthest collective its ranks
enqueued, and which members never enqueued it. Those ranks are behind; their host is where to look.

A rank's host is taken, in order, from a log line of the job that names both (torchrun's ChildFailedError
entry, srun's task line: `logged`), else from the attempt's allocation (`allocation`: the world size the
dumps give, split evenly over the attempt's sorted nodes, ranks assigned in blocks as torchrun and srun do).

NVRx's straggler detection names slow ranks outright (`STRAGGLER DETECTION WARNING ... Affected ranks`, with
their node): they are the ones their peers wait for, taken with the same host rules (found_by says which).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from synestra_cli.store.sql import sql_file

LAGGING_SQL = sql_file(__package__, "collectives.sql")


@dataclass(frozen=True)
class Laggard:
    attempt: int | None
    rank: int
    host: str | None
    host_basis: str | None  # logged | allocation | None (unknown)
    pg: str | None  # the process group's global name
    pg_desc: str | None  # its description (TENSOR_MODEL_PARALLEL_GROUP, default_pg)
    collective: str | None  # the collective the peers wait in (nccl:all_to_all)
    seq: int | None  # its sequence number in the group
    waiting: int | None  # the peers that reached it
    groups: int  # in how many process groups the rank is behind
    ts: datetime | None  # when the first peer enqueued it (the hang's start, at the latest)
    path: str | None
    line: int | None
    found_by: str  # flight_recorder (the dumps) | fr_trace | nvrx_collective_analyzer | nvrx_straggler_detection


def laggards_for(conn: duckdb.DuckDBPyConnection, job_ids: list[str]) -> dict[str, list[Laggard]]:
    """Each job's ranks behind in a collective, most groups behind first (one query for many jobs)."""
    out: dict[str, list[Laggard]] = {j: [] for j in job_ids}
    for job, *row in conn.execute(LAGGING_SQL, {"jobs": list(job_ids)}).fetchall():
        out[job].append(Laggard(*row))
    return out
