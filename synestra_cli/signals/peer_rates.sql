-- Each series' rate over the hours read ({peer_hours}: one row per source, series and hour, as the store's
-- hourly summaries keep them), its metric's peers (the job's series of that metric on the same side: host
-- GPUs and NICs, or switch ports) on a log scale, and the series far enough above them to read raw.
-- A counter's increase within an hour is last - first when it never went backwards there (a reset: that
-- hour's own increase is unknown, and left out with its span); between two adjacent hours of a series it
-- is the next hour's first value less the previous hour's last, or that first value after a reset. Pairs
-- of overlapping sources (one series in two files) count no edge.
CREATE OR REPLACE TEMP TABLE {peer_rates} AS
WITH e AS (
    SELECT h.*, lag(last_v) OVER w AS p_v, lag(fin_last_ts) OVER w AS p_ts, lag(bucket) OVER w AS p_bucket
    FROM {peer_hours} h
    WINDOW w AS (PARTITION BY host, entity, metric ORDER BY fin_first_ts, fin_last_ts, source_id)
), parts AS (
    SELECT host, entity, metric, bucket,
           CASE WHEN backwards = 0 AND last_v >= first_v THEN last_v - first_v ELSE 0 END AS inner_inc,
           CASE WHEN backwards = 0 AND last_v >= first_v THEN epoch(fin_last_ts) - epoch(fin_first_ts) ELSE 0 END
               AS inner_s,
           p_ts IS NOT NULL AND fin_first_ts > p_ts AND bucket - p_bucket <= INTERVAL 1 HOUR AS edge
    , first_v, p_v, fin_first_ts, p_ts
    FROM e
), hourly AS (
    SELECT host, entity, metric, bucket,
           sum(inner_inc + CASE WHEN NOT edge THEN 0 WHEN first_v >= p_v THEN first_v - p_v ELSE first_v END) AS inc,
           sum(inner_s + CASE WHEN edge THEN epoch(fin_first_ts) - epoch(p_ts) ELSE 0 END) AS span
    FROM parts GROUP BY ALL
)
SELECT h.host, h.entity, h.metric, list_contains($switches, h.host) AS switch_side, sum(inc) AS events,
       sum(span) AS span_s, sum(inc) / sum(span) AS rate, max(inc / span) FILTER (span > 0) AS hour_rate,
       any_value(r.quiet) AS quiet
FROM hourly h JOIN {peer_rules} r USING (metric)
GROUP BY h.host, h.entity, h.metric HAVING sum(span) > 0;

CREATE OR REPLACE TEMP TABLE {peer_groups} AS
WITH x AS (SELECT *, log10(greatest(rate, quiet)) AS x FROM {peer_rates}),
g AS (
    SELECT metric, switch_side, count(*) AS n, median(x) AS med, median(rate) AS med_rate,
           list_sort(list(rate), 'DESC')[1:2] AS top
    FROM x GROUP BY ALL
)
SELECT g.*, median(abs(x.x - g.med)) AS mad
FROM g JOIN x USING (metric, switch_side)
GROUP BY ALL;

-- Candidates: an hour of the series $reach decades or more above the peers' median (the hour's average
-- is diluted when its rise came late in it: the raw samples decide).
CREATE OR REPLACE TEMP TABLE {peer_cand} AS
SELECT r.host, r.entity, r.metric
FROM {peer_rates} r JOIN {peer_groups} g USING (metric, switch_side)
WHERE g.n >= $min_series AND log10(greatest(r.hour_rate, r.quiet)) - g.med >= $reach;
