-- The candidates' raw samples ({peer_raw}) in time order: each sample's increase and interval (counters.py's
-- rates: a reset restarts from zero), their running sums, and the split of the series into two Poisson
-- rates that best explains its increases (the log-likelihood of a rate c/t over c events in t seconds is
-- c ln(c/t) - c; the -c terms sum to the total either way). A split that gains $nats over one rate marks a
-- change between its sample and the next: a rise is dated there and the later rate is the series'; a fall
-- leaves the earlier part as the elevated one. Without such a split the whole read is one rate, from its
-- first sample (an old fault). Then the elevated rate against its peers ({peer_groups}): $decades above
-- their median, $z robust z-scores (MAD x 1.4826, at least $mad_floor decades), $min_events in the span.
WITH r AS ({rates}),
s AS (
    SELECT host, entity, metric, ts, rate,
           sum(coalesce(delta, 0)) OVER w AS c, sum(coalesce(dt_s, 0)) OVER w AS t,
           sum(coalesce(delta, 0)) OVER a AS c_all, sum(coalesce(dt_s, 0)) OVER a AS t_all,
           lead(ts) OVER w AS next_ts, min(ts) OVER a AS t0, max(ts) OVER a AS t1,
           row_number() OVER w AS i, count(*) OVER a AS n
    FROM r
    WINDOW w AS (PARTITION BY host, entity, metric ORDER BY ts), a AS (PARTITION BY host, entity, metric)
), ll AS (
    SELECT *, CASE WHEN c > 0 THEN c * ln(c / t) ELSE 0 END
              + CASE WHEN c_all > c THEN (c_all - c) * ln((c_all - c) / (t_all - t)) ELSE 0 END AS ll
    FROM s WHERE t > 0 AND t_all > t
), best AS (
    SELECT host, entity, metric, arg_max(struct_pack(ts, next_ts, c, t, i), (ll, -i)) AS sp, max(ll) AS ll
    FROM ll GROUP BY ALL
), whole AS (
    SELECT host, entity, metric, any_value(c_all) AS c_all, any_value(t_all) AS t_all, any_value(t0) AS t0,
           any_value(t1) AS t1, any_value(n) AS n
    FROM s GROUP BY ALL HAVING any_value(t_all) > 0
), split AS (
    SELECT w.*, b.sp,
           coalesce(b.ll - CASE WHEN w.c_all > 0 THEN w.c_all * ln(w.c_all / w.t_all) ELSE 0 END >= $nats, false)
               AS changed,
           b.sp.c / b.sp.t AS r1, (w.c_all - b.sp.c) / (w.t_all - b.sp.t) AS r2
    FROM whole w LEFT JOIN best b USING (host, entity, metric)
), seg AS (  -- the elevated span: [lo, hi] of samples, its onset bounds, its rate and events
    SELECT host, entity, metric,
           CASE WHEN changed AND r2 >= $rise * r1 THEN 'rise' WHEN changed AND r1 >= $rise * r2 THEN 'fall'
                ELSE 'held' END AS shape, c_all, t_all, t0, t1, n, sp, r1, r2
    FROM split
), span AS (
    SELECT host, entity, metric,
           CASE shape WHEN 'rise' THEN sp.ts ELSE t0 END AS last_normal,
           CASE shape WHEN 'rise' THEN sp.next_ts ELSE t0 END AS first_bad,
           CASE shape WHEN 'fall' THEN sp.ts ELSE t1 END AS last,
           CASE shape WHEN 'rise' THEN r2 WHEN 'fall' THEN r1 ELSE c_all / t_all END AS rate,
           CASE shape WHEN 'rise' THEN c_all - sp.c WHEN 'fall' THEN sp.c ELSE c_all END AS events,
           CASE shape WHEN 'rise' THEN n - sp.i WHEN 'fall' THEN sp.i ELSE n END AS samples
    FROM seg
), peak AS (
    SELECT p.host, p.entity, p.metric, max(s.rate) AS peak
    FROM span p JOIN s USING (host, entity, metric)
    WHERE s.ts > p.last_normal AND s.ts <= p.last OR (p.last_normal = p.first_bad AND s.ts <= p.last)
    GROUP BY ALL
)
SELECT p.host, p.entity, p.metric, rl.layer, rl.category, rl.weight, p.last_normal, p.first_bad, p.last,
       p.rate, coalesce(k.peak, p.rate), p.samples, g.n, g.med_rate,
       CASE WHEN p.rate >= g.top[1] THEN coalesce(g.top[2], 0) ELSE g.top[1] END AS others_max,
       greatest(power(10, g.med), rl.quiet) AS ref
FROM span p
JOIN {peer_rates} q USING (host, entity, metric)
JOIN {peer_groups} g ON g.metric = p.metric AND g.switch_side = q.switch_side
JOIN {peer_rules} rl ON rl.metric = p.metric
LEFT JOIN peak k USING (host, entity, metric)
WHERE p.events >= $min_events
  AND log10(greatest(p.rate, rl.quiet)) - g.med >= $decades
  AND log10(greatest(p.rate, rl.quiet)) - g.med >= $z * greatest(1.4826 * g.mad, $mad_floor)
ORDER BY p.last_normal, p.host, p.entity, p.metric
