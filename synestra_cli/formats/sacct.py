"""Slurm `sacct -P` / `-p` / `--delimiter=TAB`: jobs, attempts (requeues) and the nodes they ran on.

The header names the columns (any order, any subset; JobID required). Allocation rows
(`123`, `123_4`, `123_[5-9]`, `123+0`) become jobs and attempts; step rows (`.batch`, `.extern`,
`.0`) are kept in `sacct_rows` only: a step is not an attempt. `sacct -D` prints one allocation row
per attempt of a requeued job: they are numbered 1..n in Start order. Times carry no zone: they are
read in `--timezone`. Het-job components (`123+0`, `123+1`) are one job `123` whose attempts span
all components. The heavy lifting is SQL over the Arrow lines; Python only expands each distinct
NodeList once.
"""

from __future__ import annotations

import pyarrow as pa

from synestra_cli.errors import InputError
from synestra_cli.formats.base import LoadContext, LoadResult, decode, read_head
from synestra_cli.hostlist import HostlistError, expand

NAME = "sacct"
MAX_ELAPSED_S = 2**31
DESCRIPTION = "Slurm sacct --parsable2 / -p / TAB-delimited output with a header (jobs, attempts, nodes)"

# Header names (lower case) -> the parameter that carries their 1-based column index (0 = absent).
FIELDS = {
    "jobid": "c_jobid", "jobidraw": "c_jobidraw", "jobname": "c_name", "user": "c_user", "state": "c_state",
    "exitcode": "c_exit", "start": "c_start", "end": "c_end", "elapsed": "c_elapsed",
    "nodelist": "c_nodelist", "alloctres": "c_alloctres", "allocgres": "c_allocgres", "reqtres": "c_reqtres",
}
KNOWN_OTHERS = {"partition", "account", "maxrss", "alloccpus", "nnodes", "submit", "timelimit", "cputime",
                "reqmem", "qos", "cluster", "workdir", "reason", "priority", "maxvmsize", "averss"}

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
PARSE_SQL = r"""
INSERT INTO _sacct_parsed
WITH f AS (
    SELECT lineno, line, string_split(CASE WHEN $trailing AND suffix(line, $delim)
                                           THEN substr(line, 1, length(line) - 1) ELSE line END, $delim) AS p
    FROM sacct_lines WHERE lineno > $header_line AND trim(line) <> '' AND line <> $header
), v AS (
    SELECT lineno, line, len(p) AS nf, trim(coalesce(p[$c_jobid], p[$c_jobidraw])) AS jobid,
           regexp_extract(trim(coalesce(p[$c_jobid], p[$c_jobidraw])),
                          '^(\d+)(?:_(\d+|\[[0-9,%\-]+\]))?(?:\+(\d+))?(?:\.(\w+))?$',
                          ['base', 'task', 'het', 'step']) AS id,
           nullif(p[$c_name], '') AS job_name, nullif(p[$c_user], '') AS user_name,
           nullif(trim(p[$c_state]), '') AS state_text, nullif(p[$c_exit], '') AS exit_code,
           CASE WHEN p[$c_start] NOT IN ('', 'Unknown', 'None') THEN p[$c_start] END AS start_text,
           CASE WHEN p[$c_end] NOT IN ('', 'Unknown', 'None') THEN p[$c_end] END AS end_text,
           CASE WHEN p[$c_elapsed] NOT IN ('', 'INVALID', 'Unknown') THEN p[$c_elapsed] END AS elapsed_text,
           nullif(trim(p[$c_nodelist]), '') AS nodelist, p[$c_alloctres] AS alloctres,
           p[$c_allocgres] AS allocgres, p[$c_reqtres] AS reqtres
    FROM f
), t0 AS (
    SELECT *, split_part(state_text, ' ', 1) AS state,
           to_utc(try_strptime(start_text, '%Y-%m-%dT%H:%M:%S'), $tz) AS start_utc,
           to_utc(try_strptime(end_text, '%Y-%m-%dT%H:%M:%S'), $tz) AS end_utc,
           _sacct_seconds(elapsed_text) AS elapsed_s,
           coalesce(_sacct_tres_gpus(alloctres),
                    try_cast(regexp_extract(allocgres, '(?:^|,)gpu(?::[^:,()]+)?:(\d+)', 1) AS INTEGER),
                    _sacct_tres_gpus(reqtres), CASE WHEN alloctres <> '' THEN 0 END) AS gpus
    FROM v
), t AS (
    SELECT * REPLACE (CASE WHEN elapsed_s < $max_elapsed THEN elapsed_s END AS elapsed_s),
           elapsed_s >= $max_elapsed AS elapsed_absurd
    FROM t0
)
SELECT lineno, line,
       CASE WHEN nf <> $ncols THEN printf('expected %d fields, found %d', $ncols, nf)
            WHEN id.base = '' THEN 'unreadable JobID ' || coalesce(jobid, '')
            WHEN start_text IS NOT NULL AND start_utc IS NULL THEN 'unreadable Start time ' || start_text
            WHEN end_text IS NOT NULL AND end_utc IS NULL THEN 'unreadable End time ' || end_text
            WHEN elapsed_absurd THEN 'Elapsed out of range (68 years or more) ' || elapsed_text
            WHEN elapsed_text IS NOT NULL AND elapsed_s IS NULL THEN 'unreadable Elapsed ' || elapsed_text
       END,
       id.base || CASE WHEN id.task <> '' THEN '_' || id.task ELSE '' END,
       try_cast(nullif(id.het, '') AS INTEGER),
       nullif(id.step, ''), job_name, user_name, state,
       nullif(trim(substr(state_text, length(state) + 1)), ''), exit_code,
       coalesce(start_utc, end_utc - to_microseconds(CAST(elapsed_s * 1e6 AS BIGINT))),
       coalesce(end_utc, CASE WHEN state NOT IN ('RUNNING', 'PENDING', 'SUSPENDED', 'REQUEUED')
                              THEN start_utc + to_microseconds(CAST(elapsed_s * 1e6 AS BIGINT)) END),
       elapsed_s, nodelist, gpus,
       -- ran: not pending, Start not explicitly missing, nodes not "None assigned"
       coalesce(state <> 'PENDING', TRUE) AND NOT ($c_start > 0 AND start_utc IS NULL AND end_utc IS NULL)
           AND coalesce(lower(nodelist) <> 'none assigned', TRUE)
FROM t
"""

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
INSERT INTO sacct_rows
SELECT job_id, het, step, CASE WHEN step IS NULL AND NOT allocated THEN NULL ELSE attempt END, job_name,
       user_name, state, state_detail, exit_code, start_ts, end_ts, elapsed_s, nodelist, nodes, gpus,
       $sid, lineno
FROM _sacct_numbered ORDER BY job_id, lineno
"""

INSERT_ATTEMPTS_SQL = """
INSERT INTO attempts
SELECT job_id, attempt, min(start_ts), max(end_ts),
       first(state ORDER BY het NULLS FIRST), first(exit_code ORDER BY het NULLS FIRST),
       CASE WHEN count(nodes) > 0 THEN list_sort(list_distinct(flatten(list(nodes)))) END, $sid
FROM _sacct_numbered WHERE step IS NULL AND allocated
GROUP BY job_id, attempt ORDER BY job_id, attempt
"""

# The job's state is that of its latest allocation row (a requeued job waiting again is PENDING).
INSERT_JOBS_SQL = """
INSERT INTO jobs
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
INSERT INTO job_nodes
SELECT job_id, attempt, unnest(nodes), $sid FROM attempts WHERE source_id = $sid ORDER BY job_id, attempt
"""

REJECTS_SQL = """
SELECT count(*) FILTER (WHERE reason IS NOT NULL),
       list([lineno::VARCHAR, reason, line] ORDER BY lineno) FILTER (WHERE reason IS NOT NULL)[1:20]
FROM _sacct_parsed
"""

COUNT_SQL = """
SELECT (SELECT count(*) FROM sacct_rows WHERE source_id = $sid)
     + (SELECT count(*) FROM jobs WHERE source_id = $sid)
     + (SELECT count(*) FROM attempts WHERE source_id = $sid)
     + (SELECT count(*) FROM job_nodes WHERE source_id = $sid)
"""

DROP_TMP_SQL = """
DROP TABLE IF EXISTS _sacct_parsed; DROP TABLE IF EXISTS _sacct_nodes; DROP TABLE IF EXISTS _sacct_numbered
"""


def _header(head: str) -> tuple[int, str] | None:
    """(1-based line number, text) of the first non-blank line."""
    for i, line in enumerate(head.splitlines(), start=1):
        if line.strip():
            return i, line.rstrip("\r")
    return None


def _columns(header: str) -> tuple[str, bool, list[str]]:
    """Delimiter, whether rows end with it (`-p`), and the lower-cased column names."""
    delim = "|" if "|" in header else "\t"
    trailing = header.endswith(delim)
    names = (header[:-1] if trailing else header).split(delim)
    return delim, trailing, [n.strip().lower() for n in names]


def sniff(head: str) -> float:
    found = _header(head)
    if not found or ("|" not in found[1] and "\t" not in found[1]):
        return 0.0
    names = set(_columns(found[1])[2])
    if not names & {"jobid", "jobidraw"}:
        return 0.0
    return 0.95 if names & (set(FIELDS) | KNOWN_OTHERS) - {"jobid", "jobidraw"} else 0.5


def _params(header_line: int, header: str, tz: str) -> dict[str, object]:
    delim, trailing, names = _columns(header)
    index = {n: i for i, n in reversed(list(enumerate(names, start=1)))}  # a repeated name: its first column
    params: dict[str, object] = {param: index.get(name, 0) for name, param in FIELDS.items()}
    params.update(trailing=trailing, delim=delim, header_line=header_line, header=header, tz=tz,
                  ncols=len(names), max_elapsed=MAX_ELAPSED_S)
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
    table = pa.table({"nodelist": pa.array(list(good), pa.string()),
                      "nodes": pa.array(list(good.values()), pa.list_(pa.string()))})
    ctx.conn.register("sacct_nodes_arrow", table)
    ctx.conn.execute("INSERT INTO _sacct_nodes SELECT * FROM sacct_nodes_arrow")
    ctx.conn.unregister("sacct_nodes_arrow")
    ctx.conn.execute("UPDATE _sacct_parsed SET reason = 'unreadable NodeList ' || nodelist "
                     "WHERE reason IS NULL AND list_contains(?, nodelist)", [bad])


def _parse_batches(ctx: LoadContext, params: dict[str, object]) -> None:
    for sql in MACROS_SQL:
        ctx.conn.execute(sql)
    ctx.conn.execute(CREATE_TMP_SQL)
    for batch in ctx.line_batches():
        sacct_lines = batch  # noqa: F841 - DuckDB's replacement scan; not register (kept until COMMIT)
        ctx.conn.execute(PARSE_SQL, params)


def load(ctx: LoadContext) -> LoadResult:
    found = _header(decode(read_head(ctx.path)))
    if not found or not sniff(found[1]):
        raise InputError(f"{ctx.display}: no sacct header line (run sacct with -P and without -n)")
    result = LoadResult()
    _parse_batches(ctx, _params(found[0], found[1], ctx.options.timezone))
    _expand_nodelists(ctx)
    ctx.conn.execute(NUMBER_SQL)
    sid = {"sid": ctx.source_id}
    for sql in (INSERT_ROWS_SQL, INSERT_ATTEMPTS_SQL, INSERT_JOBS_SQL, INSERT_JOB_NODES_SQL):
        ctx.conn.execute(sql, sid)
    n_rejected, samples = ctx.conn.execute(REJECTS_SQL).fetchall()[0]
    for line, reason, text in samples or []:
        result.reject(int(line), reason, text)
    result.rejected = n_rejected
    (result.rows,) = ctx.conn.execute(COUNT_SQL, sid).fetchall()[0]
    ctx.conn.execute(DROP_TMP_SQL)
    return result
