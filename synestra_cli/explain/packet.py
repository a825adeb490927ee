"""`synestra packet`: what a vendor's RMA desk or a fabric team asks for, in one deterministic tar.gz.

The packet holds one explanation (a job, or one of its checkpoints), the same document every other
view renders: the ticket (Markdown), the picture (PNG), the explanation (JSON), the evidence lines each
with a few lines of context from the file it cites, the asset identities the causes name (GPU UUID,
serial, PCI id; a cable's two ends; a rack's hosts), the store's sha256 of every file cited, and what
was left out and why (README.txt). Nothing from outside the job: its evidence lines are its chains'
own, whose signals come from the job's hosts (and the switch ports cabled to them) inside its read
windows; the files it does not cite are listed by count, not included.

Deterministic: the same store and code give the same bytes (members sorted, one fixed mtime, no owner
names, gzip without a time stamp), so a re-run can be compared with `cmp` or hashed.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from typing import Any

import duckdb

from synestra_cli.explain.explanation import CheckpointExplanation, FailureExplanation, JobExplanation
from synestra_cli.shown import plural

SCHEMA = "synestra.packet/1"
CONTEXT_LINES = 3  # before and after each cited line
MAX_LINE = 2000  # a context line longer than this is cut (a log line is rarely longer; a binary file is)
SOURCES_SQL = """
SELECT path, sha256, format, bytes, rows, first_ts, last_ts, hosts FROM sources
WHERE path IN (SELECT unnest(?::VARCHAR[])) ORDER BY path
"""
COUNT_SQL = "SELECT count(*) FROM sources"
# The files whose samples a metric link was read from: its series (host, entity, metric) from the first
# sample of its baseline to the end of its window. A DCGM or switch export is what the RMA desk or the
# fabric team checks the figures against, so its sha256 belongs beside the cited log files'.
METRIC_SOURCES_SQL = """
WITH w AS (
    SELECT unnest(?::VARCHAR[]) AS host, unnest(?::VARCHAR[]) AS entity, unnest(?::VARCHAR[]) AS metric,
           unnest(?::TIMESTAMP[]) AS t0, unnest(?::TIMESTAMP[]) AS t1
)
SELECT DISTINCT s.path FROM w
JOIN metrics m ON m.host = w.host AND m.entity = w.entity AND m.metric = w.metric AND m.ts BETWEEN w.t0 AND w.t1
JOIN sources s ON s.source_id = m.source_id
ORDER BY s.path
"""
# 2000-01-01T00:00:00Z: the members' mtime, whatever day the packet is made.
FIXED_MTIME = 946684800


def _explained(job: JobExplanation, checkpoint: int | None) -> list[CheckpointExplanation | FailureExplanation]:
    cps: list[CheckpointExplanation | FailureExplanation] = [
        c for c in job.checkpoints if c.cause and (checkpoint is None or c.iteration == checkpoint)
    ]
    return cps + ([*job.failures] if checkpoint is None else [])


def cited_lines(job: JobExplanation, checkpoint: int | None = None) -> list[dict[str, Any]]:
    """Every log line the explanation cites (its chains' and alternatives'), once, by file and line."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    for c in _explained(job, checkpoint):
        links = list(c.chain) + [lk for alt in c.alternatives for lk in alt.evidence]
        for lk in links:
            ev = lk.evidence
            if ev.get("type") == "log" and ev.get("source") and isinstance(ev.get("line"), int):
                key = (str(ev["source"]), int(ev["line"]))
                seen.setdefault(key, {"source": key[0], "line": key[1], "time": lk.time, "signal": lk.signal})
    return [seen[k] for k in sorted(seen)]


def metric_series(job: JobExplanation, checkpoint: int | None = None) -> list[tuple[str, str, str, Any, Any]]:
    """Each metric link's series and the span its figures were read over (baseline's first sample, or
    the window's start, to the window's end), once."""
    seen: set[tuple[str, str, str, Any, Any]] = set()
    for c in _explained(job, checkpoint):
        for lk in list(c.chain) + [lk for alt in c.alternatives for lk in alt.evidence]:
            ev, win = lk.evidence, lk.evidence.get("window") or {}
            if ev.get("type") != "metric" or not (lk.host and lk.entity and ev.get("metric") and win.get("end")):
                continue
            start = min(x for x in ((ev.get("baseline") or {}).get("from"), win.get("start")) if x is not None)
            seen.add((lk.host, lk.entity, ev["metric"], start, win["end"]))
    return sorted(seen, key=str)


def metric_sources(conn: duckdb.DuckDBPyConnection, series: list[tuple[str, str, str, Any, Any]]) -> list[str]:
    """The files the metric links' samples came from (METRIC_SOURCES_SQL)."""
    if not series:
        return []
    cols = [list(x) for x in zip(*series, strict=True)]
    return [r[0] for r in conn.execute(METRIC_SOURCES_SQL, cols).fetchall()]


def _read_lines(path: str, first: int, last: int) -> list[str] | None:
    """Lines first..last (1-based) of a file, gzip read through; None when it cannot be read."""
    try:
        raw = gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")  # noqa: SIM115
        with raw as f:
            out = []
            for n, line in enumerate(f, 1):
                if n > last:
                    break
                if n >= first:
                    out.append(line[:MAX_LINE].decode("utf-8", "replace").rstrip("\r\n"))
            return out
    except OSError:
        return None


def evidence_text(lines: list[dict[str, Any]], shown: Any = str) -> tuple[str, list[str]]:
    """The evidence lines with CONTEXT_LINES around each (`>` marks the cited one); and the files that
    could not be read (moved since the ingest), which the README lists."""
    out, missing = [], []
    for item in lines:
        lo = max(1, item["line"] - CONTEXT_LINES)
        got = _read_lines(item["source"], lo, item["line"] + CONTEXT_LINES)
        out.append(f"== {shown(item['source'])}:{item['line']}  {item['signal']}")
        if got is None:
            missing.append(item["source"])
            out += ["   (the file cannot be read here any more: the line is cited, not copied)", ""]
            continue
        out += [f"{'>' if n == item['line'] else ' '} {n:>7}  {text}" for n, text in enumerate(got, lo)]
        out.append("")
    return "\n".join(out), sorted(set(missing))


def assets(job: JobExplanation, checkpoint: int | None = None) -> list[dict[str, Any]]:
    """The asset identities the causes and alternatives name (explain/assets.py), each once."""
    seen: dict[str, dict[str, Any]] = {}
    for c in _explained(job, checkpoint):
        for cause, role in [(c.cause, "cause"), *((a, "alternative") for a in c.alternatives)]:
            for a in cause.assets if cause else []:
                key = json.dumps(a, sort_keys=True, default=str)
                seen.setdefault(key, {"role": role, "category": cause.category if cause else None, **a})
    return [seen[k] for k in sorted(seen)]


def sources(conn: duckdb.DuckDBPyConnection, paths: list[str]) -> tuple[list[dict[str, Any]], int]:
    """The store's record (sha256, format, span) of each cited file; and how many sources the store holds."""
    cols = ["path", "sha256", "format", "bytes", "rows", "first_ts", "last_ts", "hosts"]
    rows = [dict(zip(cols, r, strict=True)) for r in conn.execute(SOURCES_SQL, [paths]).fetchall()]
    total = conn.execute(COUNT_SQL).fetchone()
    return rows, int(total[0]) if total else 0


def readme(
    job: JobExplanation, checkpoint: int | None, n_lines: int, cited: int, total: int, missing: list[str]
) -> str:
    what = f"job {job.job}" + (f", checkpoint at iteration {checkpoint}" if checkpoint is not None else "")
    out = [
        f"Synestra packet ({SCHEMA}) for {what}: hosts {', '.join(job.hosts)}.",
        "",
        "ticket.md       the ticket: verdict, action, assets, chain with file:line, alternatives, cost",
        "timeline.png    the picture: headline, where the time went, events, attempts, key signals (UTC)",
        "explain.json    the explanation (schema synestra.explain/2, docs/explain.md)",
        f"evidence.txt    the {plural(n_lines, 'cited log line')}, each with {CONTEXT_LINES} lines of context "
        "('>' marks it)",
        "assets.json     the identities the causes name: GPU UUID, serial, PCI id; cable ends; rack hosts",
        "sources.json    each cited file (log lines, and the metric samples the chains' figures come from) as "
        "the store recorded it: sha256, format, rows, time span, hosts",
        "",
        "Left out, and why:",
        f"- {total - cited} of the store's {plural(total, 'source file')}: not cited by this explanation (other hosts, "
        "other times, or nothing anomalous in them)",
        "- metric samples: the chains carry each signal's baseline, values, window and sample count "
        "(explain.json); the raw series stay in the store (`synestra sql`)",
        "- routine checkpoints: counted in the ticket, not explained",
    ]
    out += [f"- {p}: cited, but no longer readable where it was ingested (not copied)" for p in missing]
    return "\n".join(out) + "\n"


def tar_gz(files: dict[str, bytes], top: str) -> bytes:
    """A deterministic tar.gz of files under the folder `top`: sorted members, FIXED_MTIME, root-owned
    without names, mode 0644, gzip with mtime 0."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(files):
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size, info.mtime, info.mode = len(files[name]), FIXED_MTIME, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(files[name]))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    return out.getvalue()
