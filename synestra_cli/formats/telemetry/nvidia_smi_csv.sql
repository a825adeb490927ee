-- nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]: one row per GPU per sample, the fields in
-- the order of the query. The layout ($names, $header_line) comes from the header or the echoed command.
CREATE OR REPLACE TEMP TABLE _nvc AS
WITH r AS (
    SELECT lineno, line, list_transform(string_split(line, ','), lambda x: trim(x)) AS p
    FROM _nvc_lines
    WHERE lineno > $header_line AND trim(line) <> '' AND trim(line) <> $header
)
SELECT lineno, line, p,
       CASE WHEN len(p) <> len($names)
            THEN 'expected ' || len($names)::VARCHAR || ' comma-separated fields (the query''s), found '
                 || len(p)::VARCHAR END AS reason
FROM r;

-- Long form: one value per field of each good row; `[N/A]`, `[Not Supported]`, `N/A` are no data.
CREATE OR REPLACE TEMP TABLE _nvc_cells AS
WITH cells AS (
    SELECT r.lineno, f.name, f.metric, r.p[f.i] AS text
    FROM _nvc r CROSS JOIN _nvc_fields f WHERE r.reason IS NULL
), rows AS (
    SELECT lineno,
           max(text) FILTER (WHERE name = 'index') AS idx,
           max(text) FILTER (WHERE name IN ('uuid', 'gpu_uuid')) AS uuid,
           max(text) FILTER (WHERE name IN ('name', 'gpu_name')) AS model,
           upper(lpad(max(text) FILTER (WHERE name IN ('pci.bus_id', 'gpu_bus_id')), 16, '0')) AS bus,
           max(text) FILTER (WHERE name IN ('serial', 'gpu_serial')) AS serial,
           max(text) FILTER (WHERE name = 'timestamp') AS stamp
    FROM cells GROUP BY lineno
)
SELECT c.lineno, c.name, c.metric, c.text, r.uuid, r.model, r.serial,
       CASE WHEN r.bus LIKE '%:%:%.%' THEN r.bus END AS bus,
       coalesce('gpu' || try_cast(r.idx AS INTEGER)::VARCHAR, CASE WHEN r.bus LIKE '%:%:%.%' THEN r.bus END,
                nullif(r.uuid, '')) AS entity,
       coalesce(to_utc(try_strptime(leap_second(r.stamp), ['%Y/%m/%d %H:%M:%S.%g', '%Y/%m/%d %H:%M:%S', '%Y/%m/%d %H:%M:%S.%f']), $tz), $mtime) AS ts,
       CASE WHEN c.text IN ('Yes', 'Enabled', 'Active') THEN 1.0
            WHEN c.text IN ('No', 'Disabled', 'Not Active') THEN 0.0
            WHEN regexp_matches(c.text, '^0x[0-9A-Fa-f]+$') THEN ('0x' || lower(c.text[3:]))::UBIGINT::DOUBLE
            WHEN regexp_matches(c.text, '^P[0-9]+$') THEN c.text[2:]::DOUBLE
            ELSE try_cast(regexp_extract(c.text, '^(-?[0-9]+(?:\.[0-9]+)?)(?:\s*(?:%|[KMG]iB|W|MHz|C|KB/s))?$', 1)
                          AS DOUBLE) END AS value
FROM cells c JOIN rows r USING (lineno);

CREATE OR REPLACE TEMP TABLE _nvc_metrics AS
SELECT ts, $host AS host, entity, metric, value FROM _nvc_cells WHERE metric IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _nvc_gpus AS
SELECT entity, any_value(bus) AS bus, any_value(uuid) AS uuid, any_value(model) AS model,
       any_value(nullif(nullif(serial, '[N/A]'), 'N/A')) AS serial, min(ts) AS ts, min(lineno) AS line
FROM _nvc_cells WHERE entity IS NOT NULL AND (uuid IS NOT NULL OR bus IS NOT NULL) GROUP BY entity;
