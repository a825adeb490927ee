"""Per-host syslog in the envelopes real clusters keep, flavours mixed across hosts.

- ``rfc3164``: rsyslog RSYSLOG_TraditionalFileFormat, kernel lines keep the printk uptime stamp
  (``Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid ...``, gpu-operator#1146).
- ``rfc3339``: rsyslog RSYSLOG_FileFormat, the Debian 12+ default (``2021-12-19T20:35:40.572463+01:00``).
- ``journal``: ``journalctl -o json``, one compact object per line, every value a string.
- ``journal`` with ``printk=True`` (the ``journal_printk`` rendering): every host keeps journald JSON and
  its kernel lines arrive through the syslog socket (a forwarder reading the kernel ring buffer), so
  MESSAGE still starts with the printk stamp: ``[267043.104677] nfs: server fs01 not responding``.
Message wording is copied from real drivers (simulate/faults.py); hosts' clocks are skewed.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from synestra_cli.simulate.cluster import Cluster
from synestra_cli.simulate.faults import Effect, LogLine
from synestra_cli.simulate.promtext import sink

FLAVOURS = ("rfc3164", "rfc3339", "journal")
SUFFIX = {"rfc3164": "messages", "rfc3339": "syslog", "journal": "journal.json"}
KERNEL = (
    "Linux version 5.15.0-119-generic (buildd@lcy02-amd64-075) (gcc (Ubuntu 11.4.0-1ubuntu1~22.04) "
    "11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #129-Ubuntu SMP Fri Aug 2 19:25:20 UTC 2024 (Ubuntu "
    "5.15.0-119.129-generic 5.15.160)"
)


def flavour(cl: Cluster, host: str) -> str:
    return FLAVOURS[cl.host_index(host) % len(FLAVOURS)]


def boot_times(cl: Cluster, host: str, t0: float, effects: list[Effect], seed: int) -> list[tuple[float, str]]:
    """(boot time, boot id) of each boot: the first days before the simulation, then after each reboot."""
    rng = np.random.default_rng([seed, 11, cl.host_index(host)])
    boots = [t0 - float(rng.uniform(2, 40)) * 86400.0]
    boots += sorted(e.end - 45.0 for e in effects if e.kind == "reboot" and e.end is not None)
    return [(b, hashlib.md5(f"{seed}{host}{b}".encode()).hexdigest()) for b in boots]


def routine_lines(host: str, t0: float, t1: float, seed: int, index: int) -> list[LogLine]:
    """The hourly cron run every host logs: syslog is never silent."""
    first = (t0 // 3600 + 1) * 3600 + 1
    pid = 40000 + index * 7
    return [
        LogLine(t, host, "(root) CMD (   cd / && run-parts --report /etc/cron.hourly)", 6, f"CRON[{pid + i}]")
        for i, t in enumerate(np.arange(first, t1, 3600.0))
    ]


def write_host(
    outdir: Path,
    cl: Cluster,
    host: str,
    lines: list[LogLine],
    boots: list[tuple[float, str]],
    skew: float,
    gz: bool = False,
    printk: bool = False,
) -> Path:
    fl = "journal" if printk else flavour(cl, host)
    lines = sorted(lines + _boot_lines(host, boots[1:]), key=lambda ln: ln.ts)
    render = {"rfc3164": _rfc3164, "rfc3339": _rfc3339, "journal": _journal_printk if printk else _journal}[fl]
    path = outdir / f"{host}.{SUFFIX[fl]}"
    text = "".join(render(ln, ln.ts + skew, _boot_of(boots, ln.ts), i) + "\n" for i, ln in enumerate(lines))
    # RFC3164 lines lack the year: readers infer it from the file's mtime (the last write). A gzip
    # header carries that mtime through a git checkout, where the file's own mtime does not survive.
    last = lines[-1].ts + skew if lines else 0.0
    with sink(path, gz, mtime=int(last)) as fh:
        fh.write(text.encode("utf-8"))
    written = Path(f"{path}.gz") if gz else path
    if lines:
        os.utime(written, (last, last))
    return written


def _boot_lines(host: str, boots: list[tuple[float, str]]) -> list[LogLine]:
    return [LogLine(b + 0.001, host, KERNEL, 5) for b, _ in boots]


def _boot_of(boots: list[tuple[float, str]], ts: float) -> tuple[float, str]:
    starts = [b for b, _ in boots]
    return boots[max(0, int(np.searchsorted(starts, ts, side="right")) - 1)]


def _stamp(ts: float) -> datetime:
    return datetime.fromtimestamp(round(ts, 6), UTC)


def _rfc3164(ln: LogLine, ts: float, boot: tuple[float, str], _i: int) -> str:
    d = _stamp(ts)
    head = f"{d:%b} {d.day:2d} {d:%H:%M:%S} {ln.host} {ln.ident}: "
    if ln.ident == "kernel":
        return f"{head}[{ts - boot[0]:12.6f}] {ln.text}"
    return head + ln.text


def _rfc3339(ln: LogLine, ts: float, _boot: tuple[float, str], _i: int) -> str:
    return f"{_stamp(ts).isoformat(timespec='microseconds')} {ln.host} {ln.ident}: {ln.text}"


def _journal(ln: LogLine, ts: float, boot: tuple[float, str], i: int) -> str:
    us = int(round(ts * 1e6))
    mono = int(round((ts - boot[0]) * 1e6))
    rec = {
        "__CURSOR": f"s={boot[1]};i={i + 1:x};b={boot[1]};m={mono:x};t={us:x};x={i:016x}",
        "__REALTIME_TIMESTAMP": str(us),
        "__MONOTONIC_TIMESTAMP": str(mono),
        "_BOOT_ID": boot[1],
        "PRIORITY": str(ln.priority),
        "_HOSTNAME": ln.host,
    }
    if ln.ident == "kernel":
        rec |= {
            "_TRANSPORT": "kernel",
            "SYSLOG_FACILITY": "0",
            "SYSLOG_IDENTIFIER": "kernel",
            "_SOURCE_MONOTONIC_TIMESTAMP": str(mono),
        }
    else:
        name, pid = ln.ident.rstrip("]").split("[")
        rec |= {
            "_TRANSPORT": "syslog",
            "SYSLOG_FACILITY": "9",
            "SYSLOG_IDENTIFIER": name,
            "_PID": pid,
            "SYSLOG_PID": pid,
        }
    rec["MESSAGE"] = ln.text
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)


def _journal_printk(ln: LogLine, ts: float, boot: tuple[float, str], i: int) -> str:
    """A kernel line forwarded through the syslog socket: _TRANSPORT=syslog, the printk stamp in MESSAGE."""
    if ln.ident != "kernel":
        return _journal(ln, ts, boot, i)
    rec = json.loads(_journal(ln, ts, boot, i))
    rec |= {"_TRANSPORT": "syslog", "MESSAGE": f"[{ts - boot[0]:12.6f}] {ln.text}"}
    del rec["_SOURCE_MONOTONIC_TIMESTAMP"]
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
