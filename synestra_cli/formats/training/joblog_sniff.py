"""What a job log's head looks like, for the job-log formats' sniffers (formats/training/megatron.py, deepspeed.py,
...): a line matching a pattern, colour codes removed; or a syslog envelope on most lines, which makes the
file the syslog parser's, not a job log."""

from __future__ import annotations

import functools
import re

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@functools.lru_cache(maxsize=16)  # every job-log format asks it of the same head
def _plain(head: str) -> str:
    return ANSI.sub("", head)


def has_line(head: str, pattern: str, *needles: str) -> bool:
    """Whether a line of the head matches pattern, colour codes removed (torchtitan colours its step
    lines). The first match answers: detection sniffs every file's head with several of these.
    `needles`: literals one of which every match contains. A head holding none is answered without the
    regex, whose `^` is tried at every character (most heads detection sniffs are not this format's)."""
    plain = _plain(head)
    if needles and not any(n in plain for n in needles):
        return False
    return re.search(pattern, plain, re.MULTILINE) is not None


SYSLOG_ENVELOPE = re.compile(
    r"^(?:<\d+>)?[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [^:\s]+(?:\[\d+\])?:", re.MULTILINE
)


@functools.lru_cache(maxsize=16)  # every job-log format asks it of the same head
def looks_like_syslog(head: str) -> bool:
    """A syslog envelope (`Mon DD HH:MM:SS host tag:`) on most lines: the syslog parser's file."""
    lines = [ln for ln in head.splitlines()[:200] if ln.strip()]
    return bool(lines) and len(SYSLOG_ENVELOPE.findall("\n".join(lines))) * 2 > len(lines)
