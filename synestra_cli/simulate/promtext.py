"""Fast text writers: Prometheus exposition lines with ms timestamps and long CSV, built with Arrow kernels.

A line per sample is formatted in C++ (pyarrow.compute), never in a Python loop: the joined string
array's data buffer *is* the file content, so a host's few hundred thousand samples cost milliseconds.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@contextmanager
def sink(path: Path, gz: bool = False, mtime: int = 0) -> Iterator[BinaryIO]:
    """A binary file to stream into; with gz, ``path.gz`` compressed reproducibly (no name, the given
    header mtime: 0, or the content's own time for files whose readers need it)."""
    if not gz:
        with open(path, "wb") as fh:
            yield fh
        return
    with (
        open(f"{path}.gz", "wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=mtime, compresslevel=6) as fh,
    ):
        yield fh  # type: ignore[misc]


def _bytes_of(arr: pa.Array) -> bytes:
    """The concatenated UTF-8 content of a string array (every element already ends in a newline)."""
    arr = pa.concat_arrays([arr]) if isinstance(arr, pa.ChunkedArray) else arr
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    lo, hi = int(offsets[arr.offset]), int(offsets[arr.offset + len(arr)])
    return arr.buffers()[2].to_pybytes()[lo:hi]


def fmt_values(values: np.ndarray, integer: bool | str) -> pa.Array:
    """Sample values as text: integers, floats to 4 decimals, or ``"fixed"``: six decimals (136.000000),
    as some pipelines re-export integer fields."""
    if integer == "fixed":
        return pa.array(np.char.mod("%.6f", values.astype(np.float64)))
    if integer:
        return pc.cast(pa.array(np.rint(values).astype(np.int64)), pa.string())
    return pc.cast(pa.array(np.round(values.astype(np.float64), 4)), pa.string())


def family(
    out: BinaryIO,
    name: str,
    kind: str,
    help_text: str,
    labels: list[str],
    values: np.ndarray,
    ts: np.ndarray,
    mask: np.ndarray | None = None,
    integer: bool | str = False,
) -> int:
    """Write one metric family: HELP, TYPE, then each series' samples in time order. Returns samples.

    labels: S label sets (``{gpu="0",...}``); values, ts (epoch seconds) and mask: shape (S, T).
    """
    keep = np.ones(values.shape, bool) if mask is None else mask
    n = int(keep.sum())
    out.write(f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n".encode())
    if n == 0:
        return 0
    series = np.broadcast_to(np.arange(len(labels))[:, None], values.shape)[keep]
    prefix = pc.take(pa.array([f"{name}{lab}" for lab in labels]), pa.array(series.astype(np.int32)))
    ts_ms = np.broadcast_to(np.round(ts * 1000.0).astype(np.int64), values.shape)[keep]
    line = pc.binary_join_element_wise(
        prefix, fmt_values(values[keep], integer), pc.cast(pa.array(ts_ms), pa.string()), " "
    )
    line = pc.binary_join_element_wise(line, "", "\n")
    out.write(_bytes_of(line))
    return n


def long_csv(out: BinaryIO, iso_times: pa.Array, cols: list[pa.Array]) -> int:
    """Rows ``timestamp,<cols...>`` (every column already a string array of equal length)."""
    line = pc.binary_join_element_wise(iso_times, *cols, ",")
    line = pc.binary_join_element_wise(line, "", "\n")
    out.write(_bytes_of(line))
    return len(line)


def iso_utc(ts: np.ndarray) -> pa.Array:
    """ISO-8601 UTC with milliseconds and Z: ``2026-11-02T03:04:05.123Z``."""
    ms = np.round(ts * 1000.0).astype("datetime64[ms]")
    return pa.array(np.char.add(np.datetime_as_string(ms, unit="ms"), "Z"))


def query_range(out: BinaryIO, series: list[tuple[dict[str, str], np.ndarray]], ts: np.ndarray) -> int:
    """A Prometheus ``/api/v1/query_range`` answer (matrix): float-second timestamps on the step grid,
    values as strings, one result per series (prometheus docs/querying/api.md)."""
    stamps = [round(float(t), 3) for t in ts]
    result = [
        {"metric": labels, "values": [[t, _prom_value(v)] for t, v in zip(stamps, vals.tolist(), strict=True)]}
        for labels, vals in series
    ]
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    out.write(json.dumps(doc, separators=(",", ":")).encode())
    return len(series) * len(stamps)


def _prom_value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))
