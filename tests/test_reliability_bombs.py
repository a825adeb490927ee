"""Issue 38, defect 4: decompression bombs. A compressed input that inflates past a ratio or a size (both
SYNESTRA_* settings) is one file's refusal, in one line, before it costs minutes and gigabytes of spill.
Each test failed on the code before it.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import pytest
from reliability_kit import TRACEBACK
from reliability_kit import run_synestra as _run
from reliability_kit import syslog as _syslog

from synestra_cli.errors import ExitCode
from synestra_cli.formats.base import IngestOptions
from synestra_cli.ingest import ingest_paths
from synestra_cli.store import open_store

pytestmark = pytest.mark.reliability


# ---------------------------------------------------------------- defect 4: decompression bombs


def _bomb(path: Path, text_bytes: int, line: bytes) -> Path:
    """A gzip stream of `text_bytes` of one repeated line: ~1000x, as a bomb made of text is."""
    block = line * (1 << 20 // len(line))
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as f:
        for _ in range(text_bytes // len(block)):
            f.write(z.compress(block))
        f.write(z.flush())
    return path


@pytest.mark.slow  # ~20 s each: a bomb made and refused after its first 64 MiB
@pytest.mark.parametrize(
    ("name", "line"),
    [
        (
            "bomb.log.gz",
            b"Nov 29 10:00:01 gpu-001 kernel: NVRM: Xid (PCI:0000:2a:00): 79, GPU has fallen off the bus\n",
        ),
        ("bomb.prom.gz", b'DCGM_FI_DEV_GPU_TEMP{gpu="0",Hostname="gpu-001"} 61 1764410400000\n'),
    ],
    ids=["syslog", "prometheus"],
)
def test_4_a_decompression_bomb_is_refused_by_its_ratio_and_the_rest_loads(tmp_path, name, line):
    bomb = _bomb(tmp_path / name, 200 << 20, line)
    assert bomb.stat().st_size < 1 << 20  # 200 MB of text in under 1 MB
    good = tmp_path / "good.log"
    good.write_text(_syslog("gpu-009"))
    res = _run("ingest", str(bomb), str(good), "--year", "2026", "--db", str(tmp_path / "s.duckdb"))
    assert res.returncode == ExitCode.INPUT, res.stderr
    assert TRACEBACK not in res.stderr
    refusal = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]
    assert len(refusal) == 1 and "inflates more than 200 times its size" in refusal[0], res.stderr
    assert "SYNESTRA_MAX_INFLATE_RATIO" in refusal[0]
    assert "1 loaded, 0 skipped, 1 failed" in res.stderr


@pytest.mark.slow  # ~20 s each: a bomb made and refused after its first 64 MiB
def test_4_the_bytes_a_file_inflates_to_are_bounded_by_a_setting(tmp_path):
    big = tmp_path / "big.log.gz"
    with gzip.open(big, "wt", compresslevel=1) as f:  # an ordinary ratio, but more than the bound
        for i in range(40_000):
            f.write(f"Nov 29 10:{i // 60 % 60:02d}:{i % 60:02d} gpu-001 kernel: message {i} {os.urandom(20).hex()}\n")
    db = str(tmp_path / "s.duckdb")
    res = _run("ingest", str(big), "--year", "2026", "--db", db, env={"SYNESTRA_MAX_INFLATED": "1MB"})
    assert res.returncode == ExitCode.INPUT and TRACEBACK not in res.stderr, res.stderr
    assert "inflates to more than 1MB" in res.stderr and "SYNESTRA_MAX_INFLATED" in res.stderr
    assert _run("ingest", str(big), "--year", "2026", "--db", db).returncode == 0  # the default bound: loads
    bad = _run("ingest", str(big), "--db", db, env={"SYNESTRA_MAX_INFLATE_RATIO": "0"})
    assert bad.returncode == ExitCode.USAGE and "SYNESTRA_MAX_INFLATE_RATIO" in bad.stderr


@pytest.mark.heavy
def test_4_an_ordinary_gzip_export_is_not_a_bomb(db_path):
    from conftest import SAMPLE_EXPORTS

    with open_store(db_path) as c:
        reports = ingest_paths(c, [SAMPLE_EXPORTS / "dcgm" / "gpu-001.prom.gz"], IngestOptions())
    assert [r.status for r in reports] == ["loaded"]  # 37x: real DCGM exports compress 14-40x
