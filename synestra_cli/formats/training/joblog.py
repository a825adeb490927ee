"""Shared machinery of every training-job log format: lines, times, job id, facts (steps 1-2, the lines
and their times, in joblog_lines.py).

A job log is small (MBs), so it is read whole into an Arrow lines table and parsed in DuckDB. Many
logs are parsed together (ingest hands a group of small files to ``load_job_logs``): every table below
carries the file's source id (``sid``), every window is partitioned by it and every join matches it,
so a group costs each statement once, not once per file, and each file gets the rows it gets alone:
1. ``jl_lines``: one row per segment of a line (``\\r`` progress bars glue other messages onto
   one physical line, so a line is split on ``\\r``), with ANSI colour codes and the torchrun
   ``[rankN]:`` prefix removed, and the line's own time (``ts_exact``) when it has one;
2. times for lines without one are taken from the nearest timed line (by line distance) and
   marked ``inferred``; a log without any time keeps ts NULL, precision ``none``;
3. every job-log format (``job_log_format``) contributes facts: SELECTs over ``jl_lines`` inserted
   BY NAME into ``jl_facts`` (steps, checkpoint phases, incidents, banners, rejects). All rules run on
   every job log, so a NeMo log with Megatron checkpoint lines or an MLPerf log with NeMo lines is read
   whole whatever format was sniffed;
4. ``joblog_rows`` cuts the log into attempts and writes the store's rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

from synestra_cli.formats.base import Format, LoadContext, LoadResult, StoreTable, groups_by_text_size
from synestra_cli.formats.scheduler.kube_logs import job_of_container_log
from synestra_cli.formats.training import joblog_rows
from synestra_cli.formats.training.joblog_file import LogFile
from synestra_cli.formats.training.joblog_lines import prepare_lines, year_notes
from synestra_cli.formats.training.joblog_sniff import looks_like_syslog
from synestra_cli.store.sql import temp_table

# What a job log writes (joblog_rows.py): its job, attempts, steps, saves and restores, incidents, the marks
# of its life (initialised, model built, training loop, worker group started), and the full host names its
# failure reports give.
JOB_LOG_TABLES: frozenset[StoreTable] = frozenset(
    {"jobs", "attempts", "steps", "checkpoints", "job_incidents", "job_marks", "host_names"}
)

FACTS_DDL = """
CREATE OR REPLACE TEMP TABLE jl_facts (
    sid BIGINT NOT NULL,  -- the log's source id: every fact names its file
    pos BIGINT, lineno BIGINT, fact VARCHAR,  -- step | save_start | save_sched | save_end | save_block |
                                              -- load_start | load_end | load_block | banner | incident |
                                              -- mark | reject | job
    ts TIMESTAMP, logged_ts TIMESTAMP, ts_precision VARCHAR,
    iteration BIGINT, step_time_s DOUBLE, tflops_per_gpu DOUBLE, tokens_per_s DOUBLE, samples_per_s DOUBLE,
    loss DOUBLE, path VARCHAR, is_async BOOLEAN, blocking_s DOUBLE,
    kind VARCHAR, rank INTEGER, collective VARCHAR, seq BIGINT, timeout_ms BIGINT, ran_for_ms BIGINT,
    message VARCHAR, fields JSON, job_id VARCHAR, job_name VARCHAR, gpus INTEGER,
    loose BOOLEAN  -- a save line in another numbering of the same steps (Lightning's): joblog_rows snaps it
)
"""

# Slurm's own lines name the job too: `StepId=191.batch`, `in step 3495064.0 cgroup`, `*** STEP 3495064.0 ON`,
# `*** JOB 4242 ON gpu-001 CANCELLED AT ...` (slurmstepd, `slurmstepd-<node>` on newer daemons; srun's StepId=).
JOB_ID_SQL = r"""
SELECT sid, coalesce(
    max(nullif(regexp_extract(body, 'SLURM_JOB_ID=(\d+)', 1), '')),
    max(nullif(regexp_extract(body, '\tJob ID: (\d+)\t', 1), '')),
    max(nullif(regexp_extract(body, '(?:^|\s)(?:slurmstepd(?:-\S+)?|srun): (?:error: )?.*'
                                    '(?:StepId=| in step |\*\*\* (?:JOB|STEP) )(\d+)', 1), '')))
FROM jl_lines WHERE contains(body, 'SLURM_JOB_ID=') OR contains(body, 'Job ID: ') OR contains(body, 'slurmstepd')
                 OR contains(body, 'srun: ')
GROUP BY sid
"""

# Slurm's environment echoed by a batch script: the job's name, and a process start per attempt.
SLURM_ENV_SQL = r"""
SELECT sid, pos, lineno, 'job' AS fact, nullif(regexp_extract(body, 'SLURM_JOB_NAME=(\S+)', 1), '') AS job_name
FROM jl_lines WHERE contains(body, 'SLURM_JOB_NAME=')
UNION ALL BY NAME
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE regexp_matches(body, '^\s*SLURM_JOB_ID=\d+')
"""

GROUP_TEXT_BYTES = 8 << 20

FILE_JOB_RE = re.compile(r"^(?:slurm-)?(\d+(?:_\d+)?)(?:\.log|\.out|\.txt)?$")


def job_id_from_name(path: Path) -> str | None:
    """`<jobid>.log`, `slurm-<jobid>.out`, `slurm-<jobid>_<task>.out` (array task kept); a kubelet container log
    `.../<namespace>_<pod>_<uid>/<container>/N.log`: its job's `namespace/name` (kube_logs.py)."""
    kube = job_of_container_log(path)
    if kube:
        return kube
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    m = FILE_JOB_RE.match(name)
    return m.group(1) if m else None


def resolve_job_ids(conn: duckdb.DuckDBPyConnection, files: Sequence[LogFile]) -> None:
    """Each file's job (jl_files.job): content first (the log knows best), then --job, then the file
    name, then the file stem."""
    found = dict(conn.execute(JOB_ID_SQL).fetchall())
    jobs = []
    for f in files:
        ctx = f.ctx
        named = ctx.user_path
        job = found.get(f.sid) or ctx.options.job_id or job_id_from_name(named)
        if not job:
            job = named.stem if named.suffix != ".gz" else Path(named.stem).stem
            f.result.notes.append(f"{ctx.display}: no job id in the log or its name; using {job!r} (give --job ID)")
        jobs.append(job)
    temp_table(conn, "jl_jobs", {"sid": ("BIGINT", [f.sid for f in files]), "job": ("VARCHAR", jobs)})


def collect_facts(conn: duckdb.DuckDBPyConnection, tz: str) -> None:
    from synestra_cli.formats import job_log_formats  # the registry imports every format, this one too

    conn.execute(FACTS_DDL)
    conn.execute(f"INSERT INTO jl_facts BY NAME {SLURM_ENV_SQL}")
    for fmt in job_log_formats():
        for sql in fmt.prepare:
            conn.execute(sql)
        for sql in fmt.facts:
            params = {"tz": tz} if "$tz" in sql else None  # zone-less dates in the text
            conn.execute(f"INSERT INTO jl_facts BY NAME {sql}", params)


def load_job_log(ctx: LoadContext) -> LoadResult:
    """The `load` of every job-log format."""
    return load_job_logs([ctx])[0]


def load_job_logs(ctxs: list[LoadContext]) -> list[LoadResult]:
    """The `load_group` of every job-log format: the logs (of any job-log formats) parsed together, each
    statement once over all of them; one result per context, in order. A file that cannot be read or
    parsed fails the group (ingest then loads its files one by one, and that one fails alone)."""

    files = [LogFile(ctx) for ctx in ctxs]
    conn = ctxs[0].conn
    for group in groups_by_text_size(files, GROUP_TEXT_BYTES):
        prepare_lines(conn, group)
        year_notes(conn, group)
        collect_facts(conn, group[0].ctx.options.timezone)
        resolve_job_ids(conn, group)
        joblog_rows.write_rows(conn, group)
    return [f.result for f in files]


def job_log_format(
    name: str,
    description: str,
    sniff: Callable[[str], float],
    facts: Sequence[str],
    prepare: Sequence[str] = (),
    inside_syslog: bool = False,
    top: float = 1.0,
    *,
    priority: int,
) -> Format:
    """A training-job log format: loaded by load_job_log with the facts of every job-log format. A file
    the syslog parser reads (a syslog envelope on most lines) is not one, unless inside_syslog (MLPerf:
    its `:::MLLOG` marker is sniffed behind any prefix, as it always was)."""

    def guarded(head: str) -> float:
        return 0.0 if not inside_syslog and looks_like_syslog(head) else sniff(head)

    return Format(
        name,
        description,
        guarded,
        load_job_log,
        JOB_LOG_TABLES,
        facts=tuple(facts),
        prepare=tuple(prepare),
        load_group=load_job_logs,
        top=top,
        priority=priority,
    )
