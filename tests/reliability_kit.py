"""What the reliability suite's files share (tests/test_reliability_*.py, issue 38): the console script
run as a user runs it, and a few lines of syslog to ingest."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from synestra_cli.formats.base import IngestOptions

SYNESTRA = str(Path(sys.executable).parent / "synestra")
TRACEBACK = "Traceback (most recent call last)"
OPTIONS = IngestOptions(year=2026)


def syslog(host: str, n: int = 3, minute: int = 0) -> str:
    """n kernel lines of `host`, one a second from 10:minute:01 on Nov 29."""
    return "".join(f"Nov 29 10:{minute:02d}:{i:02d} {host} kernel: line {i}\n" for i in range(1, n + 1))


def run_synestra(*args: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """`synestra ARGS...` in a process of its own, its output captured as text."""
    return subprocess.run(
        [SYNESTRA, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )
