"""Slurm `sacct`: jobs, attempts (requeues) and the nodes they ran on.

Two layouts: `-P` / `-p` / `--delimiter=TAB` (delimited), and the default fixed-width one people paste most (a
header, a line of dashes whose runs give each column's width, values padded with blanks; a value too wide for
its column is cut and ends with `+`). `sacct -n` prints no header: without it the columns cannot be known, so
it is refused with a message to re-run with -P and a header. The header names the columns (any order, any
subset; JobID required). Allocation rows
(`123`, `123_4`, `123_[5-9]`, `123+0`) become jobs and attempts; step rows (`.batch`, `.extern`,
`.0`) are kept in `sacct_rows` only: a step is not an attempt. `sacct -D` prints one allocation row
per attempt of a requeued job: they are numbered 1..n in Start order. Times carry no zone: they are
read in `--timezone`. Het-job components (`123+0`, `123+1`) are one job `123` whose attempts span
all components. The heavy lifting is SQL over the Arrow lines; Python only expands each distinct
NodeList once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.base import Format, LoadContext, LoadResult
from synestra_cli.formats.reading import decode, read_head
from synestra_cli.hostlist import HostlistError, expand
from synestra_cli.store.sql import drop_temp, registered, scalar, sql_file

MAX_ELAPSED_S = 2**31

# Header names (lower case) -> the parameter that carries their 1-based column index (0 = absent).
FIELDS = {
    "jobid": "c_jobid",
    "jobidraw": "c_jobidraw",
    "jobname": "c_name",
    "user": "c_user",
    "state": "c_state",
    "exitcode": "c_exit",
    "start": "c_start",
    "end": "c_end",
    "elapsed": "c_elapsed",
    "nodelist": "c_nodelist",
    "alloctres": "c_alloctres",
    "allocgres": "c_allocgres",
    "reqtres": "c_reqtres",
    "cluster": "c_cluster",
}
KNOWN_OTHERS = {
    "partition",
    "account",
    "maxrss",
    "alloccpus",
    "nnodes",
    "submit",
    "timelimit",
    "cputime",
    "reqmem",
    "qos",
    "workdir",
    "reason",
    "priority",
    "maxvmsize",
    "averss",
}

# Elapsed `[D-]HH:MM:SS` (or `MM:SS.fff`) -> seconds (DOUBLE: 24,856 days overflow an INTEGER; an Elapsed of
# MAX_ELAPSED_S or more, 68 years, rejects its row); AllocTRES/ReqTRES `gres/gpu=N` (else the sum of the
# typed `gres/gpu:a100=N` entries) -> GPUs.
MACROS_SQL = [
    r"""CREATE OR REPLACE TEMP MACRO _sacct_seconds(t) AS (
        WITH e AS (SELECT regexp_extract(t, '^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$',
                                         ['d', 'h', 'm', 's']) AS x)
        SELECT coalesce(try_cast(nullif(x.d, '') AS DOUBLE), 0) * 86400
             + coalesce(try_cast(nullif(x.h, '') AS DOUBLE), 0) * 3600
             + try_cast(nullif(x.m, '') AS DOUBLE) * 60 + try_cast(nullif(x.s, '') AS DOUBLE) FROM e)""",
    r"""CREATE OR REPLACE TEMP MACRO _sacct_tres_gpus(t) AS coalesce(
        try_cast(regexp_extract(t, '(?:^|,)gres/gpu=(\d+)', 1) AS INTEGER),
        list_sum(list_transform(regexp_extract_all(t, '(?:^|,)gres/gpu:[^=,]+=(\d+)', 1),
                                lambda x: x::INTEGER)))""",
]

CREATE_TMP_SQL = """
CREATE OR REPLACE TEMP TABLE _sacct_parsed (
    lineno BIGINT, line VARCHAR, reason VARCHAR, job_id VARCHAR, het INTEGER, step VARCHAR,
    job_name VARCHAR, user_name VARCHAR, state VARCHAR, state_detail VARCHAR, exit_code VARCHAR,
    start_ts TIMESTAMP, end_ts TIMESTAMP, elapsed_s DOUBLE, nodelist VARCHAR, gpus INTEGER,
    allocated BOOLEAN)
"""

# One batch of lines -> typed rows; a row that cannot be read gets a reason instead of being dropped.
PARSE_SQL = sql_file(__package__, "sacct_parse.sql")  # the layout comes in as parameters (_params)

DISTINCT_NODELISTS_SQL = """
SELECT DISTINCT nodelist FROM _sacct_parsed WHERE reason IS NULL AND nodelist IS NOT NULL
"""
CREATE_NODES_SQL = "CREATE OR REPLACE TEMP TABLE _sacct_nodes (nodelist VARCHAR, nodes VARCHAR[])"

# Allocation rows that ran get attempt numbers per (job, het component) in Start order; a step row
# belongs to the allocation row printed before it.
NUMBER_SQL = """
CREATE OR REPLACE TEMP TABLE _sacct_numbered AS
WITH good AS (
    SELECT p.*, n.nodes FROM _sacct_parsed p LEFT JOIN _sacct_nodes n USING (nodelist) WHERE reason IS NULL
), alloc AS (
    SELECT lineno, row_number() OVER (PARTITION BY job_id, het ORDER BY start_ts NULLS LAST, lineno) AS n
    FROM good WHERE step IS NULL AND allocated
)
SELECT g.*, last_value(a.n IGNORE NULLS) OVER (PARTITION BY g.job_id, g.het ORDER BY g.lineno
                                               ROWS UNBOUNDED PRECEDING)::INTEGER AS attempt
FROM good g LEFT JOIN alloc a ON a.lineno = g.lineno AND g.step IS NULL
"""

INSERT_ROWS_SQL = """
INSERT INTO sacct_rows (job_id, het, step, attempt, job_name, user_name, state, state_detail, exit_code,
                        start_ts, end_ts, elapsed_s, nodelist, nodes, gpus, source_id, line)
SELECT job_id, het, step, CASE WHEN step IS NULL AND NOT allocated THEN NULL ELSE attempt END, job_name,
       user_name, state, state_detail, exit_code, start_ts, end_ts, elapsed_s, nodelist, nodes, gpus,
       $sid, lineno
FROM _sacct_numbered ORDER BY job_id, lineno
"""

INSERT_ATTEMPTS_SQL = """
INSERT INTO attempts (job_id, attempt, start_ts, end_ts, state, exit_code, nodes, source_id)
SELECT job_id, attempt, min(start_ts), max(end_ts),
       first(state ORDER BY het NULLS FIRST), first(exit_code ORDER BY het NULLS FIRST),
       CASE WHEN count(nodes) > 0 THEN list_sort(list_distinct(flatten(list(nodes)))) END, $sid
FROM _sacct_numbered WHERE step IS NULL AND allocated
GROUP BY job_id, attempt ORDER BY job_id, attempt
"""

# The job's state is that of its latest allocation row (a requeued job waiting again is PENDING).
INSERT_JOBS_SQL = """
INSERT INTO jobs (job_id, name, user_name, gpus, state, source_id)
WITH last_row AS (
    SELECT job_id, het, arg_max(gpus, (coalesce(start_ts, TIMESTAMP '9999-12-31'), lineno)) AS gpus,
           arg_max(state, (coalesce(start_ts, TIMESTAMP '9999-12-31'), lineno)) AS state,
           first(job_name ORDER BY lineno) FILTER (WHERE job_name IS NOT NULL) AS job_name,
           first(user_name ORDER BY lineno) FILTER (WHERE user_name IS NOT NULL) AS user_name
    FROM _sacct_numbered WHERE step IS NULL GROUP BY job_id, het
)
SELECT job_id, first(job_name ORDER BY het NULLS FIRST), first(user_name ORDER BY het NULLS FIRST),
       sum(gpus)::INTEGER, first(state ORDER BY het NULLS FIRST), $sid
FROM last_row GROUP BY job_id ORDER BY job_id
"""

INSERT_JOB_NODES_SQL = """
INSERT INTO job_nodes (job_id, attempt, host, source_id)
SELECT job_id, attempt, unnest(nodes), $sid FROM attempts WHERE source_id = $sid ORDER BY job_id, attempt
"""

REJECT_COUNT_SQL = "SELECT count(*) FROM _sacct_parsed WHERE reason IS NOT NULL"
REJECT_SAMPLES_SQL = "SELECT lineno, reason, line FROM _sacct_parsed WHERE reason IS NOT NULL ORDER BY lineno LIMIT 20"

COUNT_SQL = """
SELECT (SELECT count(*) FROM sacct_rows WHERE source_id = $sid)
     + (SELECT count(*) FROM jobs WHERE source_id = $sid)
     + (SELECT count(*) FROM attempts WHERE source_id = $sid)
     + (SELECT count(*) FROM job_nodes WHERE source_id = $sid)
"""

TEMP_TABLES = ("_sacct_parsed", "_sacct_nodes", "_sacct_numbered")


# Columns that cannot be read once sacct has cut them (`+`): an identity, a host list, a time.
CUT_MATTERS = ("jobid", "jobidraw", "nodelist", "start", "end", "elapsed", "alloctres", "reqtres", "allocgres")
DASHES = re.compile(r"^-+(?: +-+)* *$")
# A `sacct -n` row: a job id, then a delimiter or blanks; and some line of the head names a job state.
HEADERLESS_ROW = re.compile(r"^ *\d+(?:_\d+|_\[[\d,%\-]+\])?(?:\+\d+)?(?:\.\w+)?(?:\||\t| +)")
STATES = re.compile(
    r"\b(?:COMPLETED|FAILED|RUNNING|PENDING|CANCELLED\+?|TIMEOUT|OUT_OF_ME\w*|NODE_FAIL|PREEMPTED|"
    r"REQUEUED|BOOT_FAIL|DEADLINE|SUSPENDED)\b"
)
HEADERLESS_MESSAGE = (
    "looks like `sacct -n` (--noheader) output: without its header the columns cannot be known; "
    "re-run sacct with -P (--parsable2) and without -n, e.g. "
    "sacct -P -D --format=JobID,JobName,User,State,ExitCode,Start,End,Elapsed,NodeList,AllocTRES"
)


@dataclass(frozen=True)
class Layout:
    header_line: int  # 1-based line of the header (fixed width: of the dashes under it)
    header: str
    names: list[str]  # lower-cased column names
    delim: str | None = None  # delimited: `|` or TAB
    trailing: bool = False  # `-p`: rows end with the delimiter
    spans: tuple[tuple[int, int], ...] = ()  # fixed width: (1-based start, width) of each column


def _layout(head: str) -> Layout | None:
    """The header of the head (its first non-blank line) and how rows are cut, or None."""
    lines = head.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return None
    header = lines[first].rstrip("\r")
    dashes = lines[first + 1].rstrip("\r") if first + 1 < len(lines) else ""
    if DASHES.match(dashes):
        spans = tuple((m.start() + 1, m.end() - m.start()) for m in re.finditer(r"-+", dashes))
        names = [header[s - 1 : s - 1 + w].strip().lower() for s, w in spans]
        return Layout(first + 2, header, names, spans=spans)
    if "|" not in header and "\t" not in header:
        return None
    delim = "|" if "|" in header else "\t"
    trailing = header.endswith(delim)
    names = [n.strip().lower() for n in (header[:-1] if trailing else header).split(delim)]
    return Layout(first + 1, header, names, delim=delim, trailing=trailing)


def _headerless(head: str) -> bool:
    lines = [ln for ln in head.splitlines()[:50] if ln.strip()]
    return bool(lines) and all(HEADERLESS_ROW.match(ln) for ln in lines) and bool(STATES.search(head))


def sniff(head: str) -> float:
    layout = _layout(head)
    if layout is None or not set(layout.names) & {"jobid", "jobidraw"}:
        return 0.6 if _headerless(head) else 0.0  # recognised, to be refused with a clear message
    return 0.95 if set(layout.names) & (set(FIELDS) | KNOWN_OTHERS) - {"jobid", "jobidraw"} else 0.5


def _params(layout: Layout, tz: str) -> dict[str, object]:
    index = {n: i for i, n in reversed(list(enumerate(layout.names, start=1)))}  # repeated name: its first column
    params: dict[str, object] = {param: index.get(name, 0) for name, param in FIELDS.items()}
    params.update(
        header_line=layout.header_line,
        header=layout.header,
        tz=tz,
        ncols=len(layout.names),
        names=layout.names,
        max_elapsed=MAX_ELAPSED_S,
    )
    fixed = layout.delim is None
    params.update(
        fixed=fixed,
        starts=[start for start, _ in layout.spans] if fixed else [],
        widths=[width for _, width in layout.spans] if fixed else [],
        cut_matters=[name in CUT_MATTERS for name in layout.names] if fixed else [],
        trailing=bool(layout.trailing) if not fixed else False,
        delim=layout.delim or "|",
    )
    return params


def _expand_nodelists(ctx: LoadContext) -> None:
    """Each distinct NodeList expanded once; an unreadable one rejects its rows."""
    lists = [r[0] for r in ctx.conn.execute(DISTINCT_NODELISTS_SQL).fetchall()]
    good, bad = {}, []
    for text in lists:
        try:
            good[text] = expand(text)
        except HostlistError:
            bad.append(text)
    ctx.conn.execute(CREATE_NODES_SQL)
    table = pa.table(
        {"nodelist": pa.array(list(good), pa.string()), "nodes": pa.array(list(good.values()), pa.list_(pa.string()))}
    )
    with registered(ctx.conn, "sacct_nodes_arrow", table):
        ctx.conn.execute("INSERT INTO _sacct_nodes (nodelist, nodes) SELECT nodelist, nodes FROM sacct_nodes_arrow")
    ctx.conn.execute(
        "UPDATE _sacct_parsed SET reason = 'unreadable NodeList ' || nodelist "
        "WHERE reason IS NULL AND list_contains(?, nodelist)",
        [bad],
    )


def _parse_batches(ctx: LoadContext, layout: Layout) -> None:
    for sql in MACROS_SQL:
        ctx.conn.execute(sql)
    ctx.conn.execute(CREATE_TMP_SQL)
    params = _params(layout, ctx.options.timezone)
    for batch in ctx.line_batches():
        sacct_lines = batch  # noqa: F841 - DuckDB's replacement scan; not register (kept until COMMIT)
        ctx.conn.execute(PARSE_SQL, params)


def load(ctx: LoadContext) -> LoadResult:
    head = decode(read_head(ctx.path))
    layout = _layout(head)
    if layout is None or not set(layout.names) & {"jobid", "jobidraw"}:
        if _headerless(head):
            raise InputError(f"{ctx.display}: {HEADERLESS_MESSAGE}")
        raise InputError(f"{ctx.display}: no sacct header line with a JobID column (run sacct with -P and without -n)")
    result = LoadResult()
    _parse_batches(ctx, layout)
    _expand_nodelists(ctx)
    ctx.conn.execute(NUMBER_SQL)
    sid = {"sid": ctx.source_id}
    for sql in (INSERT_ROWS_SQL, INSERT_ATTEMPTS_SQL, INSERT_JOBS_SQL, INSERT_JOB_NODES_SQL):
        ctx.conn.execute(sql, sid)
    result.rejects_from(ctx.conn, REJECT_SAMPLES_SQL, REJECT_COUNT_SQL)
    result.rows = scalar(ctx.conn, COUNT_SQL, sid)
    drop_temp(ctx.conn, TEMP_TABLES)
    return result


FORMAT = Format(
    "sacct",
    "Slurm sacct --parsable2 / -p / TAB-delimited output with a header (jobs, attempts, nodes)",
    sniff,
    load,
    writes=frozenset({"sacct_rows", "jobs", "attempts", "job_nodes"}),
    top=0.95,
    priority=110,
)
