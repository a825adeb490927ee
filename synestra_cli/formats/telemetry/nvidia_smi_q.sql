-- nvidia-smi -q: every line placed in its GPU block and section path, in one pass of window functions.
-- Sections nest by 4 blanks: a line at depth d lies under the last lines at depths 1 .. d-1 before it
-- (nothing shallower can come between a line and its parents). `nvidia-smi -q -l N` repeats the whole
-- log: each `Timestamp` line starts a capture, whose GPUs are numbered again from 0 (NVML's order).
CREATE OR REPLACE TEMP TABLE _nvq AS
WITH l AS (
    SELECT lineno, line,
           (length(line) - length(ltrim(line, ' '))) // 4 AS depth,
           regexp_extract(line, '^\s*(\S.*?)\s+:\s?(.*)$', ['k', 'v']) AS kv,
           regexp_extract(line, '^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$', 1) AS hdr
    FROM _nvq_lines
), c AS (
    SELECT lineno, line, depth, hdr <> '' AS is_gpu, upper(lpad(hdr, 16, '0')) AS hdr_bus,
           CASE WHEN kv.k <> '' THEN kv.k ELSE trim(line) END AS key,
           CASE WHEN kv.k <> '' THEN trim(kv.v) END AS value
    FROM l
), w AS (
    SELECT *,
           count(*) FILTER (WHERE depth = 0 AND key = 'Timestamp') OVER run AS capture,
           last_value(CASE WHEN depth = 0 AND key = 'Timestamp' THEN value END IGNORE NULLS) OVER run AS stamp,
           last_value(CASE WHEN is_gpu THEN hdr_bus END IGNORE NULLS) OVER run AS bus,
           count(*) FILTER (WHERE is_gpu) OVER run AS gpus_so_far,
           last_value(CASE WHEN depth = 1 THEN key END IGNORE NULLS) OVER run AS p1,
           last_value(CASE WHEN depth = 2 THEN key END IGNORE NULLS) OVER run AS p2,
           last_value(CASE WHEN depth = 3 THEN key END IGNORE NULLS) OVER run AS p3
    FROM c WINDOW run AS (ORDER BY lineno ROWS UNBOUNDED PRECEDING)
), g AS (
    SELECT *,
           gpus_so_far - coalesce(min(gpus_so_far) FILTER (WHERE depth = 0 AND key = 'Timestamp')
                                  OVER (PARTITION BY capture), 0) - 1 AS gpu_index,
           max(CASE WHEN depth = 0 AND key = 'Attached GPUs' THEN try_cast(value AS INTEGER) END)
               OVER (PARTITION BY capture) AS attached,
           count(*) FILTER (WHERE is_gpu) OVER (PARTITION BY capture) AS listed
    FROM w
)
SELECT lineno, line, depth, key, value, is_gpu, capture, bus,
       CASE WHEN bus IS NOT NULL AND depth >= 1 THEN gpu_index END AS gpu_index,
       attached, listed,
       coalesce(to_utc(try_strptime(leap_second(regexp_replace(stamp, '\s+', ' ', 'g')), ['%a %b %d %H:%M:%S %Y', '%a %b %d %H:%M:%S.%f %Y']), $tz), $mtime)
           AS ts,
       concat_ws('/', CASE WHEN depth > 1 THEN p1 END, CASE WHEN depth > 2 THEN p2 END,
                 CASE WHEN depth > 3 THEN p3 END, key) AS path,
       try_cast(regexp_extract(value, '^(-?[0-9]+(?:\.[0-9]+)?)(?:\s*\S*)$', 1) AS DOUBLE) AS number,
       CASE WHEN value IN ('Yes', 'Active') THEN 1.0 WHEN value IN ('No', 'Not Active') THEN 0.0 END AS flag,
       CASE
           WHEN trim(line) = '' OR is_gpu OR regexp_matches(trim(line), '^=+\s*NVSMI LOG\s*=+$') THEN NULL
           WHEN depth = 0 AND value IS NULL THEN 'not an nvidia-smi -q `Key : value` line, section title or GPU header'
           WHEN depth >= 1 AND bus IS NULL THEN 'a GPU attribute before any `GPU <bus id>` line'
       END AS reason
FROM g;

-- One row per GPU block of each capture: identity and the time of its capture.
CREATE OR REPLACE TEMP TABLE _nvq_gpus AS
SELECT capture, bus, any_value(gpu_index) AS gpu_index, any_value(ts) AS ts, min(lineno) AS line,
       CASE WHEN any_value(attached) = any_value(listed) THEN 'gpu' || any_value(gpu_index)::VARCHAR
            ELSE any_value(bus) END AS entity,
       max(value) FILTER (WHERE path = 'GPU UUID' AND value LIKE 'GPU-%') AS uuid,
       max(value) FILTER (WHERE path = 'Product Name') AS model,
       max(value) FILTER (WHERE path = 'Serial Number' AND value NOT IN ('N/A', '')) AS serial,
       max(value) FILTER (WHERE path = 'Board Part Number' AND value <> 'N/A') AS board_part,
       max(value) FILTER (WHERE path = 'GPU Part Number' AND value <> 'N/A') AS gpu_part,
       max(value) FILTER (WHERE path = 'VBIOS Version') AS vbios
FROM _nvq WHERE bus IS NOT NULL AND depth >= 1 GROUP BY capture, bus;

-- Samples: every kept numeric (or Yes/No) leaf under its canonical name or `nvsmi_<path>`; the canonical
-- sums (ECC split into SRAM and DRAM parts) and the clocks-event bitmask of each GPU.
CREATE OR REPLACE TEMP TABLE _nvq_metrics AS
WITH leaves AS (
    SELECT q.capture, q.bus, q.path, coalesce(q.number, q.flag) AS value, m.metric, m.how
    FROM _nvq q LEFT JOIN _nvq_map m ON m.path = q.path
    WHERE q.bus IS NOT NULL AND q.depth >= 1 AND q.value IS NOT NULL
      AND (m.metric IS NOT NULL OR len(list_filter($keep, lambda p: starts_with(q.path, p))) > 0)
), named AS (
    SELECT capture, bus, coalesce(metric, 'nvsmi_' || trim(regexp_replace(lower(path), '[^a-z0-9]+', '_', 'g'), '_'))
               AS metric, CASE WHEN how = 'sum' THEN 'sum' ELSE 'one' END AS how, value
    FROM leaves WHERE value IS NOT NULL OR how = 'sum'
), summed AS (
    SELECT capture, bus, metric, CASE WHEN how = 'sum' THEN sum(value) ELSE any_value(value) END AS value
    FROM named GROUP BY capture, bus, metric, how
), bits AS (
    SELECT q.capture, q.bus, 'gpu_clock_events_bitmask' AS metric,
           sum(CASE WHEN q.value = 'Active' THEN b.bit ELSE 0 END)::DOUBLE AS value
    FROM _nvq q JOIN _nvq_bits b ON b.reason = q.key
    WHERE q.depth >= 2 AND regexp_matches(q.path, '^Clocks (Event|Throttle) Reasons/')
      AND q.value IN ('Active', 'Not Active')
    GROUP BY q.capture, q.bus
)
SELECT g.ts, $host AS host, g.entity, s.metric, s.value
FROM (SELECT * FROM summed UNION ALL SELECT * FROM bits) s JOIN _nvq_gpus g USING (capture, bus);

-- Events: each GPU's identity (serial, part numbers: what a replacement ticket names) and what the
-- snapshot says is wrong with it.
CREATE OR REPLACE TEMP TABLE _nvq_events AS
WITH facts AS (
    SELECT capture, bus,
           max(flag) FILTER (WHERE path = 'Remapped Rows/Pending') AS remap_pending,
           max(flag) FILTER (WHERE path = 'Remapped Rows/Remapping Failure Occurred') AS remap_failed,
           max(number) FILTER (WHERE path = 'Remapped Rows/Uncorrectable Error') AS remapped_uncorrectable,
           max(flag) FILTER (WHERE path IN ('Retired Pages/Pending Page Blacklist', 'Retired Pages/Pending'))
               AS retire_pending,
           max(flag) FILTER (WHERE path IN ('GPU Reset Status/Reset Required',
                                            'GPU Reset Status/Drain and Reset Recommended')) AS reset_required,
           max(number) FILTER (WHERE path = 'PCI/GPU Link Info/Link Width/Current') AS width,
           max(number) FILTER (WHERE path = 'PCI/GPU Link Info/Link Width/Max') AS width_max
    FROM _nvq WHERE bus IS NOT NULL GROUP BY capture, bus
), alerts AS (
    SELECT capture, bus, 'gpu_row_remap_failure' AS kind, 'error' AS severity,
           'row remapping failed' AS what, NULL::DOUBLE AS n FROM facts WHERE remap_failed = 1
    UNION ALL SELECT capture, bus, 'gpu_row_remap_pending', 'warning',
           'row remapping pending a GPU reset (' || coalesce(remapped_uncorrectable, 0)::BIGINT::VARCHAR
           || ' rows remapped for uncorrectable errors)', remapped_uncorrectable FROM facts WHERE remap_pending = 1
    UNION ALL SELECT capture, bus, 'gpu_retired_pages_pending', 'warning', 'page retirement pending a reboot', NULL
    FROM facts WHERE retire_pending = 1
    UNION ALL SELECT capture, bus, 'gpu_reset_required', 'warning', 'GPU reset required', NULL
    FROM facts WHERE reset_required = 1
    UNION ALL SELECT capture, bus, 'gpu_pcie_width_degraded', 'warning',
           'PCIe link at x' || width::BIGINT::VARCHAR || ' of x' || width_max::BIGINT::VARCHAR, width
    FROM facts WHERE width < width_max
)
SELECT g.ts, $host AS host, g.bus AS component, 'gpu_identity' AS kind, NULL::INTEGER AS code, 'info' AS severity,
       'nvidia-smi: GPU ' || g.bus || ' ' || coalesce(g.model, '') || coalesce(' serial ' || g.serial, '')
           || coalesce(' ' || g.uuid, '') AS message,
       json_object('uuid', g.uuid, 'serial', g.serial, 'pci_bus_id', g.bus, 'entity', g.entity,
                   'product', g.model, 'board_part', g.board_part, 'gpu_part', g.gpu_part, 'vbios', g.vbios,
                   'driver', (SELECT max(value) FROM _nvq WHERE depth = 0 AND key = 'Driver Version'),
                   'tool', 'nvidia-smi') AS fields,
       g.line
FROM _nvq_gpus g
UNION ALL
SELECT g.ts, $host, g.bus, a.kind, NULL, a.severity, 'nvidia-smi: GPU ' || g.bus || ' ' || a.what,
       json_object('pci_bus_id', g.bus, 'entity', g.entity, 'uuid', g.uuid, 'serial', g.serial, 'count', a.n,
                   'tool', 'nvidia-smi'),
       g.line
FROM alerts a JOIN _nvq_gpus g USING (capture, bus);
