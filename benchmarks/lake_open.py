"""What a lake's manifest costs a reader as it grows (docs/lake.md): a lake of N sources (default 10,000),
opened with N loose manifest entries, then with the manifest compacted into one checkpoint, then with its
small parts compacted too (`synestra compact`: one part per small table instead of N).

The lake is built fast rather than by N ingests: one small file of sample_data/ is ingested for real, then
its entry and parts are cloned N times (hard links, new source ids), as N ingests of small files would
leave them. Printed per state: reading the manifest alone (list + parse), and opening a reader (the
manifest, the schema, the views; its small tables read into memory), wall and CPU seconds, median of
--runs.

    python benchmarks/lake_open.py --sources 10000 --work /tmp/lake-open [--json out.json]

Also printed: the files a reader opens (the parts of its tables) and how long each compaction took.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store.lake import open_reader
from synestra_cli.store.lake_fs import open_fs
from synestra_cli.store.lake_manifest import entry_name, read_manifest, write_checkpoint
from synestra_cli.store.lake_upkeep import compact
from synestra_cli.store.lake_writer import ingest_target

SAMPLE = Path(__file__).resolve().parents[1] / "sample_data" / "exports"


def build(lake: Path, n: int) -> None:
    shutil.rmtree(lake, ignore_errors=True)
    with ingest_target(f"{lake}/", None) as (conn, on_report):
        ingest_paths(conn, [SAMPLE / "topology.csv"], IngestOptions(), on_report=on_report)
    fs = open_fs(f"{lake}/")
    (seed,) = read_manifest(fs).entries
    for sid in range(seed.source_id + 1, seed.source_id + n):
        parts = []
        for part in seed.parts:
            rel = part.path.replace(f"part-{seed.source_id:08d}", f"part-{sid:08d}")
            os.link(lake / part.path, lake / rel)
            parts.append(replace(part, path=rel))
        clone = replace(seed, source_id=sid, sha256=f"{sid:064x}", source_key=f"clone-{sid}", parts=parts)
        (lake / entry_name(sid)).write_text(clone.to_json())


def timed(fn, runs: int) -> dict:
    walls, cpus = [], []
    for _ in range(runs):
        w, c = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall_s": round(statistics.median(walls), 3), "cpu_s": round(statistics.median(cpus), 3)}


def measure(lake: Path, runs: int) -> dict:
    fs = open_fs(f"{lake}/")
    manifest = read_manifest(fs)
    return {
        "loose_entries": manifest.loose,
        "checkpoint": manifest.checkpoint,
        "parts": sum(len(e.parts) for e in manifest.kept()),
        "read_manifest": timed(lambda: read_manifest(fs), runs),
        "open_reader": timed(lambda: open_reader(f"{lake}/").close(), runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sources", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--work", type=Path, required=True, help="a scratch folder (the lake is built there)")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args()
    lake = args.work / "lake"
    t = time.perf_counter()
    build(lake, args.sources)
    doc: dict = {"sources": args.sources, "build_s": round(time.perf_counter() - t, 1)}
    doc["loose"] = measure(lake, args.runs)
    t = time.perf_counter()
    fs = open_fs(f"{lake}/")
    write_checkpoint(fs, read_manifest(fs), retain=3600)  # the manifest alone, as `ingest` does it
    doc["compact_s"] = round(time.perf_counter() - t, 2)
    doc["compacted"] = measure(lake, args.runs)
    t = time.perf_counter()
    compact(f"{lake}/")  # the small parts too (`synestra compact`)
    doc["compact_parts_s"] = round(time.perf_counter() - t, 2)
    doc["parts_compacted"] = measure(lake, args.runs)
    print(json.dumps(doc, indent=1))
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    shutil.rmtree(lake, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
