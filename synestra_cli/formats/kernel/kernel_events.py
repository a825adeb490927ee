"""Typed events from kernel/syslog message text, as DuckDB SQL over a whole file at once.

CLASSIFY_SQL (kernel_events_classify.sql) reads a relation ``timed`` (sid, lineno, ts, host, sev, tag, pid,
up, msg) and yields the events columns. Each matcher runs its regex only on lines that pass a cheap
substring test, so a line costs a handful of ``contains`` scans plus at most one or two regexes. The
few events that need a neighbouring line (AER bit names, Xid 154's subject, OOM line pairs) are
completed by the small POST_SQL updates.
"""

from __future__ import annotations

from synestra_cli.formats.hosts import short_host_sql
from synestra_cli.store.sql import sql_file

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
    # Firmware-first PCIe errors (APEI GHES, drivers/firmware/efi/cper.c): `{10}[Hardware Error]:   section_type:
    # PCIe error`, the device on a later `device_id: 0000:60:03.1` line of the same report (POST_SQL)
    "ghes_re": r"^(?:\{(\d+)\})?\[Hardware Error\]:\s+section_type: PCIe error",
    # drivers/edac/edac_mc.c: `EDAC MC1: 262 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 …)`,
    # `EDAC MC3: 1 UE memory read error on …`, ghes_edac `EDAC MC0: 1 CE Memory read error on DIMM_A1 (…)`
    "edac_re": r"(?:^|: )EDAC (MC\d+): (\d+) (CE|UE) (.*?) on (\S+)(?: \((.*)\))?\s*$",
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
    OR contains(text, 'NIC Link is') OR contains(text, 'section_type: PCIe error') OR contains(text, 'EDAC MC'))"""

# An Ethernet carrier event's fields: interface, driver (when the line names one), PCI address, speed in Mb/s.
NIC_FIELDS = """json_object('device', nic.dev,
    'driver', CASE WHEN nic.driver <> nic.dev THEN nullif(nic.driver, '') END,
    'pci', nullif(nic.pci, ''), 'state', lower(nic.state),
    'speed_mbps', TRY_CAST(nullif(nic.speed, '') AS INTEGER) * CASE WHEN nic.unit = 'G' THEN 1000 ELSE 1 END,
    'duplex', nullif(lower(nic.duplex), ''), 'fec', nullif(trim(nic.fec), ''))"""

# The statement itself (~140 lines) is kernel_events_classify.sql; the three fragments above are spliced in.
CLASSIFY_SQL = (
    sql_file(__package__, "kernel_events_classify.sql")
    .replace("{candidate}", CANDIDATE_SQL)
    .replace("{nic_fields}", NIC_FIELDS)
    .replace("{short_host}", short_host_sql("host"))
)

# Neighbour-line completions, each over the few typed events of the sources staged ($sids).
_AER_BIT_RE = r"^\S+ (\S+): (?:AER: )?\s+\[\s*\d+\] (.*?)\s*(?:\(First\))?\s*$"
_AER_HEAD_RE = r"^\S+ (\S+): AER: .*error (?:message )?received(?: from|:) (?:id=)?(\S+)"
# (kind, sql, params): each runs only when the file has events of that kind (the AER one joins a
# range of the file's lines: ~0.1 s per 1M lines for nothing otherwise).
POST_SQL: list[tuple[str, str, dict[str, str]]] = [
    # A firmware-first PCIe report: its device (the `device_id: <bdf>` line after the section type), the
    # section's severity (`Error N, type: fatal` just before; GHES's recoverable is AER's non-fatal) and the
    # device's PCI ids, from the lines of the same report (`{N}`) around it.
    (
        "aer",
        """
UPDATE events e SET component = d.dev, fields = json_merge_patch(e.fields, json_object('device', d.dev,
    'severity', CASE d.sev WHEN 'recoverable' THEN 'non_fatal' ELSE d.sev END, 'port_type', d.port_type,
    'pci_id', d.ids, 'aer_uncor_status', d.uncor))
FROM (
    SELECT a.source_id, a.line,
        arg_min(regexp_extract(n.message, $bdf_re, 1), n.line)
            FILTER (WHERE n.line > a.line AND regexp_matches(n.message, $bdf_re)) AS dev,
        arg_max(lower(regexp_extract(n.message, 'Error \\d+, type: (\\w+)', 1)), n.line)
            FILTER (WHERE n.line < a.line AND regexp_matches(n.message, 'Error \\d+, type: \\w+')) AS sev,
        arg_min(regexp_extract(n.message, 'port_type: \\d+, (.*?)\\s*$', 1), n.line)
            FILTER (WHERE n.line > a.line AND contains(n.message, 'port_type: ')) AS port_type,
        arg_min(regexp_extract(n.message, 'vendor_id: 0x(\\w{4}), device_id: 0x(\\w{4})', 1) || ':'
                || regexp_extract(n.message, 'vendor_id: 0x(\\w{4}), device_id: 0x(\\w{4})', 2), n.line)
            FILTER (WHERE n.line > a.line AND contains(n.message, 'vendor_id: 0x')) AS ids,
        arg_min(regexp_extract(n.message, 'aer_uncor_status: (0x\\w+)', 1), n.line)
            FILTER (WHERE n.line > a.line AND contains(n.message, 'aer_uncor_status: ')) AS uncor
    FROM (SELECT source_id, line, host, fields->>'report' AS report,
                 coalesce(lead(line) OVER (PARTITION BY source_id, host ORDER BY line), line + 16) AS next_line
          FROM events WHERE list_contains($sids, source_id) AND kind = 'aer' AND component IS NULL
              AND fields->>'reported_by' = 'firmware (APEI GHES)') a
    JOIN events n ON list_contains($sids, n.source_id) AND n.source_id = a.source_id
        AND n.line BETWEEN a.line - 4 AND least(a.next_line - 1, a.line + 16) AND n.host IS NOT DISTINCT FROM a.host
        AND n.kind = 'log' AND contains(n.message, '[Hardware Error]')
        AND coalesce(regexp_extract(n.message, '^\\{(\\d+)\\}', 1), '') = coalesce(a.report, '')
    GROUP BY a.source_id, a.line
) d
WHERE e.source_id = d.source_id AND e.kind = 'aer' AND e.line = d.line
""",
        {"bdf_re": r"\]:\s+device_id: (" + _BDF + r")"},
    ),
    # AER: the error bits named on the lines after the severity line, the source from the line before.
    (
        "aer",
        """
UPDATE events e SET fields = json_merge_patch(e.fields, json_object('errors', d.errors, 'source', d.src))
FROM (
    SELECT a.source_id, a.line,
        list(trim(regexp_extract(n.message, $bit_re, 2)) ORDER BY n.line)
            FILTER (WHERE n.line > a.line AND n.line < a.next_line
                    AND regexp_extract(n.message, $bit_re, 1) = a.component) AS errors,
        max(regexp_extract(n.message, $head_re, 2))
            FILTER (WHERE n.line < a.line AND regexp_extract(n.message, $head_re, 1) = a.component) AS src
    FROM (SELECT source_id, line, host, component,
                 coalesce(lead(line) OVER (PARTITION BY source_id, host, component ORDER BY line), line + 7)
                     AS next_line
          FROM events WHERE list_contains($sids, source_id) AND kind = 'aer') a
    JOIN events n ON list_contains($sids, n.source_id) AND n.source_id = a.source_id
        AND n.line BETWEEN a.line - 2 AND a.line + 6 AND n.host IS NOT DISTINCT FROM a.host AND n.kind = 'log'
    GROUP BY a.source_id, a.line
) d
WHERE e.source_id = d.source_id AND e.kind = 'aer' AND e.line = d.line
""",
        {"bit_re": _AER_BIT_RE, "head_re": _AER_HEAD_RE},
    ),
    # Xid 154 announces the recovery action for the GPU's previous Xid: name that Xid.
    (
        "xid",
        """
UPDATE events e SET fields = json_merge_patch(e.fields, json_object('refers_to_xid', p.code))
FROM (
    SELECT a.source_id, a.line, arg_max(b.code, b.line) AS code
    FROM events a JOIN events b ON b.source_id = a.source_id AND b.kind = 'xid' AND b.code <> 154
        AND b.component = a.component AND b.host IS NOT DISTINCT FROM a.host AND b.line < a.line
    WHERE list_contains($sids, a.source_id) AND a.kind = 'xid' AND a.code = 154
    GROUP BY a.source_id, a.line
) p
WHERE e.source_id = p.source_id AND e.line = p.line
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
WHERE list_contains($sids, e.source_id) AND e.kind = 'oom_kill' AND NOT starts_with(e.message, 'oom-kill:')
    AND k.source_id = e.source_id AND k.kind = 'oom_kill' AND starts_with(k.message, 'oom-kill:')
    AND k.host IS NOT DISTINCT FROM e.host AND k.line BETWEEN e.line - 5 AND e.line - 1
    AND json_extract(k.fields, '$.pid') = json_extract(e.fields, '$.pid')
""",
        {},
    ),
]
