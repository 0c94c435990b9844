-- collectives_by_type: collective instances summarised per type, after collectives.sql.
-- Only matched instances count (coll_instances.matched: seen on ≥ 2 ranks, and
-- ending together when matched by order).
--
-- Output columns (one row per collective type):
--   name            collective type (coll)
--   instances       matched instances
--   mean_skew_ms    mean arrival skew (last − first start), ms
--   max_skew_ms     largest arrival skew, ms
--   last_rank_mode  the rank that arrives last most often (lowest on ties)
--   busbw_gbps      mean bus bandwidth, GB/s (NULL without message sizes)

SELECT coll AS name, count(*)::BIGINT AS instances, avg(skew_ns) / 1e6 AS mean_skew_ms,
       max(skew_ns) / 1e6 AS max_skew_ms,
       (SELECT last_rank FROM coll_instances j WHERE j.coll = i.coll AND j.matched
        GROUP BY last_rank ORDER BY count(*) DESC, last_rank LIMIT 1) AS last_rank_mode,
       avg(busbw_gbps) AS busbw_gbps
FROM coll_instances i
WHERE matched
GROUP BY coll
ORDER BY sum(skew_ns) DESC, coll
