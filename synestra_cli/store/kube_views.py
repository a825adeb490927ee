"""Migration 022_kubernetes (kube_views.sql): Kubernetes as a scheduler beside Slurm.

A Kubernetes job (a PyTorchJob, JobSet, Job, MPIJob or a pod group: formats/scheduler/kubernetes.py) is known by its
pods' container runs, one row each in `kube_runs` (as sacct's rows in `sacct_rows`). The view `kube_attempts`
numbers them into attempts over every Kubernetes file of the store at once (a watch stream or several
snapshots each show some runs: each run is read once), and `sacct_attempts`, the scheduler's attempts that
every reconciled view reads, is Slurm's and Kubernetes' together. A Kubernetes file's own `attempts` rows (its
reading alone) are a scheduler's, not a log's: `log_attempts` and `jobs_reconciled` say so.
"""

from __future__ import annotations

from synestra_cli.store.sql import sql_file

# The formats whose attempts are the scheduler's (authoritative for when an attempt ran, on which nodes,
# and how it ended), as sacct's are: a job log's attempts are mapped onto theirs.
SCHEDULER_FORMATS = ("sacct", "kubernetes")

ATTEMPTS_SQL = sql_file(__package__, "kube_attempts.sql")  # `{runs}`: the relation of kube_runs rows read


def attempts_query(runs: str) -> str:
    """kube_attempts' query over `runs` (a table or subquery of this package's callers, never user text)."""
    return ATTEMPTS_SQL.format(runs=runs)


KUBE_VIEWS = sql_file(__package__, "kube_views.sql").format(
    attempts=attempts_query("kube_runs"),
    schedulers="[" + ", ".join(f"'{f}'" for f in SCHEDULER_FORMATS) + "]",
)
