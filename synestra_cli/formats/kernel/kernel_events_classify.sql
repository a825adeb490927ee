WITH s AS NOT MATERIALIZED (
    -- A printk stamp the envelope left in the message (journald MESSAGE of a kernel line forwarded
    -- through syslog, a collector's JSON): cut here, so that typed matching never depends on the envelope.
    SELECT *, CASE WHEN starts_with(msg, '[') THEN regexp_extract(msg, $printk_re, ['up', 'rest']) END AS st
    FROM timed
), t AS NOT MATERIALIZED (
    SELECT sid, lineno, ts, sev, coalesce(up, TRY_CAST(nullif(st.up, '') AS DOUBLE)) AS up, tag, pid,
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
        CASE WHEN contains(text, 'section_type: PCIe error') THEN regexp_extract(text, $ghes_re,
            ['report']) END AS ghes,
        CASE WHEN contains(text, 'EDAC MC') THEN regexp_extract(text, $edac_re,
            ['mc', 'n', 'sev', 'what', 'loc', 'detail']) END AS edac,
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
    SELECT *, coalesce(regexp_full_match(lus.client, '(MGS|[\w.-]+-(MDT|OST)[0-9a-fA-F]{4})'), false) AS lus_server
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
        WHEN ghes IS NOT NULL AND regexp_matches(text, $ghes_re) THEN 'aer'
        WHEN edac.mc <> '' THEN 'edac'
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
SELECT sid, lineno,
    CASE kind
        WHEN 'xid' THEN upper(lpad(xid.dom, 8, '0') || ':' || xid.bus || ':' || xid.dev || '.'
                              || coalesce(nullif(xid.fn, ''), '0'))
        WHEN 'gpu_fell_off_bus' THEN upper(lpad(fob.dom, 8, '0') || ':' || fob.bus || ':' || fob.dev || '.'
                                           || coalesce(nullif(fob.fn, ''), '0'))
        WHEN 'ib_port_state' THEN link.dev || CASE WHEN link.port = '1' THEN '' ELSE ':' || link.port END
        WHEN 'port_module' THEN nullif(pm.pci, '')
        WHEN 'aer' THEN nullif(aer.dev, '')
        WHEN 'edac' THEN edac.mc || '/' || edac.loc
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
                TRY_CAST(nullif(regexp_extract(xid.detail, 'caused by previous Xid (\d+)', 1), '') AS INTEGER),
            'recovery_action',
                nullif(regexp_extract(xid.detail, 'action changed from .* to 0x\w+ \(([^)]*)\)', 1), ''),
            'nvlink', TRY_CAST(nullif(regexp_extract(xid.detail, '[Ll]ink (-?\d+)', 1), '') AS INTEGER),
            'text', xid.detail, 'uptime_s', up)
        WHEN 'gpu_fell_off_bus' THEN json_object('uptime_s', up)
        WHEN 'ib_port_state' THEN json_object('device', link.dev, 'port', TRY_CAST(link.port AS INTEGER),
            'state', upper(link.state), 'pci', link.pci)
        WHEN 'port_module' THEN json_object('pci', nullif(pm.pci, ''), 'module', TRY_CAST(pm.module AS INTEGER),
            'status', pm.status, 'error', nullif(pm.error, ''))
        WHEN 'aer' THEN CASE WHEN ghes.report IS NOT NULL AND coalesce(aer.dev, '') = '' THEN json_object(
            'reported_by', 'firmware (APEI GHES)', 'report', nullif(ghes.report, ''), 'type', 'PCIe error')
        ELSE json_object('severity', CASE WHEN contains(lower(aer.sev), 'non-fatal') THEN 'non_fatal'
                                                     WHEN contains(lower(aer.sev), 'fatal') THEN 'fatal'
                                                     ELSE 'corrected' END,
            'device', aer.dev, 'driver', aer.driver, 'type', aer.type, 'agent', nullif(aer.rest, '')) END
        WHEN 'edac' THEN json_object('severity', CASE edac.sev WHEN 'UE' THEN 'uncorrected' ELSE 'corrected' END,
            'count', TRY_CAST(edac.n AS BIGINT), 'error', edac.what, 'mc', edac.mc, 'location', edac.loc,
            'detail', nullif(edac.detail, ''), 'uptime_s', up)
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
                'pid', TRY_CAST(nullif(regexp_extract(text, ',pid=(\d+)', 1), '') AS BIGINT),
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
    t.sid, t.lineno
FROM t LEFT JOIN typed y ON y.sid = t.sid AND y.lineno = t.lineno
