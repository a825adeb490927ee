"""Many jobs explained at once (a fleet's cold tax-report, `ingest --explain`), each exactly as alone.

Three reads serve every job: the job rows (explain/inputs.py); then, once each job's read windows are
known (`telemetry_windows`: its classified checkpoints and failures, no query), the telemetry and
events of all the jobs in one pass over their hosts (signals/fleet_telemetry.py); and the asset
books of all their hosts (explain/assets.py `load_books`). Each job is then explained from its share,
a few at a time in threads; a job whose telemetry the batch left out is read alone.
tests/test_explain_batch.py holds the two paths to the same JSON, byte for byte.

A month of a fleet is thousands of jobs: their telemetry is read BATCH_JOBS jobs at a time, in the order
of their first read window, so that each read holds a few days' candidates (bounded memory) and, in the
series layout, scans only those days' rows (store/series.py: a batch's rows are in time order per day).
"""

from __future__ import annotations

from datetime import datetime

import duckdb

from synestra_cli.explain.assets import load_books
from synestra_cli.explain.explanation import JobExplanation
from synestra_cli.explain.inputs import JobInputs, comparable, inputs_for
from synestra_cli.explain.job import event_read, explain_each, explain_job, telemetry_windows
from synestra_cli.signals.fleet_tables import JobRead, Window
from synestra_cli.signals.fleet_telemetry import fleet_telemetry
from synestra_cli.signals.steps import DegradationWindow

# Jobs whose telemetry is read at once: the campus's day (192 jobs) in one read, a month of it in 30.
BATCH_JOBS = 200


def explain_batch(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: dict[str, list[DegradationWindow]] | None = None
) -> list[JobExplanation]:
    """Every job's whole explanation (jobs known to be in the store: jobs_in_window), in their order;
    `windows`: their step-time degradation windows, if read already."""
    if not job_ids:
        return []
    inputs = inputs_for(conn, job_ids, windows)
    spans = {j: telemetry_windows(conn, inputs[j]) for j in job_ids}
    timed = sorted(job_ids, key=lambda j: (spans[j][0][0] if spans[j] else datetime.min, j))
    done: dict[str, JobExplanation] = {}
    for k in range(0, len(timed), BATCH_JOBS):
        done.update((e.job, e) for e in _explain_chunk(conn, timed[k : k + BATCH_JOBS], inputs, spans))
    return [done[j] for j in job_ids]


def _explain_chunk(
    conn: duckdb.DuckDBPyConnection, chunk: list[str], inputs: dict[str, JobInputs], spans: dict[str, list[Window]]
) -> list[JobExplanation]:
    reads = {
        j: JobRead(inputs[j].scope, spans[j], event_read(inputs[j].scope, spans[j]), comparable(inputs[j]))
        for j in chunk
        if spans[j]
    }
    telemetry = fleet_telemetry(conn, reads)
    books = load_books(conn, [inputs[j].scope for j in chunk])

    def one(cur: duckdb.DuckDBPyConnection, job: str) -> JobExplanation:
        return explain_job(cur, job, inputs=inputs[job], telemetry=telemetry.get(job), book=books[job])

    return explain_each(conn, chunk, one)
