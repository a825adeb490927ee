-- dcgmi diag's table (dcgmi/Diag.cpp): `| <test, 25 wide> | <result, 46 wide> |` rows under section titles
-- (`|-----  Deployment  ----...`). A result is `Pass`, `Fail`, `Warn`, `Skip` for every GPU, or one GPU's
-- (`Fail - GPU: 0` in 3.x, `GPU0: Fail` on its own row in 4.x); `Warning` / `Info` rows, wrapped over
-- continuation rows with an empty test column, belong to the test above them (one GPU's result: only the
-- entries that name no other GPU).
CREATE OR REPLACE TEMP TABLE _diag AS
WITH l AS (
    SELECT lineno, line,
           regexp_extract(line, '^\|(.{27})\|(.*)\|\s*$', ['name', 'value']) AS c,
           regexp_extract(line, '^[|+]-----\s+(\w[\w ]*?)\s+-+\+', 1) AS section
    FROM _diag_lines
), r AS (
    SELECT lineno, line, nullif(section, '') AS section,
           CASE WHEN c.name <> '' OR c.value <> '' THEN trim(c.name) END AS name,
           CASE WHEN c.name <> '' OR c.value <> '' THEN trim(c.value) END AS value,
           -- a text cell filled to the border was cut mid-word: its next row continues it without a blank
           length(rtrim(c.value)) >= 46 AS filled
    FROM l
), s AS (
    SELECT *,
           last_value(section IGNORE NULLS) OVER w AS category,
           count(*) FILTER (WHERE name NOT IN ('', 'Warning', 'Info')) OVER w AS test_no,
           count(*) FILTER (WHERE name IN ('Warning', 'Info')) OVER w AS entry_no,
           last_value(CASE WHEN name NOT IN ('', 'Warning', 'Info') THEN name END IGNORE NULLS) OVER w AS test,
           last_value(CASE WHEN name IN ('Warning', 'Info') THEN name WHEN name <> '' THEN 'result' END IGNORE NULLS)
               OVER w AS part
    FROM r WINDOW w AS (ORDER BY lineno ROWS UNBOUNDED PRECEDING)
)
SELECT lineno, line, category, test, test_no, entry_no, part, name, value, filled,
       regexp_extract(value, '^(?:GPU(\d+): )?(Pass|Fail|Warn|Skip)(?: - GPU: (\d+))?$', ['gpu4', 'status', 'gpu3'])
           AS res,
       CASE WHEN trim(line) = '' OR section IS NOT NULL OR name IS NOT NULL THEN NULL
            WHEN regexp_matches(line, '^\+[-=+]+\+\s*$') THEN NULL
            WHEN lineno < coalesce((SELECT min(lineno) FROM l WHERE c.name <> '' OR section <> ''), 0) THEN NULL
            ELSE 'not a row of the dcgmi diag table' END AS reason
FROM s;

CREATE OR REPLACE TEMP TABLE _diag_results AS
WITH meta AS (
    SELECT max(value) FILTER (WHERE name = 'DCGM Version') AS dcgm,
           max(value) FILTER (WHERE name = 'Driver Version Detected') AS driver
    FROM _diag WHERE category = 'Metadata'
), entries AS (  -- each Warning / Info entry of a test, its wrapped rows joined; the GPU it names, if any
    SELECT test_no, entry_no, any_value(part) AS part, min(lineno) AS at,
           trim(string_agg(value || CASE WHEN filled THEN '' ELSE ' ' END, '' ORDER BY lineno)) AS text
    FROM _diag WHERE part IN ('Warning', 'Info') AND value <> '' GROUP BY test_no, entry_no
), results AS (
    SELECT d.lineno AS line, d.category, d.test, d.test_no, d.res.status AS status,
           TRY_CAST(coalesce(nullif(d.res.gpu4, ''), nullif(d.res.gpu3, '')) AS INTEGER) AS gpu
    FROM _diag d WHERE d.res.status <> '' AND d.part = 'result' AND coalesce(d.category, '') <> 'Metadata'
)
-- a result takes its test's entries, but not those naming another GPU (`GPU 0 Error ...` is not GPU 1's)
SELECT r.line, r.category, r.test, r.status, r.gpu,
       string_agg(e.text, ' ' ORDER BY e.at) FILTER (WHERE e.part = 'Warning') AS warning,
       string_agg(e.text, ' ' ORDER BY e.at) FILTER (WHERE e.part = 'Info') AS info,
       any_value(m.dcgm) AS dcgm, any_value(m.driver) AS driver
FROM results r CROSS JOIN meta m
LEFT JOIN entries e ON e.test_no = r.test_no
     AND (r.gpu IS NULL OR TRY_CAST(nullif(regexp_extract(e.text, '^GPU (\d+)\b', 1), '') AS INTEGER) IS NULL
          OR TRY_CAST(regexp_extract(e.text, '^GPU (\d+)\b', 1) AS INTEGER) = r.gpu)
GROUP BY r.line, r.category, r.test, r.status, r.gpu;
