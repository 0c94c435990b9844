-- clock_refine: put the ranks of a run on one clock by aligning the ends of their matched
-- collectives (DESIGN §8). Ingest runs it when it commits a run's ranks and stores the result
-- in runs.clock_refine_ns (traceq/clocks.py); `traceq ranks` runs it for stores from before.
--
-- Requires: table coll_kernels (ranks_rank.sql, every rank of the run) and rank_clock(rank,
-- raw_offset_ns = runs.clock_offset_ns: the rank's own clock -> epoch ns, from Kineto
-- baseTimeNanoseconds / nsys utcEpochNs).
--
-- A collective completes on all its ranks together, so its kernel ends agree on a common
-- clock. With t' = t + raw_offset_ns, for each instance (grp, coll, k) seen on ≥ 2 ranks the
-- reference end is the median of its ends (the lower middle one: an actual end, exact in ns,
-- where an interpolated median of epoch ns would go through float64); a rank's refinement is
-- the median over its instances of (reference end − its end), rounded to ns. Every rank's
-- time on the common clock is then  t + raw_offset_ns + refine_ns.
--
-- Output columns (one row per rank of rank_clock):
--   rank       rank
--   refine_ns  the refinement, ns; NULL when the rank shares no collective instance with
--              another rank (nothing to align)

WITH raw AS (
    SELECT c.rank, c.grp, c.coll, c.k, c.end_ns + k0.raw_offset_ns AS e
    FROM coll_kernels c JOIN rank_clock k0 USING (rank)
), ref AS (
    SELECT grp, coll, k, quantile_disc(e, 0.5) AS e_ref FROM raw GROUP BY grp, coll, k HAVING count(*) > 1
), refine AS (
    SELECT r.rank, round(median(ref.e_ref - r.e))::BIGINT AS refine_ns
    FROM raw r JOIN ref USING (grp, coll, k) GROUP BY r.rank
)
SELECT k0.rank, f.refine_ns
FROM rank_clock k0 LEFT JOIN refine f USING (rank)
ORDER BY k0.rank
