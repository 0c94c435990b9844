-- clock_refine: put the ranks of a run on one clock by aligning the ends of their matched
-- collectives. Ingest runs it when it commits a run's ranks and stores the result
-- in runs.clock_refine_ns (traceq/clocks.py); `traceq ranks` runs it for a run whose
-- manifest holds no refinement.
--
-- Requires: table coll_kernels (ranks_rank.sql, every rank of the run) and rank_clock(rank,
-- raw_offset_ns = runs.clock_offset_ns: the rank's own clock -> epoch ns, from Kineto
-- baseTimeNanoseconds / nsys utcEpochNs).
--
-- A collective completes on all its ranks together, so its kernel ends agree on a common
-- clock. With t' = t + raw_offset_ns, for each instance (grp, coll, k) seen on ≥ 2 ranks the
-- reference end is the median of its ends (the lower middle one: an actual end, exact in ns,
-- where an interpolated median of epoch ns would go through float64); a rank's refinement is
-- the median over its instances of (reference end − its end), rounded to ns.
-- Two passes: instances matched by order (grp 'stream …' or '… by order', ranks_rank.sql)
-- may pair different operations (a rank's trace missed one); those whose ends still lie more
-- than $end_tolerance_ns apart after the first pass are left out of the second. A rank left
-- with no instance keeps its first-pass value. Instances matched by sequence number all count.
-- Every rank's time on the common clock is then  t + raw_offset_ns + refine_ns.
--
-- Parameters: $end_tolerance_ns (bigint; traceq.clocks.END_TOLERANCE_NS).
--
-- Output columns (one row per rank of rank_clock):
--   rank       rank
--   refine_ns  the refinement, ns; NULL when the rank shares no collective instance with
--              another rank (nothing to align)

WITH raw AS (
    SELECT c.rank, c.grp, c.coll, c.k, c.end_ns + k0.raw_offset_ns AS e
    FROM coll_kernels c JOIN rank_clock k0 USING (rank)
), ref1 AS (
    SELECT grp, coll, k, quantile_disc(e, 0.5) AS e_ref FROM raw GROUP BY grp, coll, k HAVING count(*) > 1
), pass1 AS (
    SELECT r.rank, round(median(ref1.e_ref - r.e))::BIGINT AS refine_ns
    FROM raw r JOIN ref1 USING (grp, coll, k) GROUP BY r.rank
), kept AS (
    SELECT r.grp, r.coll, r.k
    FROM raw r JOIN pass1 p USING (rank) JOIN ref1 USING (grp, coll, k)
    GROUP BY r.grp, r.coll, r.k
    HAVING max(r.e + p.refine_ns) - min(r.e + p.refine_ns) <= $end_tolerance_ns
        OR NOT (r.grp LIKE 'stream %' OR r.grp LIKE '% by order')
), ref2 AS (
    SELECT grp, coll, k, quantile_disc(e, 0.5) AS e_ref FROM raw JOIN kept USING (grp, coll, k) GROUP BY grp, coll, k
), pass2 AS (
    SELECT r.rank, round(median(ref2.e_ref - r.e))::BIGINT AS refine_ns
    FROM raw r JOIN ref2 USING (grp, coll, k) GROUP BY r.rank
)
SELECT k0.rank, coalesce(f2.refine_ns, f1.refine_ns) AS refine_ns
FROM rank_clock k0 LEFT JOIN pass1 f1 USING (rank) LEFT JOIN pass2 f2 USING (rank)
ORDER BY k0.rank
