"""`synestra ingest`: walk paths, detect each file's format, parse it outside the store, commit it whole.

A source is keyed on its content (sha256 of the file's bytes), its format and the ingest options its
parser read (--timezone, --year, --host, --job): the same bytes read another way are another source.
The same path seen again with the same reading is the same file, later:
- its old content is a prefix and it ends a line: it grew. A line-oriented format (Format.appendable) loads
  only the new lines; any other is read again whole and replaces the old source(s);
- else it changed: the new content replaces the old source(s) and every row they wrote.

Each file is parsed into a stage (staging.py), in memory beside the store; files are committed in
batches, each file whole or not at all, in short transactions of the store (batch.py), between which
the store is released for readers (run.py). Every exception inside one file's load is that file's
failure and the rest go on; a store that cannot be written stops the run (StoreWriteError).

Modules: walk (the files), plan (skip, grow or replace), parse (files into a stage), staging (stage and
store), batch (checks and commit), run (the threads, the passes and the batches), report (FileReport).
"""

from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest.parse import ProgressFn
from synestra_cli.ingest.plan import Digest, file_digest
from synestra_cli.ingest.report import FileReport
from synestra_cli.ingest.run import ReportFn, ingest_file, ingest_into, ingest_paths
from synestra_cli.ingest.walk import WalkIssue, iter_inputs

__all__ = [
    "Digest",
    "FileReport",
    "IngestOptions",
    "ProgressFn",
    "ReportFn",
    "WalkIssue",
    "file_digest",
    "ingest_file",
    "ingest_into",
    "ingest_paths",
    "iter_inputs",
]
