-- collectives: one time base for every rank, and each collective instance matched across
-- ranks (message size and bus bandwidth as NCCL-tests define them, see below).
--
-- Requires: table coll_kernels (ranks_rank.sql, every rank) and rank_offsets(rank,
-- raw_offset_ns, refine_ns, clock_offset_ns): raw_offset_ns = runs.clock_offset_ns (the
-- rank's clock -> epoch ns), refine_ns = runs.clock_refine_ns or, for a run whose manifest holds
-- none, clock_refine.sql (0 when nothing was aligned), clock_offset_ns = their sum: the rank's
-- clock -> the run's common clock,  t_common = t + clock_offset_ns.
--
-- Per instance (grp, coll, k) on the common clock:
--   skew_ns      last start − first start (arrival skew)
--   last_rank    the rank that started last (lowest rank on ties)
--   wait_ns      per rank: last start − its start (time it waits for the last rank)
--   dur_ns       median end (lower middle) − last start (the collective once every rank is there)
--   end_spread_ns  last end − first end: near 0 for a true match (a collective completes on
--                all its ranks together); large when matching by order paired different ops
--   bytes        message size: gpu_ops.bytes = max(In, Out msg nelems) × element size, which is
--                NCCL-tests' "size" (AllGather: the gathered output, ReduceScatter: the input)
--   matched      a true match, the instances that the views count: seen on ≥ 2 ranks and,
--                when matched by order (grp 'stream …' / '… by order'), ending within
--                $end_tolerance_ns (traceq.clocks.END_TOLERANCE_NS) of each other
--   busbw_gbps   NCCL-tests bus bandwidth: algbw = bytes / dur_ns (GB/s), times
--                2(n−1)/n (all_reduce), (n−1)/n (all_gather, reduce_scatter, all_to_all),
--                1 (broadcast, reduce, send_recv and others); NULL without message size
--
-- Parameters: $end_tolerance_ns (bigint).
--
-- Output: temp tables coll_instances(grp, coll, k, ranks, first_ns, last_ns, skew_ns, last_rank, dur_ns,
-- end_spread_ns, bytes, matched, busbw_gbps) and rank_arrivals(grp, coll, k, rank, start_ns, end_ns, late_ns,
-- wait_ns) of the matched instances, on the common clock, where late_ns = its start − first start.

CREATE OR REPLACE TEMP TABLE coll_common AS
    SELECT c.grp, c.coll, c.k, c.rank, c.start_ns + o.clock_offset_ns AS s, c.end_ns + o.clock_offset_ns AS e,
           c.bytes
    FROM coll_kernels c JOIN rank_offsets o USING (rank);

CREATE OR REPLACE TEMP TABLE coll_instances AS
    SELECT grp, coll, k, count(*)::BIGINT AS ranks, min(s) AS first_ns, max(s) AS last_ns,
           (max(s) - min(s))::BIGINT AS skew_ns,
           first(rank ORDER BY s DESC, rank) AS last_rank,   -- lowest rank wins a tie
           greatest(quantile_disc(e, 0.5) - max(s), 1)::BIGINT AS dur_ns,
           (max(e) - min(e))::BIGINT AS end_spread_ns,
           max(bytes) AS bytes,
           count(*) > 1 AND (max(e) - min(e) <= $end_tolerance_ns
                             OR NOT (grp LIKE 'stream %' OR grp LIKE '% by order')) AS matched
    FROM coll_common GROUP BY grp, coll, k;

ALTER TABLE coll_instances ADD COLUMN busbw_gbps DOUBLE;
UPDATE coll_instances SET busbw_gbps = bytes / dur_ns * CASE
        WHEN coll = 'all_reduce' THEN 2.0 * (ranks - 1) / ranks
        WHEN coll IN ('all_gather', 'reduce_scatter', 'all_to_all') THEN (ranks - 1) / ranks
        ELSE 1.0 END;

CREATE OR REPLACE TEMP TABLE rank_arrivals AS
    SELECT c.grp, c.coll, c.k, c.rank, c.s AS start_ns, c.e AS end_ns, (c.s - i.first_ns)::BIGINT AS late_ns,
           (i.last_ns - c.s)::BIGINT AS wait_ns
    FROM coll_common c JOIN coll_instances i USING (grp, coll, k)
    WHERE i.matched;

SELECT count(*) AS instances FROM coll_instances
