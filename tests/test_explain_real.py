"""explain on the real public training logs and syslog samples: it says what it can, and where the
evidence is missing it says `unknown` with low confidence instead of guessing."""

from __future__ import annotations

import pytest
from conftest import REAL_SAMPLES

from synestra_cli.explain.job import explain_job, jobs_in_window
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths


@pytest.mark.heavy
def test_real_samples_are_explained_without_guessing(conn):
    ingest_paths(conn, [REAL_SAMPLES / "training", REAL_SAMPLES / "syslog"], IngestOptions())
    explained = {j: explain_job(conn, j) for j in jobs_in_window(conn)}
    checkpoints = [cp for e in explained.values() for cp in e.checkpoints]
    assert len(checkpoints) >= 5
    # No host, no telemetry: nothing can be blamed on the infrastructure. What the job's own log shows
    # (NVRx's in-job restart after an uncaught Python exception) is the job's: a software crash, no host.
    blamed = [cp for cp in checkpoints if cp.cause is not None and cp.cause.category != "unknown"]
    assert all(cp.cause is None or cp.cause.host is None for cp in checkpoints)
    assert all(cp.cause.confidence <= 0.3 for cp in checkpoints if cp.cause and cp.cause.category == "unknown")
    assert [(j, cp.kind, cp.iteration, cp.cause.category) for j, e in explained.items() for cp in e.checkpoints
            if cp in blamed] == [
        ("nemo-resiliency-demo_nvrx-ft-launcher-in-job-restart_nemo-run-prefix", "restore", 9, "software.crash")
    ]  # fmt: skip
    # A single save interval is no cadence: torchtitan's saves at steps 1 and 800 are not "reactive".
    titan = next(e for j, e in explained.items() if "torchtitan-pr1287" in j)
    assert {cp.trigger for cp in titan.checkpoints} == {"unknown"}
    assert any(cp.trigger == "final" for cp in checkpoints)
