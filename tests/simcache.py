"""Simulations (and their ingested stores) built once and shared by every test module, every xdist
worker of a run, and later runs: on disk, keyed by the code that makes them.

A simulation is a pure function of the simulator's code and its arguments (same arguments, same bytes:
docs/simulator.md), so its key is a digest of `synestra_cli/simulate/` and the arguments. A store
ingested from one also depends on the reading code, so its key adds a digest of the rest of the
package. Entries are built in a scratch folder and renamed into place under a file lock: two workers
asking for one simulation build it once, and a killed run leaves no half entry behind.

Cached folders are shared: a test reads them and never writes into them. A test that writes (a store it
ingests more into, `explain --keep`) takes a copy (`store_copy`).

The cache lives in `$SYNESTRA_TEST_CACHE`, else `.simcache/` in the checkout (git ignores it: each
clone or worktree has its own); entries of other code digests are removed when a run starts (`prune`),
so it holds one generation of the code.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1] / "synestra_cli"


def root() -> Path:
    base = os.environ.get("SYNESTRA_TEST_CACHE") or str(PACKAGE.parent / ".simcache")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in sorted(files):
        h.update(str(f.relative_to(PACKAGE)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def _code(under: Path) -> list[Path]:
    return [p for p in under.rglob("*") if p.suffix in (".py", ".sql", ".json") and "__pycache__" not in p.parts]


@cache
def simulator_digest() -> str:
    return _digest(_code(PACKAGE / "simulate"))


@cache
def reader_digest() -> str:
    """Everything but the simulator: formats, ingest, store (what an ingested store depends on)."""
    return _digest([p for p in _code(PACKAGE) if "simulate" not in p.relative_to(PACKAGE).parts])


def _key(kind: str, digest: str, args: dict[str, Any]) -> str:
    text = json.dumps(args, sort_keys=True, default=str)
    return f"{kind}-{digest}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


@contextmanager
def _locked(name: str) -> Iterator[None]:
    with open(root() / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(dest: Path, make) -> Path:
    """dest, made by make(scratch) if absent, under a lock; the scratch is renamed into place whole."""
    if dest.exists():
        return dest
    with _locked(dest.name):
        if dest.exists():
            return dest
        scratch = Path(tempfile.mkdtemp(prefix=".building-", dir=root()))
        try:
            make(scratch)
            scratch.rename(dest)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return dest


def simulation(scenario: str, **kwargs: Any) -> Path:
    """The folder holding `exports/` and `truth.json` of simulate(scenario, **kwargs). Read only."""
    from synestra_cli.simulate.scenarios import simulate

    args = {"scenario": scenario, **kwargs}
    dest = root() / _key("sim", simulator_digest(), args)
    return _build(dest, lambda scratch: simulate(scratch, scenario, overwrite=True, **kwargs))


def truth(sim: Path) -> dict[str, Any]:
    return json.loads((sim / "truth.json").read_text())


def ingested(sim: Path, *parts: str, upto: str | None = None) -> Path:
    """A store file holding the ingest of sim's exports (or of `parts` under exports/, e.g. "jobs",
    "sacct.txt"), with the default options. Read only: open it with read_only=True, or take store_copy.
    `upto`: a store of that migration's schema (as an older Synestra wrote it; opened read-only, it is read
    as it is: opened for writing, it is migrated)."""
    from synestra_cli.formats.base import IngestOptions
    from synestra_cli.ingest import ingest_paths
    from synestra_cli.store import open_store

    args: dict[str, Any] = {"parts": list(parts)} | ({"upto": upto} if upto else {})
    dest = root() / _key("store", f"{reader_digest()}-{sim.name}", args)

    def make(scratch: Path) -> None:
        paths = [sim / "exports" / p for p in parts] or [sim / "exports"]
        with open_store(scratch / "store.duckdb") if upto is None else _older(scratch / "store.duckdb", upto) as conn:
            reports = ingest_paths(conn, paths, IngestOptions())
        assert all(r.status == "loaded" for r in reports), [(r.path, r.error) for r in reports]

    return _build(dest, make) / "store.duckdb"


@contextmanager
def _older(path: Path, upto: str) -> Iterator[Any]:
    """A new store file with the schema of migration `upto`, open (ingest keeps its layout)."""
    import duckdb

    from synestra_cli.store.connect import SESSION_SQL
    from synestra_cli.store.migrations import apply_migrations

    conn = duckdb.connect(str(path))
    try:
        for sql in SESSION_SQL:
            conn.execute(sql)
        apply_migrations(conn, upto)
        yield conn
    finally:
        conn.close()


def store_copy(store: Path, folder: Path, name: str = "store.duckdb") -> Path:
    dest = folder / name
    shutil.copyfile(store, dest)
    return dest


def prune() -> None:
    """Remove entries made by other versions of the code (called once per run, by the controller)."""
    keep = (f"sim-{simulator_digest()}-", f"store-{reader_digest()}-")
    for entry in root().iterdir():
        stale = entry.name.startswith(".building-") and time.time() - entry.stat().st_mtime > 6 * 3600
        if entry.is_dir() and (stale or not entry.name.startswith((*keep, ".building-"))):
            shutil.rmtree(entry, ignore_errors=True)
