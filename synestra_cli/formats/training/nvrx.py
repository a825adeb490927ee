"""NVIDIA Resiliency Extension (NVRx) lines in a training log: straggler detection and fault tolerance.

- Straggler detection (`StragglerDetectionCallback`, nvidia_resiliency_ext/ptl_resiliency/
  straggler_det_callback.py) logs a report every interval, one logger call per score kind:
      [NeMo I 2025-03-07 22:43:58 straggler_det_callback:144]
          GPU relative performance:
            Rank=5 Node=4809917ea058 Score=0.97
  all ranks when few, else ` Worst performing 5/512 ranks:` and ` Best performing 5/512 ranks:` with
  five each. Each report is one `straggler_report` incident: the worst rank listed (its host, its score),
  the score kind (relative | individual), how many ranks were scored, and every listed score.
  `STRAGGLER DETECTION WARNING: Some GPUs have worse relative performance. Affected ranks:
  {StragglerId(rank=5, node='4809917ea058'), ...}` (or `Some GPUs performance dropped.`, individual) is one
  `straggler` incident per rank named, with its host: the ranks NVRx judged below its threshold (0.7 by
  default). `Detected stragglers. Terminating training...` is `straggler_stop`.
- Fault tolerance's rank monitor (fault_tolerance/rank_monitor_server.py) says why it declared a rank hung:
  `[RankMonitorServer:34] Did not get subsequent heartbeat. Waited 171.92 seconds.` (2024-2025), now
  `[RankMonServer<pid>@<host>:<rank>] [Cycle N] ...`, also `Section 'step' has been open for ...` and
  `Was out of section for ...`: one `ft_hang_detected` incident for that rank.
- ft_launcher's in-job restarts are torchelastic's lines (`[ft_launcher@host] [default] Worker group FAILED.
  3/3 attempts left; will restart worker group`): torch_failures.py reads them (elastic_restart) and names
  the launcher and its host.

The lines are matched anywhere in a line (notebooks and launchers print them behind their own prefixes);
times are the log's (joblog.py), so a prefix in front of the logger's stamp leaves them untimed until the
prefix is removed. A `Rank=` line of a report that does not read `Rank=N Node=HOST Score=X.YY` is a reject.
"""

from __future__ import annotations

from synestra_cli.formats.training import joblog, joblog_sniff

# A report: its header line and the score lines that follow it without a gap (islands of consecutive lines).
REPORT_SQL = r"""
WITH c AS (
    SELECT sid, pos, lineno, ts, ts_precision, rank AS prefix_rank, body,
           regexp_extract(body, 'GPU (relative|individual) performance:\s*$', 1) AS report,
           regexp_extract(body, '(Worst|Best) performing (\d+)/(\d+) ranks:\s*$', ['sec', 'k', 'n']) AS part,
           regexp_extract(body, '(?:^|\s|:)Rank=(\d+) Node=(\S+) Score=(\d+(?:\.\d+)?)\s*$',
                          ['r', 'node', 'score']) AS s,
           contains(body, 'Rank=') AS has_rank
    FROM jl_lines
    WHERE contains(body, ' performance:') OR contains(body, ' performing ') OR contains(body, 'Rank=')
), isl AS (
    SELECT *, pos - row_number() OVER (PARTITION BY sid ORDER BY pos) AS island FROM c
), hdr AS (
    SELECT sid, island, pos AS hpos, lineno, ts, ts_precision, report, body FROM isl WHERE report <> ''
), rows AS (
    SELECT i.*, h.hpos, h.report AS kind_of, h.lineno AS hline, h.ts AS hts, h.ts_precision AS hprec,
           last_value(nullif(i.part.sec, '') IGNORE NULLS) OVER w AS section,
           last_value(TRY_CAST(nullif(i.part.n, '') AS INTEGER) IGNORE NULLS) OVER w AS scored
    FROM isl i JOIN hdr h ON h.sid = i.sid AND h.island = i.island AND i.pos > h.hpos
    WINDOW w AS (PARTITION BY i.sid, i.island ORDER BY i.pos ROWS UNBOUNDED PRECEDING)
), good AS (
    SELECT * FROM rows WHERE s.r <> ''
), rep AS (
    SELECT sid, hpos, any_value(hline) AS lineno, any_value(hts) AS ts, any_value(hprec) AS ts_precision,
           any_value(kind_of) AS report, max(scored) AS scored, count(*) AS listed,
           arg_min(struct_pack(r := TRY_CAST(s.r AS INTEGER), node := s.node), (TRY_CAST(s.score AS DOUBLE), pos))
               AS worst,
           min(TRY_CAST(s.score AS DOUBLE)) AS worst_score,
           list(json_object('rank', TRY_CAST(s.r AS INTEGER), 'host', s.node, 'score', TRY_CAST(s.score AS DOUBLE),
                            'section', lower(coalesce(section, 'all'))) ORDER BY pos) AS scores
    FROM good GROUP BY sid, hpos
)
SELECT sid, hpos AS pos, lineno, 'incident' AS fact, 'straggler_report' AS kind, ts, ts_precision,
       worst.r AS rank,
       printf('GPU %s performance: worst rank %d on %s, score %.2f (%d of %d ranks listed)', report, worst.r,
              worst.node, worst_score, listed, coalesce(scored, listed)) AS message,
       json_object('source', 'nvrx_straggler_detection', 'report', report, 'host', worst.node,
                   'score', worst_score, 'ranks', coalesce(scored, listed), 'listed', listed,
                   'scores', scores::JSON[]) AS fields
FROM rep
UNION ALL BY NAME
SELECT sid, pos, lineno, 'reject' AS fact, ts, ts_precision,
       'NVRx straggler report: not `Rank=N Node=HOST Score=X`' AS message
FROM rows WHERE has_rank AND s.r = ''
"""

# The ranks NVRx called stragglers: `StragglerId(rank=5, node='host')` in the set it prints (Megatron
# Bridge's manager prints bare ranks: `[76, 13, 45]`).
STRAGGLERS_SQL = r"""
WITH w AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
           CASE WHEN contains(body, 'performance dropped') THEN 'individual' ELSE 'relative' END AS report,
           regexp_extract(body, 'Affected ranks: (.*)$', 1) AS affected
    FROM jl_lines WHERE contains(body, 'STRAGGLER DETECTION WARNING')
), ids AS (
    SELECT *, regexp_extract_all(affected, 'StragglerId\(rank=(\d+), node=''([^'']*)''\)', 0) AS named,
           CASE WHEN NOT contains(affected, 'StragglerId') THEN
               regexp_extract_all(regexp_extract(affected, '^[\{\[]([\d, ]*)[\}\]]', 1), '\d+') END AS bare
    FROM w
), each AS (
    SELECT sid, pos, lineno, ts, ts_precision, body, report,
           TRY_CAST(regexp_extract(x, 'rank=(\d+)', 1) AS INTEGER) AS rank,
           nullif(regexp_extract(x, 'node=''([^'']*)''', 1), '') AS host
    FROM ids, unnest(named) AS t(x)
    UNION ALL
    SELECT sid, pos, lineno, ts, ts_precision, body, report, TRY_CAST(x AS INTEGER), NULL
    FROM ids, unnest(bare) AS t(x)
)
SELECT sid, pos, lineno, 'incident' AS fact, 'straggler' AS kind, ts, ts_precision, rank,
       trim(regexp_extract(body, '(STRAGGLER DETECTION WARNING.*)$', 1)) AS message,
       json_object('source', 'nvrx_straggler_detection', 'report', report, 'host', host) AS fields
FROM each
UNION ALL BY NAME
SELECT sid, pos, lineno, 'reject' AS fact, ts, ts_precision,
       'NVRx straggler warning names no rank (cut short?)' AS message
FROM ids WHERE len(named) = 0 AND coalesce(len(bare), 0) = 0
UNION ALL BY NAME
SELECT sid, pos, lineno, 'incident' AS fact, 'straggler_stop' AS kind, ts, ts_precision, rank,
       'Detected stragglers. Terminating training...' AS message,
       json_object('source', 'nvrx_straggler_detection') AS fields
FROM jl_lines WHERE contains(body, 'Detected stragglers. Terminating training')
"""

# The rank monitor's verdicts: `[RankMonitorServer:34]` (rank), `[RankMonServer1234@host:34] [Cycle 2]`.
MONITOR_SQL = r"""
WITH m AS (
    SELECT sid, pos, lineno, ts, ts_precision, body,
           regexp_extract(body, '\[RankMon(?:itor)?Server(?:\d+@([^:\]\s]+))?:(\d+)\] (?:\[Cycle (\d+)\] )?',
                          ['host', 'rank', 'cycle']) AS who,
           regexp_extract(body, 'Did not get (initial|subsequent) heartbeat\. Waited (\d+(?:\.\d+)?) seconds',
                          ['hb', 'waited']) AS hb,
           regexp_extract(body, 'Section ''([^'']*)'' has been open for (\d+(?:\.\d+)?) seconds\. '
                          'Timeout is (\d+(?:\.\d+)?) seconds', ['section', 'open', 'timeout']) AS sec,
           regexp_extract(body, 'Was out of section for (\d+(?:\.\d+)?) seconds\. Timeout is (\d+(?:\.\d+)?)',
                          ['open', 'timeout']) AS oos
    FROM jl_lines
    WHERE contains(body, 'Server') AND (contains(body, ' heartbeat. Waited ') OR contains(body, ' has been open for ')
                                        OR contains(body, 'Was out of section for '))
)
SELECT sid, pos, lineno, 'incident' AS fact, 'ft_hang_detected' AS kind, ts, ts_precision,
       TRY_CAST(nullif(who.rank, '') AS INTEGER) AS rank,
       trim(regexp_extract(body, '((?:Did not get|Section ''|Was out of section).*)$', 1)) AS message,
       json_object('source', 'nvrx_rank_monitor', 'host', nullif(who.host, ''),
                   'cycle', TRY_CAST(nullif(who.cycle, '') AS INTEGER),
                   'check', CASE WHEN hb.hb = 'initial' THEN 'initial_heartbeat' WHEN hb.hb <> '' THEN 'heartbeat'
                                 WHEN sec.section <> '' THEN 'section' ELSE 'out_of_section' END,
                   'section', nullif(sec.section, ''),
                   'waited_s', TRY_CAST(coalesce(nullif(hb.waited, ''), nullif(sec.open, ''), nullif(oos.open, ''))
                                        AS DOUBLE),
                   'timeout_s', TRY_CAST(coalesce(nullif(hb.waited, ''), nullif(sec.timeout, ''),
                                                  nullif(oos.timeout, '')) AS DOUBLE)) AS fields
FROM m WHERE who.rank <> '' AND (hb.hb <> '' OR sec.section <> '' OR oos.open <> '')
"""

SNIFF_LINE = (
    r"GPU (?:relative|individual) performance:\s*$|STRAGGLER DETECTION WARNING|\sRank=\d+ Node=\S+ Score=\d"
    r"|(?:^|\] )\[RankMon(?:itor)?Server\S*:\d+\] .*(?:heartbeat\. Waited|has been open for|out of section for)"
    r"|\] \[ft_launcher@[^\]\s]+\] "
)


def sniff(head: str) -> float:
    needles = ("performance:", "STRAGGLER", "Score=", "RankMon", "[ft_launcher@")
    return 0.5 if joblog_sniff.has_line(head, SNIFF_LINE, *needles) else 0.0


FORMAT = joblog.job_log_format(
    "nvrx_log",
    "NVIDIA Resiliency Extension lines in a training log: straggler reports and warnings, rank-monitor hangs",
    sniff,
    [REPORT_SQL, STRAGGLERS_SQL, MONITOR_SQL],
    top=0.5,
    priority=140,
)
