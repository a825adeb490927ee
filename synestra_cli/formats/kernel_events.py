"""Typed events from kernel/syslog message text, as DuckDB SQL over a whole file at once.

CLASSIFY_SQL reads a relation ``timed`` (lineno, ts, host, sev, tag, pid, up, msg) and yields the events
columns. Each matcher runs its regex only on lines that pass a cheap substring test, so a line costs a
handful of ``contains`` scans plus at most one or two regexes. The few events that need a neighbouring
line (AER bit names, Xid 154's subject, OOM line pairs) are completed by the small POST_SQL updates.
"""

from __future__ import annotations

from synestra_cli.formats.hosts import short_host_sql

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

# Regexes (RE2), passed as parameters. Formats: ../shared/reference/log-formats.md section A.
PATTERNS: dict[str, str] = {
    # NVRM: Xid (PCI:0000:9b:00 GPU-I:05): 94, pid=7194, name=python, text   (PCI: and pid/name optional)
    "xid_re": r"NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})(?:\.([0-7]))?"
    r"(?: GPU-I:(\d+))?(?: GPU-CI:(\d+))?\): (\d+), (?:pid=([^,]*), )?(?:name=([^,]*), )?(.*)",
    # NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus. | NVRM: The NVIDIA GPU 0000:b3:00.0 <folded lines>
    # (also the older `NVRM: GPU at 0000:01:00.0 has fallen off the bus.`)
    "fob_re": r"NVRM: (?:The NVIDIA )?GPU (?:at (?:PCI:)?)?([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})"
    r"(?:\.([0-7]))?",
    # mlx5_core 0000:01:00.1 eth1: Link up | mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE
    "link_re": r"^mlx5_core (" + _BDF + r") (\S+): (?:Port: (\d+) )?Link (\w+)",
    # mlx5_core 0004:01:00.0: [func:line:(pid N): ]Port module event[error]: module 0, Cable error, High Temperature
    "module_re": r"^\S+?(?: (" + _BDF + r"))?: (?:\S+:\d+:\(pid \d+\): )?Port module event(\[error\])?: "
    r"module (\d+), ([^,]+)(?:, (.*))?$",
    # pcieport 0000:00:02.0: [AER: ]PCIe Bus Error: severity=Uncorrected (Fatal), type=Transaction Layer, ...
    "aer_re": r"^(\S+) (" + _BDF + r"): (?:AER: )?PCIe Bus Error: severity=([^,]+), type=([^,]+),\s*(.*)$",
    # Ethernet drivers' carrier messages (igb, igc, ixgbe, i40e, iavf, ice, bnxt_en, e1000, e1000e):
    # `igb 0000:00:14.0 eth0: igb: eth0 NIC Link is Down`, `e1000e: eth1 NIC Link is Up 1000 Mbps Full Duplex, ...`,
    # `ice 0000:10:00.1 ens1f1: NIC Link is up 25 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: RS-FEC`,
    # `bnxt_en 0000:3b:00.0 eno2np0: NIC Link is Up, 25000 Mbps full duplex, Flow control: ...`. (`ata1: SATA
    # link down` is a disk, not a NIC: it never says "NIC Link".)
    # Old e1000: `e1000: eth0: e1000_watchdog: NIC Link is Up`.
    "nic_re": r"^(?:(\S+?):? (?:(" + _BDF + r") )?(?:.*? )??)?(\S+?):? (?:\w+_watchdog: )?"
    r"NIC Link is (Up|Down|up|down),?(?: Speed is)?"
    r"(?: (\d+) ?([MG])bps)?(?: ([Ff]ull|[Hh]alf) [Dd]uplex)?(?:.*Negotiated FEC: ([^,]+))?",
    "nfs_re": r"^nfs: server (\S+) (not responding|OK)(?:, (.*))?$",
    # Lustre: [pid:0:(file.c:N:func()) ]fs-MDT0000-mdc-ffff: Connection (restored )to fs-MDT0000 (at nid)[ was lost]
    "lustre_re": r"^Lustre: (?:\d+:\d+:\(\S+\) )?(\S+): Connection (restored to|to) (\S+) \(at ([^)]+)\)( was lost)?",
    "oom_re": r"(Memory cgroup out of memory|Out of memory): Kill(?:ed)? process (\d+) \(([^)]*)\)",
    "nccl_re": r"(?:(\S+):(\d+):(\d+) )?(?:\[(\d+)\] )?NCCL WARN (.*)$",
    "pude_re": r"sx_netdev_handle_pude_event: Called for logical port - (\d+) status (UP|DOWN)",
    # `[267043.104677] rest`: a printk stamp still at the start of the message
    "printk_re": r"(?s)^\[ *(\d+\.\d+)\] (.*)$",
}

# One row per message line. Most lines are plain `log` lines: only those that pass CANDIDATE_SQL go
# through the matchers (m, k -> typed, each regex behind its own substring test) and join back by
# line number; the others get the plain-log columns directly.
# What some matcher's regex needs to match at all (or, for the fallen-off-bus and thermal tests, what
# their substring test needs): a line failing it would come out of the matchers as a plain log line.
# Seven scans and four prefix tests: ~0.17 s per 1M lines against ~0.2 s for one RE2 alternation.
CANDIDATE_SQL = """(starts_with(text, 'mlx5_core ') OR starts_with(text, 'nfs: server ')
    OR starts_with(text, 'Lustre: ') OR starts_with(text, 'oom-kill:') OR contains(text, 'NVRM: ')
    OR contains(text, 'Port module event') OR contains(text, 'PCIe Bus Error') OR contains(text, ': Kill')
    OR contains(text, 'NCCL WARN') OR contains(text, 'sx_netdev_handle_pude_event') OR contains(text, 'temperature')
    OR contains(text, 'NIC Link is'))"""

# An Ethernet carrier event's fields: interface, driver (when the line names one), PCI address, speed in Mb/s.
NIC_FIELDS = """json_object('device', nic.dev,
    'driver', CASE WHEN nic.driver <> nic.dev THEN nullif(nic.driver, '') END,
    'pci', nullif(nic.pci, ''), 'state', lower(nic.state),
    'speed_mbps', TRY_CAST(nullif(nic.speed, '') AS INTEGER) * CASE WHEN nic.unit = 'G' THEN 1000 ELSE 1 END,
    'duplex', nullif(lower(nic.duplex), ''), 'fec', nullif(trim(nic.fec), ''))"""

CLASSIFY_SQL = (
    """
WITH s AS NOT MATERIALIZED (
    -- A printk stamp the envelope left in the message (journald MESSAGE of a kernel line forwarded
    -- through syslog, a collector's JSON): cut here, so that typed matching never depends on the envelope.
    SELECT *, CASE WHEN starts_with(msg, '[') THEN regexp_extract(msg, $printk_re, ['up', 'rest']) END AS st
    FROM timed
), t AS NOT MATERIALIZED (
    SELECT lineno, ts, sev, coalesce(up, TRY_CAST(nullif(st.up, '') AS DOUBLE)) AS up, tag, pid,
        coalesce({short_host}, $host) AS host,
        CASE WHEN st.up <> '' THEN st.rest ELSE msg END AS text
    FROM s
), m AS (
    SELECT *,
        CASE WHEN contains(text, 'NVRM: Xid') THEN regexp_extract(text, $xid_re,
            ['dom', 'bus', 'dev', 'fn', 'gi', 'ci', 'code', 'xpid', 'pname', 'detail']) END AS xid,
        CASE WHEN contains(text, 'fallen off the bus') THEN regexp_extract(text, $fob_re,
            ['dom', 'bus', 'dev', 'fn']) END AS fob,
        CASE WHEN contains(text, ' Link ') THEN regexp_extract(text, $link_re,
            ['pci', 'dev', 'port', 'state']) END AS link,
        CASE WHEN contains(text, 'NIC Link is') THEN regexp_extract(text, $nic_re,
            ['driver', 'pci', 'dev', 'state', 'speed', 'unit', 'duplex', 'fec']) END AS nic,
        CASE WHEN contains(text, 'Port module event') THEN regexp_extract(text, $module_re,
            ['pci', 'err', 'module', 'status', 'error']) END AS pm,
        CASE WHEN contains(text, 'PCIe Bus Error') THEN regexp_extract(text, $aer_re,
            ['driver', 'dev', 'sev', 'type', 'rest']) END AS aer,
        CASE WHEN starts_with(text, 'nfs: server ') THEN regexp_extract(text, $nfs_re,
            ['server', 'state', 'mode']) END AS nfs,
        CASE WHEN starts_with(text, 'Lustre: ') AND contains(text, 'Connection ') THEN regexp_extract(text,
            $lustre_re, ['client', 'verb', 'target', 'nid', 'lost']) END AS lus,
        CASE WHEN contains(text, 'emory') AND contains(text, ': Kill') THEN regexp_extract(text, $oom_re,
            ['kind', 'pid', 'proc']) END AS oom,
        starts_with(text, 'oom-kill:') AS oomk,
        CASE WHEN contains(text, 'NCCL WARN') THEN regexp_extract(text, $nccl_re,
            ['node', 'pid', 'tid', 'dev', 'what']) END AS nccl,
        CASE WHEN contains(text, 'sx_netdev_handle_pude_event') THEN regexp_extract(text, $pude_re,
            ['port', 'state']) END AS pude,
        contains(text, 'High temperature') OR contains(text, 'temperature above threshold') AS hot
    FROM t WHERE {candidate}
), ms AS (
    -- the name before "Connection" is a server target (no -mdc/-osc/-lwp client suffix): a server's line
    SELECT *, coalesce(regexp_full_match(lus.client, '(MGS|[\\w.-]+-(MDT|OST)[0-9a-fA-F]{4})'), false) AS lus_server
    FROM m
), k AS (
    SELECT *, CASE
        WHEN xid.code <> '' THEN 'xid'
        WHEN fob.dom <> '' THEN 'gpu_fell_off_bus'
        WHEN link.port <> '' THEN 'ib_port_state'
        WHEN lower(link.state) = 'up' THEN 'link_up'
        WHEN lower(link.state) = 'down' THEN 'link_down'
        WHEN lower(nic.state) = 'up' THEN 'link_up'
        WHEN lower(nic.state) = 'down' THEN 'link_down'
        WHEN pm.module <> '' THEN 'port_module'
        WHEN aer.dev <> '' THEN 'aer'
        WHEN nfs.state = 'OK' THEN 'nfs_ok'
        WHEN nfs.state <> '' THEN 'nfs_not_responding'
        WHEN lus.verb = 'restored to' THEN 'lustre_restored'
        WHEN lus.lost <> '' THEN 'lustre_lost'
        WHEN oom.pid <> '' OR oomk THEN 'oom_kill'
        WHEN nccl.what <> '' THEN 'nccl_warn'
        WHEN pude.state = 'UP' THEN 'link_up'
        WHEN pude.state = 'DOWN' THEN 'link_down'
        WHEN hot THEN 'thermal'
        ELSE 'log' END AS kind
    FROM ms
), typed AS (
SELECT lineno,
    CASE kind
        WHEN 'xid' THEN upper(lpad(xid.dom, 8, '0') || ':' || xid.bus || ':' || xid.dev || '.'
                              || coalesce(nullif(xid.fn, ''), '0'))
        WHEN 'gpu_fell_off_bus' THEN upper(lpad(fob.dom, 8, '0') || ':' || fob.bus || ':' || fob.dev || '.'
                                           || coalesce(nullif(fob.fn, ''), '0'))
        WHEN 'ib_port_state' THEN link.dev || CASE WHEN link.port = '1' THEN '' ELSE ':' || link.port END
        WHEN 'port_module' THEN nullif(pm.pci, '')
        WHEN 'aer' THEN aer.dev
        WHEN 'nfs_ok' THEN nfs.server
        WHEN 'nfs_not_responding' THEN nfs.server
        WHEN 'lustre_restored' THEN CASE WHEN lus_server THEN lus.client ELSE lus.target END
        WHEN 'lustre_lost' THEN CASE WHEN lus_server THEN lus.client ELSE lus.target END
        ELSE CASE WHEN link.dev <> '' THEN link.dev WHEN nic.dev <> '' THEN nic.dev
                  WHEN pude.port <> '' THEN pude.port END
    END AS component,
    kind,
    CASE WHEN kind = 'xid' THEN TRY_CAST(xid.code AS INTEGER) END AS code,
    CASE kind
        WHEN 'log' THEN CASE WHEN tag IS NOT NULL OR up IS NOT NULL
                             THEN json_object('tag', tag, 'pid', pid, 'uptime_s', up) END
        WHEN 'xid' THEN json_object('xid', TRY_CAST(xid.code AS INTEGER),
            'pid', TRY_CAST(trim(xid.xpid, '''') AS BIGINT), 'process', nullif(nullif(xid.pname, ''), '<unknown>'),
            'gpu_instance', TRY_CAST(nullif(xid.gi, '') AS INTEGER),
            'compute_instance', TRY_CAST(nullif(xid.ci, '') AS INTEGER),
            'refers_to_xid',
                TRY_CAST(nullif(regexp_extract(xid.detail, 'caused by previous Xid (\\d+)', 1), '') AS INTEGER),
            'recovery_action',
                nullif(regexp_extract(xid.detail, 'action changed from .* to 0x\\w+ \\(([^)]*)\\)', 1), ''),
            'nvlink', TRY_CAST(nullif(regexp_extract(xid.detail, '[Ll]ink (-?\\d+)', 1), '') AS INTEGER),
            'text', xid.detail, 'uptime_s', up)
        WHEN 'gpu_fell_off_bus' THEN json_object('uptime_s', up)
        WHEN 'ib_port_state' THEN json_object('device', link.dev, 'port', TRY_CAST(link.port AS INTEGER),
            'state', upper(link.state), 'pci', link.pci)
        WHEN 'port_module' THEN json_object('pci', nullif(pm.pci, ''), 'module', TRY_CAST(pm.module AS INTEGER),
            'status', pm.status, 'error', nullif(pm.error, ''))
        WHEN 'aer' THEN json_object('severity', CASE WHEN contains(lower(aer.sev), 'non-fatal') THEN 'non_fatal'
                                                     WHEN contains(lower(aer.sev), 'fatal') THEN 'fatal'
                                                     ELSE 'corrected' END,
            'device', aer.dev, 'driver', aer.driver, 'type', aer.type, 'agent', nullif(aer.rest, ''))
        WHEN 'nfs_ok' THEN json_object('server', nfs.server)
        WHEN 'nfs_not_responding' THEN json_object('server', nfs.server, 'mode', nullif(nfs.mode, ''))
        WHEN 'lustre_restored' THEN CASE WHEN lus_server
            -- a server (MGS, fs-MDT0000, fs-OST0001) names the client that reconnected: roles kept, not swapped
            THEN json_object('role', 'server', 'server', lus.client, 'client', lus.target, 'client_nid', lus.nid)
            ELSE json_object('target', lus.target, 'server_nid', lus.nid, 'client', lus.client) END
        WHEN 'lustre_lost' THEN CASE WHEN lus_server
            THEN json_object('role', 'server', 'server', lus.client, 'client', lus.target, 'client_nid', lus.nid)
            ELSE json_object('target', lus.target, 'server_nid', lus.nid, 'client', lus.client) END
        WHEN 'oom_kill' THEN CASE WHEN oomk THEN json_object(
                'pid', TRY_CAST(nullif(regexp_extract(text, ',pid=(\\d+)', 1), '') AS BIGINT),
                'process', nullif(regexp_extract(text, ',task=([^,]*)', 1), ''),
                'constraint', nullif(regexp_extract(text, 'constraint=([^,]*)', 1), ''))
            ELSE json_object('pid', TRY_CAST(oom.pid AS BIGINT), 'process', oom.proc,
                'constraint', CASE WHEN oom.kind = 'Memory cgroup out of memory' THEN 'CONSTRAINT_MEMCG' END) END
        WHEN 'nccl_warn' THEN json_object('node', nullif(nccl.node, ''),
            'pid', TRY_CAST(nullif(nccl.pid, '') AS BIGINT),
            'cuda_dev', TRY_CAST(nullif(nccl.dev, '') AS INTEGER), 'text', nccl.what)
        WHEN 'link_up' THEN CASE WHEN nic.dev <> '' THEN {nic_fields} ELSE json_object(
            'device', coalesce(nullif(link.dev, ''), 'sx_netdev'),
            'port', TRY_CAST(nullif(pude.port, '') AS INTEGER), 'state', 'up', 'pci', nullif(link.pci, '')) END
        WHEN 'link_down' THEN CASE WHEN nic.dev <> '' THEN {nic_fields} ELSE json_object(
            'device', coalesce(nullif(link.dev, ''), 'sx_netdev'),
            'port', TRY_CAST(nullif(pude.port, '') AS INTEGER), 'state', 'down', 'pci', nullif(link.pci, '')) END
        ELSE json_object('uptime_s', up)
    END AS fields
FROM k
)
SELECT t.ts, t.host, y.component, coalesce(y.kind, 'log') AS kind, y.code, t.sev AS severity, t.text AS message,
    CASE WHEN y.lineno IS NOT NULL THEN y.fields
         WHEN t.tag IS NOT NULL OR t.up IS NOT NULL THEN json_object('tag', t.tag, 'pid', t.pid, 'uptime_s', t.up)
    END AS fields,
    t.lineno
FROM t LEFT JOIN typed y ON y.lineno = t.lineno
""".replace("{candidate}", CANDIDATE_SQL)
    .replace("{nic_fields}", NIC_FIELDS)
    .replace("{short_host}", short_host_sql("host"))
)

# Neighbour-line completions, each over the few typed events of one source ($sid).
_AER_BIT_RE = r"^\S+ (\S+): (?:AER: )?\s+\[\s*\d+\] (.*?)\s*(?:\(First\))?\s*$"
_AER_HEAD_RE = r"^\S+ (\S+): AER: .*error (?:message )?received(?: from|:) (?:id=)?(\S+)"
# (kind, sql, params): each runs only when the file has events of that kind (the AER one joins a
# range of the file's lines: ~0.1 s per 1M lines for nothing otherwise).
POST_SQL: list[tuple[str, str, dict[str, str]]] = [
    # AER: the error bits named on the lines after the severity line, the source from the line before.
    (
        "aer",
        """
UPDATE events e SET fields = json_merge_patch(e.fields, json_object('errors', d.errors, 'source', d.src))
FROM (
    SELECT a.line,
        list(trim(regexp_extract(n.message, $bit_re, 2)) ORDER BY n.line)
            FILTER (WHERE n.line > a.line AND n.line < a.next_line
                    AND regexp_extract(n.message, $bit_re, 1) = a.component) AS errors,
        max(regexp_extract(n.message, $head_re, 2))
            FILTER (WHERE n.line < a.line AND regexp_extract(n.message, $head_re, 1) = a.component) AS src
    FROM (SELECT line, host, component, coalesce(lead(line) OVER (PARTITION BY host, component ORDER BY line),
                                                 line + 7) AS next_line
          FROM events WHERE source_id = $sid AND kind = 'aer') a
    JOIN events n ON n.source_id = $sid AND n.line BETWEEN a.line - 2 AND a.line + 6
        AND n.host IS NOT DISTINCT FROM a.host AND n.kind = 'log'
    GROUP BY a.line
) d
WHERE e.source_id = $sid AND e.kind = 'aer' AND e.line = d.line
""",
        {"bit_re": _AER_BIT_RE, "head_re": _AER_HEAD_RE},
    ),
    # Xid 154 announces the recovery action for the GPU's previous Xid: name that Xid.
    (
        "xid",
        """
UPDATE events e SET fields = json_merge_patch(e.fields, json_object('refers_to_xid', p.code))
FROM (
    SELECT a.line, arg_max(b.code, b.line) AS code
    FROM events a JOIN events b ON b.source_id = a.source_id AND b.kind = 'xid' AND b.code <> 154
        AND b.component = a.component AND b.host IS NOT DISTINCT FROM a.host AND b.line < a.line
    WHERE a.source_id = $sid AND a.kind = 'xid' AND a.code = 154
    GROUP BY a.line
) p
WHERE e.source_id = $sid AND e.line = p.line
""",
        {},
    ),
    # Newer kernels print `oom-kill:constraint=...,pid=N` then `Out of memory: Killed process N (...)`:
    # one kill, so the second line stays a plain log line.
    (
        "oom_kill",
        """
UPDATE events e SET kind = 'log', fields = json_object('same_kill_as_line', k.line)
FROM events k
WHERE e.source_id = $sid AND e.kind = 'oom_kill' AND NOT starts_with(e.message, 'oom-kill:')
    AND k.source_id = $sid AND k.kind = 'oom_kill' AND starts_with(k.message, 'oom-kill:')
    AND k.host IS NOT DISTINCT FROM e.host AND k.line BETWEEN e.line - 5 AND e.line - 1
    AND json_extract(k.fields, '$.pid') = json_extract(e.fields, '$.pid')
""",
        {},
    ),
]
