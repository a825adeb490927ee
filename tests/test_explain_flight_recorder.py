"""Flight Recorder evidence in explain: a hang's explanation names the host of the rank its peers wait for.

The dumps are real (nvidia-resiliency-ext's fault-injection traces, 16 ranks, GPU_ERROR injected on rank 12:
tests/data/real_samples/collectives/PROVENANCE.md); the job around them is hand-made, the way the parsers
write it: two nodes of 8 GPUs, attempt 1 hangs in a collective (NCCL watchdog timeout), is requeued and
attempt 2 restores the last checkpoint.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from conftest import REAL_SAMPLES

from synestra_cli.explain.job import explain_job
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.signals.collectives import laggards_for

DUMPS = REAL_SAMPLES / "collectives" / "nvrx-fr-dumps_gpu_error_1st"
HANG = datetime(2025, 9, 23, 6, 55, 5)  # the dumps' last collectives were enqueued then (UTC)
JOB = "7001"


def _job(conn, worker_host: str | None = None) -> None:
    """sacct: attempt 1 on node-a, node-b fails after the hang; attempt 2 restores iteration 300. The job log:
    steps, a save, the watchdog timeout of rank 0 (a waiting rank), the restore."""
    conn.execute(
        "INSERT INTO sources (source_id, path, sha256, format, bytes, rows, rejected) "
        "VALUES (901, 'sacct.txt', 's', 'sacct', 0, 0, 0), (902, '7001.log', 'l', 'megatron', 0, 0, 0)"
    )
    conn.execute(f"INSERT INTO jobs (job_id, gpus, source_id) VALUES ('{JOB}', 16, 901)")
    t = HANG
    attempts = [
        (1, t - timedelta(hours=1), t + timedelta(minutes=12), "FAILED", ["node-b", "node-a"]),
        (2, t + timedelta(minutes=20), t + timedelta(hours=2), "COMPLETED", ["node-a", "node-b"]),
    ]
    for n, start, end, state, nodes in attempts:
        conn.execute(
            "INSERT INTO attempts (job_id, attempt, start_ts, end_ts, state, nodes, source_id) "
            "VALUES (?, ?, ?, ?, ?, ?, 901)",
            [JOB, n, start, end, state, nodes],
        )
        conn.execute(
            "INSERT INTO attempts (job_id, attempt, start_ts, end_ts, source_id) VALUES (?, ?, ?, ?, 902)",
            [JOB, n, start + timedelta(minutes=1), end - timedelta(minutes=1)],
        )
    steps = [(JOB, 1, i, t - timedelta(minutes=50) + timedelta(seconds=10 * i), 10.0) for i in range(1, 301)]
    steps += [(JOB, 2, i, t + timedelta(minutes=25) + timedelta(seconds=10 * (i - 300)), 10.0) for i in range(301, 600)]
    conn.executemany(
        "INSERT INTO steps (job_id, attempt, iteration, ts, ts_precision, step_time_s, source_id) "
        "VALUES (?, ?, ?, ?, 'exact', ?, 902)",
        steps,
    )
    conn.executemany(
        "INSERT INTO checkpoints (job_id, attempt, kind, iteration, start_ts, end_ts, ts_precision, source_id, line) "
        "VALUES (?, ?, ?, ?, ?, ?, 'exact', 902, ?)",
        [
            (JOB, 1, "save", 300, t - timedelta(minutes=1), t - timedelta(seconds=30), 400),
            (JOB, 2, "restore", 300, t + timedelta(minutes=22), t + timedelta(minutes=24), 900),
        ],
    )
    conn.execute(
        "INSERT INTO job_incidents (job_id, attempt, ts, logged_ts, ts_precision, kind, rank, collective, seq, "
        "timeout_ms, ran_for_ms, message, source_id, line) VALUES (?, 1, ?, ?, 'exact', 'nccl_timeout', 0, "
        "'ALLTOALL_BASE', 20538, 600000, 600051, 'Watchdog caught collective operation timeout', 902, 700)",
        [JOB, t, t + timedelta(seconds=600)],
    )
    if worker_host:
        conn.execute(
            "INSERT INTO job_incidents (job_id, attempt, ts, ts_precision, kind, rank, message, fields, source_id, "
            "line) VALUES (?, 1, ?, 'exact', 'worker_failed', 12, 'failed', ?, 902, 710)",
            [JOB, t + timedelta(seconds=610), f'{{"host": "{worker_host}", "exitcode": "-6", "signal": "SIGABRT"}}'],
        )
    ingest_paths(conn, sorted(DUMPS.iterdir()), IngestOptions(job_id=JOB))


def _restore(conn):
    (cp,) = [c for c in explain_job(conn, JOB).checkpoints if c.kind == "restore"]
    return cp


def test_the_lagging_rank_is_found_in_its_attempt_with_its_host_from_the_allocation(conn):
    _job(conn)
    (lag,) = laggards_for(conn, [JOB])[JOB]
    assert (lag.rank, lag.attempt, lag.host, lag.host_basis) == (12, 1, "node-b", "allocation")
    group = ("EXPERT_MODEL_PARALLEL_GROUP", "nccl:all_to_all", 20538, 3)
    assert (lag.pg_desc, lag.collective, lag.seq, lag.waiting) == group


def test_a_hang_is_explained_by_the_host_of_the_rank_its_peers_wait_for(conn):
    _job(conn)
    cp = _restore(conn)
    assert cp.trigger == "restart"
    assert (cp.cause.category, cp.cause.host, cp.cause.component) == ("workload.straggler", "node-b", "rank12")
    (link,) = [lk for lk in cp.chain if lk.evidence.get("kind") == "fr_lagging_rank"]
    assert link.host == "node-b" and link.entity == "rank12"
    assert "never joined nccl:all_to_all #20538 of EXPERT_MODEL_PARALLEL_GROUP" in link.signal
    assert link.evidence["source"].endswith("_dump_12")
    # the watchdog names a waiting rank (rank 0), not the one it waits for
    assert any("nccl_timeout" in lk.signal and lk.entity == "rank0" for lk in cp.chain)


def test_a_host_the_job_log_gives_the_rank_wins_over_the_allocation(conn):
    _job(conn, worker_host="gpu-node-17")
    (lag,) = laggards_for(conn, [JOB])[JOB]
    assert (lag.host, lag.host_basis) == ("gpu-node-17", "logged")
    assert _restore(conn).cause.host == "gpu-node-17"
