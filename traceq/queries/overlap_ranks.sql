-- overlap_ranks: communication/compute overlap across the ranks of a run.
--
-- Reads the rank rows of overlap.sql, registered as table overlap_by_rank. Ranks without
-- communication do not enter the min/median/max of overlap_pct or exposed_ns.
--
-- Straggler hints. In synchronous training every rank waits for the slowest one inside its
-- collectives: a waiting rank's NCCL kernels run longer, so its exposed communication grows.
-- Hence:
--   slowest_rank        the rank with the longest mean step time (CPU ProfilerStep duration),
--                       when the ranks have steps; NULL otherwise
--   most_exposed_rank   the rank with the most exposed communication (waits the most)
--   least_exposed_rank  the rank with the least exposed communication: when it is clearly
--                       below the others, the others are waiting for it (a straggler hint)
-- Ties go to the lowest rank (the result must not depend on the order ranks are read in).
--
-- Output columns (one row):
--   ranks                ranks with GPU activity
--   comm_ranks           ranks with communication ops
--   min_overlap_pct      lowest overlap_pct of a rank, %
--   median_overlap_pct   median overlap_pct, %
--   max_overlap_pct      highest overlap_pct, %
--   min_exposed_ns       least exposed communication of a rank, ns
--   median_exposed_ns    median exposed communication, ns
--   max_exposed_ns       most exposed communication, ns
--   comm_ns              communication time summed over ranks, ns
--   exposed_ns           exposed communication summed over ranks, ns
--   overlap_pct          100 · Σ overlapped / Σ comm over ranks, %
--   slowest_rank         see above
--   slowest_step_ns      its mean step time, ns
--   most_exposed_rank    see above
--   least_exposed_rank   see above

WITH c AS (SELECT * FROM overlap_by_rank WHERE comm_ns > 0)
SELECT
    (SELECT count(*) FROM overlap_by_rank)                     AS ranks,
    (SELECT count(*) FROM c)                                   AS comm_ranks,
    (SELECT min(overlap_pct) FROM c)                           AS min_overlap_pct,
    (SELECT median(overlap_pct) FROM c)                        AS median_overlap_pct,
    (SELECT max(overlap_pct) FROM c)                           AS max_overlap_pct,
    (SELECT min(exposed_ns) FROM c)::BIGINT                    AS min_exposed_ns,
    (SELECT median(exposed_ns) FROM c)::BIGINT                 AS median_exposed_ns,
    (SELECT max(exposed_ns) FROM c)::BIGINT                    AS max_exposed_ns,
    (SELECT sum(comm_ns) FROM c)::BIGINT                       AS comm_ns,
    (SELECT sum(exposed_ns) FROM c)::BIGINT                    AS exposed_ns,
    (SELECT 100.0 * sum(overlapped_ns) / nullif(sum(comm_ns), 0) FROM c) AS overlap_pct,
    (SELECT rank FROM overlap_by_rank WHERE steps > 0 ORDER BY step_ns / steps DESC, rank LIMIT 1) AS slowest_rank,
    (SELECT max(step_ns // steps) FROM overlap_by_rank WHERE steps > 0)::BIGINT   AS slowest_step_ns,
    (SELECT rank FROM c ORDER BY exposed_ns DESC, rank LIMIT 1) AS most_exposed_rank,
    (SELECT rank FROM c ORDER BY exposed_ns, rank LIMIT 1)     AS least_exposed_rank
