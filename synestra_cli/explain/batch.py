"""Many jobs explained at once (a fleet's cold tax-report, `ingest --explain`), each exactly as alone.

Three reads serve every job: the job rows (explain/inputs.py); then, once each job's read windows are
known (`telemetry_windows`: its classified checkpoints and failures, no query), the telemetry and
events of all the jobs in one pass over their hosts (signals/fleet_telemetry.py); and the asset
books of all their hosts (explain/assets.py `load_books`). Each job is then explained from its share,
a few at a time in threads; a job whose telemetry the batch left out is read alone.
tests/test_explain_batch.py holds the two paths to the same JSON, byte for byte.
"""

from __future__ import annotations

import duckdb

from synestra_cli.explain.api import JobExplanation, event_read, explain_each, explain_job, telemetry_windows
from synestra_cli.explain.assets import load_books
from synestra_cli.explain.inputs import comparable, inputs_for
from synestra_cli.signals.fleet_telemetry import JobRead, fleet_telemetry
from synestra_cli.signals.steps import DegradationWindow


def explain_batch(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: dict[str, list[DegradationWindow]] | None = None
) -> list[JobExplanation]:
    """Every job's whole explanation (jobs known to be in the store: jobs_in_window), in their order;
    `windows`: their step-time degradation windows, if read already."""
    if not job_ids:
        return []
    inputs = inputs_for(conn, job_ids, windows)
    spans = {j: telemetry_windows(conn, inputs[j]) for j in job_ids}
    reads = {
        j: JobRead(inputs[j].scope, w, event_read(inputs[j].scope, w), comparable(inputs[j]))
        for j, w in spans.items()
        if w
    }
    telemetry = fleet_telemetry(conn, reads)
    books = load_books(conn, [inputs[j].scope for j in job_ids])

    def one(cur: duckdb.DuckDBPyConnection, job: str) -> JobExplanation:
        return explain_job(cur, job, inputs=inputs[job], telemetry=telemetry.get(job), book=books[job])

    return explain_each(conn, job_ids, one)
