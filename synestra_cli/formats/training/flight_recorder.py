"""PyTorch's NCCL Flight Recorder dumps: one file per rank, what each rank last did in each process group.

torch.distributed keeps a ring buffer of its collectives (TORCH_NCCL_TRACE_BUFFER_SIZE) and dumps it on a
watchdog timeout (TORCH_NCCL_DUMP_ON_TIMEOUT) to `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>` (default
`/tmp/nccl_trace_rank_<rank>`): a pickled dict `{version, pg_config, pg_status, entries}`; each entry a
collective or p2p op with its process group `(name, desc)`, `collective_seq_id`, `profiling_name`
(`nccl:all_reduce`), `state` (scheduled | started | completed) and `time_created_ns`. The same dict may be
saved as JSON (`_dump_nccl_trace_json`). The rank is the file name's trailing number, as fr_trace reads it.

Pickle is read safely: a pickle can name any Python callable to run while it loads, so the dump is read
with an Unpickler that refuses every global (`find_class` raises). A real dump holds only dicts, lists,
tuples, strings, numbers, booleans and None, which need no global; anything else is refused, not run.

What a dump becomes (`job_incidents` of the job named by --job, else by the dump's folder):
- one `fr_dump` row per rank: entries held, version, world size, the process groups it knows;
- one `fr_last_collective` row per (rank, process group): the last collective it enqueued there, its
  sequence number, state and time, the group's members. Which rank is behind is a question about all
  ranks together: signals/collectives.py answers it over these rows of every rank.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import read_bytes
from synestra_cli.store.sql import drop_temp, registered, scalar, sql_file

PARSE_SQL = sql_file(__package__, "flight_recorder.sql")
PICKLE_PROTOCOLS = b"\x02\x03\x04\x05"
RANK = re.compile(r"(\d+)(?:\.(?:pkl|pickle|json))?(?:\.gz)?$")
JOB_DIR = re.compile(r"^(?:job[_-]?|slurm[_-]?|nccl-inspector-)?(\d{3,})$")
ENTRY_SCHEMA = pa.schema(
    [
        ("record_id", pa.int64()),
        ("pg_id", pa.int64()),
        ("process_group", pa.list_(pa.string())),
        ("collective_seq_id", pa.int64()),
        ("p2p_seq_id", pa.int64()),
        ("op_id", pa.int64()),
        ("profiling_name", pa.string()),
        ("time_created_ns", pa.int64()),
        ("state", pa.string()),
        ("is_p2p", pa.bool_()),
        ("timeout_ms", pa.int64()),
        ("time_discovered_completed_ns", pa.int64()),
    ]
)
PG_SCHEMA = pa.schema([("name", pa.string()), ("desc", pa.string()), ("ranks", pa.string())])


class _NoGlobals(pickle.Unpickler):
    """An Unpickler that builds only plain containers: any class or function a pickle names is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: a Flight Recorder dump names no class")


def is_pickled_dump(head: bytes) -> bool:
    """A pickle (protocol 2-5) whose first keys are a Flight Recorder dump's (plan.py lets it past the
    binary-file check)."""
    magic = head[:1] == b"\x80" and head[1:2] in PICKLE_PROTOCOLS and b"version" in head[:64]
    return magic and (b"pg_config" in head or b"entries" in head)


def sniff(head: str) -> float:
    if head.startswith("\ufffd") and "version" in head[:64] and ("pg_config" in head or "entries" in head):
        return 0.95
    body = head.lstrip()
    if body.startswith("{") and '"entries"' in body and ('"pg_config"' in body or '"pg_status"' in body):
        return 0.95
    return 0.0


def _read(ctx: LoadContext) -> dict[str, Any]:
    data = read_bytes(ctx.path)
    try:
        doc = _NoGlobals(io.BytesIO(data)).load() if data[:1] == b"\x80" else json.loads(data)
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, json.JSONDecodeError) as exc:
        raise InputError(f"{ctx.display}: not a readable Flight Recorder dump ({exc})") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("entries", []), list):
        raise InputError(f"{ctx.display}: a Flight Recorder dump is a dict with `entries`; this is not one")
    return doc


def rank_of(path: Path) -> int | None:
    """The rank a dump's file name ends with (`_dump_12`, `nccl_trace_rank_3`, `trace_1.pkl`)."""
    m = RANK.search(path.name)
    return int(m.group(1)) if m else None


def job_of(ctx: LoadContext, result: LoadResult) -> str:
    """--job, else a job id among the folders above the dump (`12345/`, `job_12345/`), else its folder's name."""
    if ctx.options.job_id:
        return ctx.options.job_id
    parents = ctx.path.resolve().parent.parts[::-1]
    found = next((m.group(1) for p in parents[:3] if (m := JOB_DIR.match(p))), None)
    job = found or ctx.path.resolve().parent.name
    result.notes.append(f"{ctx.display}: no --job: the dump is taken for job {job!r} (from its folder); pass --job ID")
    return job


def _entries(doc: dict[str, Any]) -> pa.Table:
    rows = [e for e in doc.get("entries") or [] if isinstance(e, dict)]
    return pa.Table.from_pylist(rows, schema=ENTRY_SCHEMA)


def _groups(doc: dict[str, Any]) -> pa.Table:
    config = doc.get("pg_config") or {}
    rows = [v for v in config.values() if isinstance(v, dict)] if isinstance(config, dict) else []
    return pa.Table.from_pylist([{k: str(v.get(k)) for k in ("name", "desc", "ranks")} for v in rows], PG_SCHEMA)


def load(ctx: LoadContext) -> LoadResult:
    result = LoadResult()
    rank = rank_of(ctx.path)
    if rank is None:
        raise InputError(
            f"{ctx.display}: the rank is the dump's trailing number (`<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`); "
            "this name has none: rename it, e.g. nccl_trace_rank_0"
        )
    doc = _read(ctx)
    entries, groups = _entries(doc), _groups(doc)
    if not entries.num_rows:
        result.notes.append(f"{ctx.display}: rank {rank} recorded no collective (an empty dump: it never got there)")
    params = {
        "job": job_of(ctx, result),
        "rank": rank,
        "sid": ctx.source_id,
        "version": str(doc.get("version")),
        "display": ctx.display,
    }
    with registered(ctx.conn, "fr_entries", entries), registered(ctx.conn, "fr_groups", groups):
        for sql in (s for s in PARSE_SQL.split(";\n") if s.strip()):
            ctx.conn.execute(sql, {k: v for k, v in params.items() if f"${k}" in sql})
    result.rows = int(scalar(ctx.conn, "SELECT count(*) FROM job_incidents WHERE source_id = ?", [ctx.source_id]))
    drop_temp(ctx.conn, ["_fr_last"])
    return result


FORMAT = Format(
    "flight_recorder",
    "PyTorch NCCL Flight Recorder dump of one rank (pickle, read without running code, or JSON)",
    sniff,
    load,
    writes=frozenset({"job_incidents"}),
    top=0.95,
    priority=0,
)
