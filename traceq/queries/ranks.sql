-- ranks: the cross-rank view (`traceq ranks`), after collectives.sql.
--
-- Requires: temp tables rank_facts(rank, steps, step_ns, exposed_ns) (per rank, from
-- ranks_steps.sql and overlap.sql), rank_offsets, coll_instances, rank_arrivals
-- (collectives.sql). Only matched instances count (coll_instances.matched: seen on ≥ 2 ranks, and
-- ending together when matched by order).
--
-- Output columns (one row per rank):
--   rank             rank
--   steps            ProfilerSteps of the rank
--   step_ms          mean step time, ms
--   exposed_comm_ms  communication time not hidden by compute (overlap.sql), ms
--   late_arrival_ms  mean over collective instances of (its start − first start), ms
--   last_count       instances at which it arrived last
--   wait_ms          time it waited for the last rank, summed over instances, ms
--   raw_offset_ns    runs.clock_offset_ns (trace clock -> epoch), ns
--   refine_ns        refinement from the collective ends, ns
--   clock_offset_ns  raw_offset_ns + refine_ns: rank clock -> common clock, ns

SELECT f.rank, f.steps, f.step_ns / 1e6 AS step_ms, f.exposed_ns / 1e6 AS exposed_comm_ms,
       a.late_ns / 1e6 AS late_arrival_ms,
       coalesce(l.n, 0)::BIGINT AS last_count, a.wait_ns / 1e6 AS wait_ms,
       o.raw_offset_ns, o.refine_ns, o.clock_offset_ns
FROM rank_facts f
JOIN rank_offsets o USING (rank)
LEFT JOIN (SELECT rank, avg(late_ns) AS late_ns, sum(wait_ns) AS wait_ns FROM rank_arrivals GROUP BY rank) a USING (rank)
LEFT JOIN (SELECT last_rank AS rank, count(*) AS n FROM coll_instances WHERE matched GROUP BY 1) l USING (rank)
ORDER BY f.rank
