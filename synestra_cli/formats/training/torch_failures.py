"""PyTorch / NCCL / Slurm failure lines, shared by every job-log format (log-formats.md D.6, D.7).

Also the `torch_log` format: a log that carries only such lines and no framework output.

- ProcessGroupNCCL watchdog, three generations (torch 1.x `[E ProcessGroupNCCL.cpp:737] [Rank 1]`, no time;
  2.x glog `[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0]` with no year; 2025
  `[PG ID 0 PG GUID 0(default_pg) Rank 1]`). The watchdog fires Timeout(ms) after the collective was
  enqueued, so the incident's ts is the log time minus "ran for", logged_ts the log time. The
  companion "detected by watchdog at work: N, last enqueued ..., last completed ..." line of the same
  rank and work is folded into the incident's fields (the lowest "last completed" names the culprit).
- `NCCL WARN` lines (`host:pid:tid [dev] file:line NCCL WARN msg`): NET/IB completion errors carry the
  ibv_wc_status (12 = IBV_WC_RETRY_EXC_ERR, transport retries exceeded: link or loss).
- Python tracebacks: one incident per traceback, carrying its exception line (kind from the exception:
  CUDA out of memory -> oom, CUDA error -> cuda_error, NCCL error -> nccl_error); chained tracebacks
  ("During handling of the above exception") are one incident, the last exception's.
- CUDA errors outside a traceback (`what():  CUDA error: uncorrectable ECC error encountered`).
- torch elastic agent: "Worker group FAILED. 2/3 attempts left; will restart worker group" ->
  elastic_restart (NVRx's ft_launcher prints the same behind `[ft_launcher@host]`: launcher and host kept);
  "Received SIGTERM / Signals.SIGTERM / 15 death signal" -> sigterm.
- Slurm's and srun's own lines (how the attempt ended, the job id): formats/training/slurm_lines.py.
"""

from __future__ import annotations

import re

from synestra_cli.formats.hosts import short_host_sql
from synestra_cli.formats.training import joblog, slurm_lines

WATCHDOG_SQL = r"""
WITH w AS (
    SELECT sid, pos, lineno, ts AS logged_ts, ts_precision, body, rank AS prefix_rank,
        regexp_extract(body, 'Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)'
            '(?:, NumelIn=(\d+), NumelOut=(\d+))?, Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds',
            ['seq', 'op', 'numel_in', 'numel_out', 'timeout', 'ran_for']) AS m,
        TRY_CAST(nullif(regexp_extract(body, 'Rank (\d+)\] Watchdog caught', 1), '') AS INTEGER) AS msg_rank,
        nullif(regexp_extract(body, '\[PG (?:ID )?(\d+)', 1), '') AS pg
    FROM jl_lines WHERE contains(body, 'Watchdog caught collective operation timeout')
), c AS (
    SELECT sid, pos, TRY_CAST(regexp_extract(body, 'Rank (\d+)\] (?:Exception|Timeout at)', 1) AS INTEGER) AS rank,
        nullif(regexp_extract(body, '\[PG (?:ID )?(\d+)', 1), '') AS pg,
        regexp_extract(body, '(?:detected by watchdog at work|Timeout at NCCL work): (\d+), last enqueued NCCL '
            'work: (\d+), last completed NCCL work: (-?\d+)', ['work', 'enqueued', 'completed']) AS x
    FROM jl_lines WHERE contains(body, 'detected by watchdog at work:') OR contains(body, 'Timeout at NCCL work:')
)
SELECT w.sid, w.pos, w.lineno, 'incident' AS fact, 'nccl_timeout' AS kind,
    w.logged_ts - to_milliseconds(TRY_CAST(m.ran_for AS BIGINT)) AS ts, w.logged_ts, w.ts_precision,
    coalesce(w.msg_rank, w.prefix_rank) AS rank, nullif(m.op, '') AS collective, TRY_CAST(m.seq AS BIGINT) AS seq,
    TRY_CAST(m.timeout AS BIGINT) AS timeout_ms, TRY_CAST(m.ran_for AS BIGINT) AS ran_for_ms,
    trim(regexp_extract(w.body, '(\[(?:PG [^\]]*)?Rank \d+\] Watchdog caught.*|Watchdog caught.*)', 1)) AS message,
    json_object('pg', coalesce(w.pg, c.pg), 'numel_in', TRY_CAST(nullif(m.numel_in, '') AS BIGINT),
                'numel_out', TRY_CAST(nullif(m.numel_out, '') AS BIGINT),
                'last_enqueued', TRY_CAST(c.x.enqueued AS BIGINT), 'last_completed', TRY_CAST(c.x.completed AS BIGINT))
        AS fields
FROM w LEFT JOIN c ON c.sid = w.sid AND c.rank = coalesce(w.msg_rank, w.prefix_rank) AND c.x.work = w.m.seq
    AND c.pos > w.pos AND c.pos <= w.pos + 8
QUALIFY row_number() OVER (PARTITION BY w.sid, w.pos ORDER BY c.pos) = 1
    -- the same timeout printed again ("watchdog thread terminated with exception: ...", what()) is one incident
    AND (m.seq = '' OR row_number() OVER (PARTITION BY w.sid, coalesce(w.msg_rank, w.prefix_rank), m.seq, m.op,
                                                       m.timeout, m.ran_for ORDER BY w.pos) = 1)
"""

# ibv_wc_status names (rdma-core libibverbs/verbs.h), indexed from 0; a SQL list literal of constants.
WC_STATUS = [
    "SUCCESS",
    "LOC_LEN_ERR",
    "LOC_QP_OP_ERR",
    "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",
    "WR_FLUSH_ERR",
    "MW_BIND_ERR",
    "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",
    "REM_INV_REQ_ERR",
    "REM_ACCESS_ERR",
    "REM_OP_ERR",
    "RETRY_EXC_ERR",
    "RNR_RETRY_EXC_ERR",
    "LOC_RDD_VIOL_ERR",
    "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",
    "INV_EECN_ERR",
    "INV_EEC_STATE_ERR",
    "FATAL_ERR",
    "RESP_TIMEOUT_ERR",
    "GENERAL_ERR",
]
WC_LIST = "[" + ", ".join(f"'IBV_WC_{name}'" for name in WC_STATUS) + "]"

NCCL_WARN_SQL = rf"""
WITH n AS (
    SELECT sid, pos, lineno, ts, ts_precision, rank, body,
        regexp_extract(body, '^(\S+):(\d+):(\d+) \[(\d+)\] (?:\S+ )?NCCL WARN (.*)$',
                       ['host', 'pid', 'tid', 'dev', 'msg']) AS h,
        TRY_CAST(nullif(regexp_extract(body, 'Got completion (?:from peer \S+ )?with (?:status=(\d+)|error (\d+))', 1)
            || regexp_extract(body, 'Got completion (?:from peer \S+ )?with (?:status=(\d+)|error (\d+))', 2), '')
            AS INTEGER) AS status,
        regexp_extract(body, 'Connect to (\S+?)(?:<(\d+)>)? failed ?: (.*)$', ['addr', 'port', 'error']) AS conn,
        nullif(regexp_extract(body, 'Got completion from peer (\S+)', 1), '') AS peer,
        TRY_CAST(nullif(regexp_extract(body, 'vendor err (\d+)', 1), '') AS INTEGER) AS vendor_err,
        nullif(regexp_extract(body, 'vendor err \d+ \((Send|Recv)\)', 1), '') AS direction
    FROM jl_lines WHERE contains(body, 'NCCL WARN')
)
SELECT sid, pos, lineno, 'incident' AS fact, 'nccl_error' AS kind, ts, ts_precision, rank,
    trim(coalesce(nullif(h.msg, ''), body)) AS message,
    json_object('host', nullif(h.host, ''), 'pid', TRY_CAST(h.pid AS INTEGER), 'cuda_dev', TRY_CAST(h.dev AS INTEGER),
                'status', status, 'status_name', {WC_LIST}[status + 1],
                'peer', peer, 'vendor_err', vendor_err, 'direction', direction,
                'connect_to', nullif(conn.addr, ''), 'connect_port', TRY_CAST(nullif(conn.port, '') AS INTEGER),
                'connect_error', nullif(trim(conn.error), '')) AS fields
FROM n
"""

EXC_RE = r"^ ?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s*(.*))?$"
KIND_OF_EXC = r"""CASE WHEN regexp_matches(exc_line, 'OutOfMemoryError|CUDA out of memory') THEN 'oom'
    WHEN contains(exc_line, 'CUDA error') THEN 'cuda_error'
    WHEN regexp_matches(exc_line, 'NCCL error|DistBackendError|NCCL communicator') THEN 'nccl_error'
    ELSE 'python_exception' END"""

# Per rank (torchrun prefixes interleave ranks): an exception line closes the traceback opened
# before it if no other exception line came in between; one followed by a chained traceback is skipped.
TRACEBACK_SQL = rf"""
WITH t AS (
    SELECT sid, pos, lineno, ts, ts_precision, rank, body,
        regexp_matches(body, '^\s*Traceback \(most recent call last\):') AS is_tb,
        regexp_matches(body, '{EXC_RE}') AND NOT contains(body, 'Watchdog caught')
            AND NOT contains(body, 'ChildFailedError') AS is_exc  -- the launcher's: its workers are worker_failed
    FROM jl_lines
), r AS (
    SELECT *, lag(is_tb) OVER w AS prev_is_tb, lag(lineno) OVER w AS tb_lineno,
        lead(is_tb) OVER w AS next_is_tb, lead(lineno) OVER w AS next_lineno
    FROM t WHERE is_tb OR is_exc
    WINDOW w AS (PARTITION BY sid, coalesce(rank, -1) ORDER BY pos)
), e AS (
    SELECT *, trim(body) AS exc_line FROM r
    WHERE is_exc AND prev_is_tb AND NOT (coalesce(next_is_tb, false) AND next_lineno - lineno <= 4)
)
SELECT sid, pos, lineno, 'incident' AS fact, {KIND_OF_EXC} AS kind, ts, ts_precision, rank, exc_line AS message,
    json_object('exception', regexp_extract(exc_line, '{EXC_RE}', 1),
                'traceback_line', tb_lineno) AS fields
FROM e
"""

CUDA_SQL = rf"""
SELECT sid, pos, lineno, 'incident' AS fact, 'cuda_error' AS kind, ts, ts_precision, rank,
    trim(regexp_extract(body, '(CUDA error: .*)', 1)) AS message, json_object('source', 'log') AS fields
FROM jl_lines WHERE contains(body, 'CUDA error: ') AND NOT regexp_matches(body, '{EXC_RE}')
"""

ELASTIC_SQL = r"""
SELECT sid, pos, lineno, 'incident' AS fact, 'elastic_restart' AS kind, ts, ts_precision, rank, trim(body) AS message,
    CASE WHEN contains(body, '[ft_launcher@') THEN json_merge_patch(f, json_object('launcher', 'ft_launcher',
             'host', nullif(regexp_extract(body, '\[ft_launcher@([^\]\s]+)\]', 1), ''))) ELSE f END AS fields
FROM (SELECT *, json_object('role', m.role, 'state', m.state, 'attempts_left', TRY_CAST(m.left AS INTEGER),
                             'max_restarts', TRY_CAST(m.max AS INTEGER)) AS f
      FROM (SELECT *, regexp_extract(body, '\[(\w+)\] Worker group (FAILED|UNHEALTHY)\. (\d+)/(\d+) attempts left; '
                                           'will restart', ['role', 'state', 'left', 'max']) AS m
            FROM jl_lines WHERE contains(body, 'attempts left; will restart worker group')))
UNION ALL BY NAME
SELECT sid, pos, lineno, 'incident' AS fact, 'sigterm' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'torchelastic', 'signal', regexp_extract(body, 'Received (\S+) death signal', 1)) AS fields
FROM jl_lines
WHERE contains(body, ' death signal') AND regexp_matches(body, 'Received (Signals\.SIGTERM|SIGTERM|15) death signal')
"""

# torchrun's agent between worker groups (torch/distributed/elastic/agent/server/api.py, as in the real sample
# gh-mmdetection-6779): `[default] Rendezvous'ing worker group` once the failed group is stopped, `[default] Starting
# worker group` as the new one starts -> job_marks (worker_rendezvous, worker_start): an in-place restart's end of
# the old workers and start of the new (explain/restarts.py).
AGENT_MARKS_SQL = r"""
SELECT sid, pos, lineno, 'mark' AS fact, ts, ts_precision, trim(body) AS message,
    CASE WHEN contains(body, 'Rendezvous''ing worker group') THEN 'worker_rendezvous' ELSE 'worker_start' END AS kind
FROM jl_lines
WHERE contains(body, ' worker group') AND regexp_matches(body, '\[\w+\] (Rendezvous''ing|Starting) worker group\s*$')
"""

# torchrun's launcher prints its configuration as it starts (torch/distributed/launcher/api.py): a process start.
LAUNCH_SQL = r"""
SELECT sid, pos, lineno, 'banner' AS fact, ts, ts_precision FROM jl_lines
WHERE contains(body, 'Starting elastic_operator with launch configs:')
"""

# Linux signal numbers 1..15 (signal(7), x86/ARM): a worker's negative exit code is the signal that killed it.
SIGNALS = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
]
SIGNAL_LIST = "[" + ", ".join(f"'{name}'" for name in SIGNALS) + "]"
# What an exit code says, for the incident's fields: -N is signal N (multiprocessing's returncode), 128+N the
# shell's way of saying the same; 1 is Python's exit status after an uncaught exception.
MEANINGS = {
    "SIGKILL": "killed by SIGKILL: most often the kernel or cgroup OOM killer (look for oom-kill lines)",
    "SIGABRT": "aborted (SIGABRT): a C++ exception or abort(), e.g. the NCCL watchdog taking the process down",
    "SIGTERM": "terminated by SIGTERM: stopped from outside (scheduler preemption or time limit, scancel, "
    "or torchrun stopping the other workers)",
    "SIGSEGV": "segmentation fault (SIGSEGV): a crash in native code",
    "SIGBUS": "bus error (SIGBUS): often shared memory (/dev/shm) exhausted",
    "SIGINT": "interrupted (SIGINT, Ctrl-C)",
}
MEANING_CASE = (
    "CASE sig "
    + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in MEANINGS.items())
    + " ELSE CASE WHEN sig IS NOT NULL THEN 'killed by ' || sig WHEN code = 1 THEN "
    "'exit code 1: an uncaught Python exception (its traceback is in the worker''s log)' "
    "WHEN code IS NOT NULL THEN 'exit code ' || code END END"
)
SIG_OF = f"""CASE WHEN code < 0 AND code >= -15 THEN {SIGNAL_LIST}[-code]
    WHEN code > 128 AND code <= 143 THEN {SIGNAL_LIST}[code - 128] END"""

# torchrun's agent reports each failed worker: `failed (exitcode: -9) local_rank: 0 (pid: 123) of binary: ...`
# in three logger generations (`ERROR:torch.distributed.elastic...:`, torch 2.1-2.3 `[date] torch...: [ERROR] `,
# glog `E0325 20:57:27.62 2576 .../api.py:869] `), also glued after a progress bar: matched anywhere in the line.
# The ChildFailedError block then names each failure with its global rank, host (an FQDN: socket.getfqdn())
# and time (the agent's local time, no zone: read in --timezone). One incident per failed worker: a block entry,
# else the agent's line; the block entry takes the agent line's local rank and pid when both name the same pid.
WORKER_SQL = rf"""
WITH a AS (
    SELECT sid, pos, lineno, ts, ts_precision,
        regexp_extract(body, 'failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)(?: of binary: (\S+))?',
                       ['code', 'local_rank', 'pid', 'binary']) AS m, body
    FROM jl_lines WHERE contains(body, 'failed (exitcode: ')
), kv AS (
    SELECT sid, pos, regexp_extract(body, '^\s+(time|host|rank|exitcode|error_file|traceback)\s*: ?(.*?)\s*$',
                               ['key', 'val']) AS kv
    FROM jl_lines WHERE regexp_matches(body, '^\s+(time|host|rank|exitcode|error_file|traceback)\s*: ')
), hdr AS (
    SELECT sid, pos AS hpos, lineno AS hline, TRY_CAST(regexp_extract(body, '^\[(\d+)\]:', 1) AS INTEGER) AS idx
    FROM jl_lines WHERE regexp_matches(body, '^\[\d+\]:\s*$')
), sec AS (
    SELECT sid, pos AS spos, starts_with(body, 'Root Cause') AS root_cause
    FROM jl_lines WHERE regexp_matches(body, '^(Root Cause \(first observed failure\)|Failures):')
), entry AS (
    SELECT hdr.sid, hpos, hline, idx,
        max(kv.val) FILTER (WHERE kv.key = 'time') AS t, max(kv.val) FILTER (WHERE kv.key = 'host') AS fqdn,
        max(kv.val) FILTER (WHERE kv.key = 'rank') AS r, max(kv.val) FILTER (WHERE kv.key = 'exitcode') AS e,
        max(kv.val) FILTER (WHERE kv.key = 'traceback') AS tb
    FROM kv ASOF JOIN hdr ON kv.sid = hdr.sid AND kv.pos >= hdr.hpos
    WHERE kv.pos - hdr.hpos <= 8 GROUP BY ALL
), cfe AS (
    SELECT e.*, s.root_cause,
        TRY_CAST(nullif(regexp_extract(r, '^(\d+)', 1), '') AS INTEGER) AS rank,
        TRY_CAST(nullif(regexp_extract(r, 'local_rank: (\d+)', 1), '') AS INTEGER) AS local_rank,
        TRY_CAST(nullif(regexp_extract(e.e, '^(-?\d+)', 1), '') AS INTEGER) AS code,
        TRY_CAST(nullif(regexp_extract(e.e, 'pid: (\d+)', 1), '') AS BIGINT) AS pid,
        try_strptime(leap_second(t), ['%Y-%m-%d_%H:%M:%S', '%Y-%m-%d_%H:%M:%S.%f']) AS local_ts
    FROM entry e ASOF LEFT JOIN sec s ON e.sid = s.sid AND e.hpos >= s.spos
), wf AS (
    SELECT sid, hpos AS pos, hline AS lineno, rank, local_rank, code, pid, fqdn, root_cause, tb,
        CASE WHEN $tz = 'UTC' THEN local_ts ELSE timezone('UTC', timezone($tz, local_ts)) END AS ts,
        CASE WHEN local_ts IS NOT NULL THEN 'exact' ELSE 'none' END AS ts_precision, NULL AS bin_path,
        'ChildFailedError' AS reported_by
    FROM cfe WHERE code IS NOT NULL
    UNION ALL BY NAME
    SELECT sid, pos, lineno, NULL AS rank, TRY_CAST(m.local_rank AS INTEGER) AS local_rank,
        TRY_CAST(m.code AS INTEGER) AS code, TRY_CAST(m.pid AS BIGINT) AS pid, ts, ts_precision,
        nullif(m.binary, '') AS bin_path, 'torchrun' AS reported_by
    FROM a WHERE m.code <> ''
        AND TRY_CAST(m.pid AS BIGINT) NOT IN (SELECT pid FROM cfe WHERE cfe.sid = a.sid AND pid IS NOT NULL)
), s AS (
    SELECT *, {SIG_OF} AS sig FROM wf
)
SELECT sid, pos, lineno, 'incident' AS fact, 'worker_failed' AS kind, ts, ts_precision, rank,
    'worker ' || coalesce('rank ' || rank || ' ', '') || coalesce('(local_rank ' || local_rank || ') ', '')
        || coalesce('pid ' || pid || ' ', '') || 'failed with exit code ' || code
        || coalesce(' (' || sig || ')', '') || coalesce(' on ' || fqdn, '') AS message,
    json_object('local_rank', local_rank, 'pid', pid, 'exitcode', code, 'signal', sig,
                'meaning', {MEANING_CASE},
                'host', {short_host_sql("fqdn")},
                'fqdn', fqdn, 'root_cause', root_cause, 'binary', bin_path, 'reported_by', reported_by,
                'traceback', CASE WHEN NOT starts_with(tb, 'To enable traceback') THEN tb END) AS fields
FROM s
"""


# Log-shaped lines only (at a line start, after an optional `[rankN]:`), so that a README quoting
# these messages is not taken for a log.
# Also behind a launcher's `[PID] ` or Ray's `(RayWorkerWrapper pid=N) ` prefix, inside a C++ `what():`, after a
# progress bar (torchrun's failure report), and Slurm's own oom-kill line.
SNIFF_RE = re.compile(
    r"^(?:\[\d+\] |(?:\x1b?\[[0-9;]*m)?\(\w+ pid=\d+\) )?(?:\[rank\d+\]:)?(?:.*\])?"
    r"\[[IWEF][\d :.]*ProcessGroupNCCL\.cpp:\d+\]"
    r"|^(?:\S+:\d+:\d+ \[\d+\] .*)?NCCL (WARN|INFO) "
    r"|^\s*(?:what\(\):\s+)?(?:\[PG [^\]]*\] .*)?(?:\[Rank \d+\] )?"
    r"Watchdog caught collective operation timeout: WorkNCCL"
    r"|^(?:stderr: )?(?:INFO|WARNING|ERROR):torch\.distributed\.elastic"
    r"|^\[\d{4}-\d\d-\d\d [\d:,]+\] torch\.distributed\.elastic\.\S+: \[(?:INFO|WARNING|ERROR)\] "
    r"|^[IWEF]\d{3,4} [\d:.]+ +\d+ \S*torch/distributed/elastic/"
    r"|failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\)"
    r"|^(?:torch\.distributed\.elastic\.multiprocessing\.errors\.)?ChildFailedError:"
    r"|^Root Cause \(first observed failure\):"
    r"|^slurmstepd(?:-\S+)?: (?:error: )?(?:Detected \d+ oom.kill event|"
    r"\*\*\* (?:JOB|STEP) \d+\S* (?:ON \S+ )?(?:CANCELLED|FAILED))"
    r"|^srun: error: (?:Node failure on \S+|\S+: tasks? \d[-,\d]*: )",
    re.MULTILINE,
)


def sniff(head: str) -> float:
    return 0.3 if SNIFF_RE.search(head) else 0.0


FORMAT = joblog.job_log_format(
    "torch_log",
    "PyTorch / NCCL / torchrun failure log without framework lines (watchdog, NCCL WARN, elastic)",
    sniff,
    [
        WATCHDOG_SQL,
        NCCL_WARN_SQL,
        TRACEBACK_SQL,
        CUDA_SQL,
        ELASTIC_SQL,
        WORKER_SQL,
        AGENT_MARKS_SQL,
        LAUNCH_SQL,
        *slurm_lines.FACTS,
    ],
    top=0.3,
    priority=130,
)
