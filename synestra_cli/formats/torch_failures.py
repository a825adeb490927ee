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
  elastic_restart; "Received SIGTERM / Signals.SIGTERM / 15 death signal" -> sigterm.
- Slurm: `*** JOB 123 ON host CANCELLED AT <iso> DUE TO PREEMPTION ***` -> sigterm with the reason;
  `Detected N oom_kill event` -> oom.
"""

from __future__ import annotations

import re

from synestra_cli.formats import joblog
from synestra_cli.formats.base import LoadContext, LoadResult

NAME = "torch_log"
DESCRIPTION = "PyTorch / NCCL / torchrun failure log without framework lines (watchdog, NCCL WARN, elastic)"

WATCHDOG_SQL = r"""
WITH w AS (
    SELECT pos, lineno, ts AS logged_ts, ts_precision, body, rank AS prefix_rank,
        regexp_extract(body, 'Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(\d+), OpType=(\w+)'
            '(?:, NumelIn=(\d+), NumelOut=(\d+))?, Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds',
            ['seq', 'op', 'numel_in', 'numel_out', 'timeout', 'ran_for']) AS m,
        TRY_CAST(nullif(regexp_extract(body, 'Rank (\d+)\] Watchdog caught', 1), '') AS INTEGER) AS msg_rank,
        nullif(regexp_extract(body, '\[PG (?:ID )?(\d+)', 1), '') AS pg
    FROM jl_lines WHERE contains(body, 'Watchdog caught collective operation timeout')
), c AS (
    SELECT pos, TRY_CAST(regexp_extract(body, 'Rank (\d+)\] Exception', 1) AS INTEGER) AS rank,
        regexp_extract(body, 'detected by watchdog at work: (\d+), last enqueued NCCL work: (\d+), '
            'last completed NCCL work: (-?\d+)', ['work', 'enqueued', 'completed']) AS x
    FROM jl_lines WHERE contains(body, 'detected by watchdog at work:')
)
SELECT w.pos, w.lineno, 'incident' AS fact, 'nccl_timeout' AS kind,
    w.logged_ts - to_milliseconds(TRY_CAST(m.ran_for AS BIGINT)) AS ts, w.logged_ts, w.ts_precision,
    coalesce(w.msg_rank, w.prefix_rank) AS rank, nullif(m.op, '') AS collective, TRY_CAST(m.seq AS BIGINT) AS seq,
    TRY_CAST(m.timeout AS BIGINT) AS timeout_ms, TRY_CAST(m.ran_for AS BIGINT) AS ran_for_ms,
    trim(regexp_extract(w.body, '(\[(?:PG [^\]]*)?Rank \d+\] Watchdog caught.*|Watchdog caught.*)', 1)) AS message,
    json_object('pg', w.pg, 'numel_in', TRY_CAST(nullif(m.numel_in, '') AS BIGINT),
                'numel_out', TRY_CAST(nullif(m.numel_out, '') AS BIGINT),
                'last_enqueued', TRY_CAST(c.x.enqueued AS BIGINT), 'last_completed', TRY_CAST(c.x.completed AS BIGINT))
        AS fields
FROM w LEFT JOIN c ON c.rank = coalesce(w.msg_rank, w.prefix_rank) AND c.x.work = w.m.seq
    AND c.pos > w.pos AND c.pos <= w.pos + 8
QUALIFY row_number() OVER (PARTITION BY w.pos ORDER BY c.pos) = 1
"""

# ibv_wc_status names (rdma-core libibverbs/verbs.h), indexed from 0; a SQL list literal of constants.
WC_STATUS = ["SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
             "MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR", "REM_OP_ERR",
             "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR", "REM_INV_RD_REQ_ERR", "REM_ABORT_ERR",
             "INV_EECN_ERR", "INV_EEC_STATE_ERR", "FATAL_ERR", "RESP_TIMEOUT_ERR", "GENERAL_ERR"]
WC_LIST = "[" + ", ".join(f"'IBV_WC_{name}'" for name in WC_STATUS) + "]"

NCCL_WARN_SQL = rf"""
WITH n AS (
    SELECT pos, lineno, ts, ts_precision, rank, body,
        regexp_extract(body, '^(\S+):(\d+):(\d+) \[(\d+)\] (?:\S+ )?NCCL WARN (.*)$',
                       ['host', 'pid', 'tid', 'dev', 'msg']) AS h,
        TRY_CAST(nullif(regexp_extract(body, 'Got completion from peer \S+ with (?:status=(\d+)|error (\d+))', 1)
            || regexp_extract(body, 'Got completion from peer \S+ with (?:status=(\d+)|error (\d+))', 2), '')
            AS INTEGER) AS status,
        nullif(regexp_extract(body, 'Got completion from peer (\S+)', 1), '') AS peer,
        TRY_CAST(nullif(regexp_extract(body, 'vendor err (\d+)', 1), '') AS INTEGER) AS vendor_err,
        nullif(regexp_extract(body, 'vendor err \d+ \((Send|Recv)\)', 1), '') AS direction
    FROM jl_lines WHERE contains(body, 'NCCL WARN')
)
SELECT pos, lineno, 'incident' AS fact, 'nccl_error' AS kind, ts, ts_precision, rank,
    trim(coalesce(nullif(h.msg, ''), body)) AS message,
    json_object('host', nullif(h.host, ''), 'pid', TRY_CAST(h.pid AS INTEGER), 'cuda_dev', TRY_CAST(h.dev AS INTEGER),
                'status', status, 'status_name', {WC_LIST}[status + 1],
                'peer', peer, 'vendor_err', vendor_err, 'direction', direction) AS fields
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
    SELECT pos, lineno, ts, ts_precision, rank, body,
        regexp_matches(body, '^\s*Traceback \(most recent call last\):') AS is_tb,
        regexp_matches(body, '{EXC_RE}') AND NOT contains(body, 'Watchdog caught') AS is_exc
    FROM jl_lines
), r AS (
    SELECT *, lag(is_tb) OVER w AS prev_is_tb, lag(lineno) OVER w AS tb_lineno,
        lead(is_tb) OVER w AS next_is_tb, lead(lineno) OVER w AS next_lineno
    FROM t WHERE is_tb OR is_exc
    WINDOW w AS (PARTITION BY coalesce(rank, -1) ORDER BY pos)
), e AS (
    SELECT *, trim(body) AS exc_line FROM r
    WHERE is_exc AND prev_is_tb AND NOT (coalesce(next_is_tb, false) AND next_lineno - lineno <= 4)
)
SELECT pos, lineno, 'incident' AS fact, {KIND_OF_EXC} AS kind, ts, ts_precision, rank, exc_line AS message,
    json_object('exception', regexp_extract(exc_line, '{EXC_RE}', 1),
                'traceback_line', tb_lineno) AS fields
FROM e
"""

CUDA_SQL = rf"""
SELECT pos, lineno, 'incident' AS fact, 'cuda_error' AS kind, ts, ts_precision, rank,
    trim(regexp_extract(body, '(CUDA error: .*)', 1)) AS message, json_object('source', 'log') AS fields
FROM jl_lines WHERE contains(body, 'CUDA error: ') AND NOT regexp_matches(body, '{EXC_RE}')
"""

ELASTIC_SQL = r"""
SELECT pos, lineno, 'incident' AS fact, 'elastic_restart' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('role', m.role, 'state', m.state, 'attempts_left', TRY_CAST(m.left AS INTEGER),
                'max_restarts', TRY_CAST(m.max AS INTEGER)) AS fields
FROM (SELECT *, regexp_extract(body,
                               '\[(\w+)\] Worker group (FAILED|UNHEALTHY)\. (\d+)/(\d+) attempts left; will restart',
                               ['role', 'state', 'left', 'max']) AS m
      FROM jl_lines WHERE contains(body, 'attempts left; will restart worker group'))
UNION ALL BY NAME
SELECT pos, lineno, 'incident' AS fact, 'sigterm' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'torchelastic', 'signal', regexp_extract(body, 'Received (\S+) death signal', 1)) AS fields
FROM jl_lines WHERE regexp_matches(body, 'Received (Signals\.SIGTERM|SIGTERM|15) death signal')
"""

SLURM_SQL = r"""
SELECT pos, lineno, 'incident' AS fact, 'sigterm' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'slurm', 'host', m.host, 'reason', nullif(m.reason, '')) AS fields
FROM (SELECT *, regexp_extract(body, '\*\*\* (?:JOB|STEP) \S+ ON (\S+) CANCELLED AT \S+(?: DUE TO (.+?))? \*\*\*',
                               ['host', 'reason']) AS m
      FROM jl_lines WHERE regexp_matches(body, '\*\*\* (JOB|STEP) \S+ ON \S+ CANCELLED AT'))
UNION ALL BY NAME
SELECT pos, lineno, 'incident' AS fact, 'oom' AS kind, ts, ts_precision, rank, trim(body) AS message,
    json_object('source', 'slurm') AS fields
FROM jl_lines WHERE regexp_matches(body, 'Detected \d+ oom.kill event')
"""

FACT_SQL = [WATCHDOG_SQL, NCCL_WARN_SQL, TRACEBACK_SQL, CUDA_SQL, ELASTIC_SQL, SLURM_SQL]

# Log-shaped lines only (at a line start, after an optional `[rankN]:`), so that a README quoting
# these messages is not taken for a log.
SNIFF_RE = re.compile(
    r"^(?:\[rank\d+\]:)?(?:.*\])?\[[IWEF][\d :.]*ProcessGroupNCCL\.cpp:\d+\]|^\S+:\d+:\d+ \[\d+\] .*NCCL (WARN|INFO) |"
    r"^(?:INFO|WARNING|ERROR):torch\.distributed\.elastic|^[IWEF]\d{3,4} [\d:.]+ +\d+ \S*torch/distributed/elastic/",
    re.MULTILINE)


def sniff(head: str) -> float:
    if joblog.looks_like_syslog(head):
        return 0.0
    return 0.3 if SNIFF_RE.search(head) else 0.0


def load(ctx: LoadContext) -> LoadResult:
    return joblog.load_job_log(ctx)
