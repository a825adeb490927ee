"""`synestra check`: is the store whole? A store file is read whole (DuckDB verifies each block's checksum
as it reads it); a lake's every part is checked against its manifest entry: there, the size it was
written with, the sha256 of its bytes (layout 3) and, for a part written before layout 3, the rows its
Parquet footer says. A lake reader checks the sizes (a stat per part) each time it opens a local lake
(`verify_sizes`): a part replaced by other Parquet, or by junk, is refused by name before any query
reads it silently with rows missing, or fails with DuckDB's own words (issue 38).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from synestra_cli.store.lake import load_lake
from synestra_cli.store.lake_damage import Damage, owner, size_problem
from synestra_cli.store.lake_fs import FsspecFS, LakeFS, LocalFS
from synestra_cli.store.lake_manifest import Part, file_sha256, read_manifest
from synestra_cli.store.sql import quote_ident, scalar

CHECK_SCHEMA = "synestra.check/1"
FILE_TABLES_SQL = """
SELECT table_name FROM duckdb_tables() WHERE database_name = current_database() AND NOT temporary
ORDER BY table_name
"""


@dataclass
class CheckReport:
    store: str
    kind: str  # "file" or "lake"
    tables: dict[str, int] = field(default_factory=dict)  # a store file's tables and their rows
    parts: int = 0
    bytes: int = 0
    damaged: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged

    def to_json(self) -> dict[str, Any]:
        """The `synestra.check/1` document (docs/outputs.md)."""
        return {
            "schema": CHECK_SCHEMA,
            "store": self.store,
            "kind": self.kind,
            "ok": self.ok,
            "tables": self.tables,
            "parts": self.parts,
            "bytes": self.bytes,
            "damaged": [d.__dict__ for d in self.damaged],
        }


def check_lake(target: str) -> CheckReport:
    """Every part the manifest lists: there, its size, its sha256 (or its footer's rows, before layout 3)."""
    lake = load_lake(target)
    report = CheckReport(target, "lake")
    conn = duckdb.connect(":memory:", config={"autoinstall_known_extensions": False})
    if isinstance(lake.fs, FsspecFS):
        conn.register_filesystem(lake.fs.fs)
    try:
        for entry in read_manifest(lake.fs).kept():
            for part in entry.parts:
                report.parts += 1
                report.bytes += part.bytes
                problem = _part_problem(conn, lake.fs, part)
                if problem:
                    report.damaged.append(Damage(part.path, owner(entry, part), problem))
    finally:
        conn.close()
    return report


def _part_problem(conn: duckdb.DuckDBPyConnection, fs: LakeFS, part: Part) -> str | None:
    if isinstance(fs, LocalFS):
        problem = size_problem(fs, part)
        if problem:
            return problem
        if part.sha256 is not None:
            same = file_sha256(Path(fs.url(part.path))) == part.sha256
            return None if same else "its sha256 is not the manifest's: damaged"
    elif isinstance(fs, FsspecFS):
        try:
            size = int(fs.fs.info(fs.url(part.path))["size"])
        except FileNotFoundError:
            return "missing"
        if size != part.bytes:
            return f"{size:,} bytes where the manifest says {part.bytes:,}: replaced or damaged"
        if part.sha256 is not None:
            h = hashlib.sha256()
            with fs.fs.open(fs.url(part.path), "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            return None if h.hexdigest() == part.sha256 else "its sha256 is not the manifest's: damaged"
    try:
        rows = scalar(conn, "SELECT sum(num_rows) FROM parquet_file_metadata(?)", [fs.url(part.path)])
    except duckdb.Error as exc:
        return f"not readable Parquet ({str(exc).splitlines()[0]})"
    if int(rows or 0) != part.rows:
        return f"{int(rows or 0):,} rows where the manifest says {part.rows:,}: replaced"
    return None


def check_file(conn: duckdb.DuckDBPyConnection, path: str) -> CheckReport:
    """A store file opened read-only: every table read whole, every column (DuckDB checks each block's
    checksum as it reads it; a damaged block is its error, raised as StoreError by the caller's mapping)."""
    report = CheckReport(path, "file")
    for (table,) in conn.execute(FILE_TABLES_SQL).fetchall():
        name = quote_ident(table)
        rows, _ = conn.execute(f"SELECT count(*), sum(hash(t)) FROM {name} t").fetchall()[0]  # every column read
        report.tables[table] = int(rows)
    return report
