"""Explanations kept in the store, so that a fleet's tax-report does not re-explain every job each time.

An explanation is a function of the store's contents and of Synestra's code only. It is kept under a key
made of both: a digest of the code and rule tables that produce an explanation (`code_digest`), and the
sources ingested so far (their count and the last source id). Any ingest that loads a file, and any
change to explain/, signals/, accounting/ or the store's views (an upgrade, a tuned threshold), changes
the key, so a kept explanation is either current or ignored: never stale. Keeping them is best effort:
a store another process holds, or a read-only file, is left alone (tax-report opens the store
read-only; the write is a separate, short transaction afterwards). A store that keeps results beside its
data (a lake) keeps them there, under the same key (store/door.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

import synestra_cli
from synestra_cli import __version__
from synestra_cli.errors import SynestraError
from synestra_cli.explain.chain import ChainLink
from synestra_cli.explain.document import CauseDoc, CheckpointDoc, ExplainDoc, FailureDoc, link_of, stamp
from synestra_cli.explain.evidence import Cause
from synestra_cli.explain.explanation import CheckpointExplanation, FailureExplanation, JobExplanation
from synestra_cli.explain.job import explain_each, explain_job, jobs_in_window
from synestra_cli.explain.rules import SCHEMA
from synestra_cli.signals.steps import DegradationWindow
from synestra_cli.store.door import load_kept_beside, open_store
from synestra_cli.store.sql import fetch_one, has_table, transaction

KEY_SQL = "SELECT count(*), coalesce(max(source_id), 0) FROM sources"
LOAD_SQL = "SELECT job_id, doc FROM explanations WHERE store_key = ? AND job_id IN (SELECT unnest(?::VARCHAR[]))"
DELETE_SQL = "DELETE FROM explanations WHERE job_id IN (SELECT unnest(?::VARCHAR[]))"
INSERT_SQL = "INSERT INTO explanations (job_id, store_key, doc) SELECT unnest(?::VARCHAR[]), ?, unnest(?::JSON[])"


# What produces an explanation: its code, the rule tables and thresholds, and the views it reads.
PRODUCERS = ("explain", "signals", "accounting", "store")
PRODUCER_SUFFIXES = (".py", ".sql", ".json")


def code_digest(root: Path | None = None) -> str:
    """A digest of the files under `root` (the installed package) that produce an explanation: their
    paths and bytes, in a stable order. A changed threshold or rule changes it; a reformatted comment
    does too, which costs one re-explanation, never a stale one."""
    root = Path(synestra_cli.__file__).parent if root is None else root
    h = hashlib.sha256()
    for pkg in PRODUCERS:
        for f in sorted((root / pkg).rglob("*")):
            if f.suffix in PRODUCER_SUFFIXES and "__pycache__" not in f.parts:
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@functools.cache
def process_digest() -> str:
    """code_digest of the running code, read once per process (the code cannot change under it)."""
    return code_digest()


def store_key(conn: duckdb.DuckDBPyConnection) -> str:
    """What a kept explanation depends on: the explanation schema, Synestra's version and code, and the
    sources in the store."""
    n, last = fetch_one(conn, KEY_SQL) or (0, 0)
    return key_for(n, last)


def key_for(n: int, last: int) -> str:
    """The key of a store (or lake) holding n sources, the last one `last`, under the running code."""
    return f"{SCHEMA}|{__version__}+{process_digest()}|{n}|{last}"


def _has_table(conn: duckdb.DuckDBPyConnection) -> bool:
    # A store created by an older Synestra and opened read-only has not been migrated yet.
    return has_table(conn, "explanations")


def load(conn: duckdb.DuckDBPyConnection, job_ids: list[str], key: str) -> dict[str, JobExplanation]:
    """The kept explanations of these jobs that are current under `key`."""
    if not job_ids or not _has_table(conn):
        return {}
    load_kept_beside(conn, key)  # those kept beside a lake's parts (a store file's tables hold them already)
    rows = conn.execute(LOAD_SQL, [key, job_ids]).fetchall()
    return {job: from_json(json.loads(doc, object_hook=_datetimes)) for job, doc in rows}


def explain_jobs(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str], windows: dict[str, list[DegradationWindow]] | None = None
) -> tuple[dict[str, JobExplanation], list[JobExplanation], str]:
    """Every job's whole explanation, reusing the kept ones; also those computed now (all at once:
    explain/batch.py), and the key to keep them under (see `save`). `windows`: the jobs' step-time
    degradation windows, when the caller has read them already (tax-report's buckets)."""
    from synestra_cli.explain import batch  # the fleet's read: not imported to explain one job

    key = store_key(conn)
    out = load(conn, job_ids, key)
    todo = [job for job in job_ids if job not in out]
    computed = batch.explain_batch(conn, todo, windows)  # the fleet's rows and telemetry read once for all of them
    out.update((e.job, e) for e in computed)
    return out, computed, key


def explain_reusing(
    conn: duckdb.DuckDBPyConnection, job_ids: list[str]
) -> tuple[list[JobExplanation], list[JobExplanation], str]:
    """`explain --job` and `--all` on whole jobs: each job's explanation in the given order, the one kept
    under the store's current key (by tax-report, ingest --explain or an earlier explain) when there is
    one, else computed now (several at once through the fleet's read, explain/batch.py, each exactly
    as alone); also those computed, and the key to keep them under (save_to). A kept explanation is
    that of the same code and sources: the same document."""
    key = store_key(conn)
    kept = load(conn, job_ids, key)
    todo = [job for job in job_ids if job not in kept]
    if len(todo) > 1:
        from synestra_cli.explain import batch  # the fleet's read: not imported to explain one job

        fresh = batch.explain_batch(conn, todo)
    else:
        fresh = explain_each(conn, todo, explain_job)
    computed = dict(zip(todo, fresh, strict=True))
    return [kept.get(job) or computed[job] for job in job_ids], fresh, key


def keep_all(conn: duckdb.DuckDBPyConnection, db: str | Path | None = None) -> int:
    """Explain every job of the store not already kept under its current key, and keep them (the store
    open for writing: `ingest --explain`; a reader with `db` naming a store that keeps results beside its
    data, a lake: kept there); how many were explained."""
    _, computed, key = explain_jobs(conn, jobs_in_window(conn))
    if (store := open_store(db)).keeps_beside():
        store.keep_beside(key, _docs(computed), key_for)
    else:
        save(conn, key, computed)
    return len(computed)


# Something kept beside the explanations under the same key, in their transaction (kept/taxes.py).
Beside = Callable[[duckdb.DuckDBPyConnection], None]


def save(
    conn: duckdb.DuckDBPyConnection, key: str, explanations: Iterable[JobExplanation], beside: Beside | None = None
) -> int:
    """Keep these explanations under `key` (and run `beside` in the same transaction), if the store has not
    changed since; how many explanations were kept."""
    docs = _docs(explanations)
    if (not docs and beside is None) or store_key(conn) != key:
        return 0
    with transaction(conn):
        if docs:
            conn.execute(DELETE_SQL, [[j for j, _ in docs]])
            conn.execute(INSERT_SQL, [[j for j, _ in docs], key, [d for _, d in docs]])
        if beside is not None:
            beside(conn)
    return len(docs)


def save_to(db: str | Path | None, key: str, explanations: list[JobExplanation], beside: Beside | None = None) -> int:
    """Open the store for writing just long enough to keep the explanations (and `beside`); 0 if it cannot
    be written now (held by another process, a read-only file): the report stands without them."""
    if not explanations and beside is None:
        return 0
    try:
        store = open_store(db, long_migrations=False)
        if store.keeps_beside():  # beside a lake's parts (store/lake_kept.py); `beside` is not kept
            return store.keep_beside(key, _docs(explanations), key_for) if explanations else 0
        with store as conn:  # a few rows: no rewrite of an older store's samples
            return save(conn, key, explanations, beside)
    except (SynestraError, duckdb.Error, OSError):
        return 0


def _docs(explanations: Iterable[JobExplanation]) -> list[tuple[str, str]]:
    return [(e.job, json.dumps(e.to_json(copied=False), default=_iso)) for e in explanations]


# A datetime is kept tagged, so that it reads back as the datetime it was wherever it stands (an evidence's
# window too, not only the document's own times): a kept explanation prints as the computed one.
DATETIME = "$datetime"


def _iso(value: Any) -> dict[str, str]:
    if isinstance(value, datetime):
        return {DATETIME: value.isoformat()}
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def _datetimes(obj: dict[str, Any]) -> Any:
    return datetime.fromisoformat(obj[DATETIME]) if len(obj) == 1 and DATETIME in obj else obj


def _cause(doc: CauseDoc | None) -> Cause | None:
    if doc is None:
        return None
    return Cause(
        doc["category"],
        doc["host"],
        doc["component"],
        stamp(doc["first_signal"]),
        doc["confidence"],
        doc["reported_healthy"],
        tuple(doc.get("assets") or ()),
        doc.get("action"),
        tuple(link_of(lk) for lk in doc.get("evidence") or ()),
    )


def _chain(doc: CheckpointDoc | FailureDoc) -> list[ChainLink]:
    return [link_of(lk) for lk in doc["chain"]]


def _failure(doc: FailureDoc) -> FailureExplanation:
    return FailureExplanation(
        doc["attempt"],
        stamp(doc["at"]),
        stamp(doc["end"]),
        doc["state"],
        doc["exit_code"],
        _cause(doc["cause"]),
        _chain(doc),
        [c for c in map(_cause, doc["alternatives"]) if c is not None],
    )


def _checkpoint(doc: CheckpointDoc) -> CheckpointExplanation:
    chain = _chain(doc)
    return CheckpointExplanation(
        doc["kind"],
        doc["attempt"],
        doc["iteration"],
        stamp(doc["start"]),
        stamp(doc["end"]),
        doc["duration_s"],
        doc["trigger"],
        doc["slow"],
        _cause(doc["cause"]),
        chain,
        [c for c in map(_cause, doc["alternatives"]) if c is not None],
        doc["tax"],
        precision=doc.get("precision"),
    )


def from_json(doc: ExplainDoc) -> JobExplanation:
    """The inverse of `JobExplanation.to_json`, read back with its datetimes (load)."""
    return JobExplanation(
        doc["job"],
        doc["hosts"],
        doc["attempts"],
        doc["save_cadence_iterations"],
        [_checkpoint(c) for c in doc["checkpoints"]],
        doc["tax"],
        [_failure(f) for f in doc.get("failures", [])],
        list(doc.get("restarts", [])),
        list(doc.get("restart_loops", [])),
    )
