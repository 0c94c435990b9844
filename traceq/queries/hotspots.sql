-- hotspots: where GPU time goes, per kernel name, with avoidable work called out.
--
-- Definition (nsys `cuda_gpu_kern_sum` semantics; memcpy/memset rows per direction as
-- nsys `cuda_gpu_mem_time_sum`): GPU ops of kind kernel, memcpy or memset of the scope
-- (run, rank or all ranks, and the step window: ops that start inside it) are grouped by
-- name. Durations are end_ns - start_ns. `pct` is the share of the summed duration of all
-- listed rows (like nsys "Time (%)"), not of wall time: concurrent kernels both count.
-- Kernel names are per source: nsys demangledName; Kineto names the copies
-- "Memcpy HtoD (Pageable -> Device)", nsys "[CUDA memcpy Host-to-Device]".
--
-- Parameters: $run (text), $rank (integer or NULL = every rank of the run).
--
-- Output columns:
--   name          kernel / operation name (full)
--   identity      kernel identity (traceq.kernels.identity; NULL in stores written before it existed)
--   library       kernel vendor/library
--   category      rule-table category (traceq.rules.categories)
--   kind          kernel | memcpy | memset
--   count         number of ops
--   total_ns      sum of durations, ns
--   pct           100 * total_ns / sum of total_ns over all rows, % (null when that sum is 0:
--                 only zero-duration ops, whose share is undefined)
--   mean_ns       average duration, ns
--   median_ns     median duration (mean of the two middle values for even counts), ns
--   min_ns        shortest, ns
--   max_ns        longest, ns
--   stddev_ns     sample standard deviation (0 for a single op), ns
--   pageable      any copy of this row involved pageable host memory (memcpy only)
--   ranks         number of ranks the name appears on
WITH ops AS (
    SELECT g.name, g.identity, g.library, g.category, g.kind, g.rank, g.src_kind, g.dst_kind,
           g.end_ns - g.start_ns AS dur_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run
      AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
)
SELECT
    name,
    any_value(identity)                         AS identity,
    any_value(library)                          AS library,
    any_value(category)                         AS category,
    any_value(kind)                             AS kind,
    count(*)                                    AS count,
    sum(dur_ns)::BIGINT                         AS total_ns,
    100.0 * sum(dur_ns) / nullif(sum(sum(dur_ns)) OVER (), 0) AS pct,
    avg(dur_ns)                                 AS mean_ns,
    median(dur_ns)                              AS median_ns,
    min(dur_ns)                                 AS min_ns,
    max(dur_ns)                                 AS max_ns,
    coalesce(stddev_samp(dur_ns), 0)            AS stddev_ns,
    bool_or(coalesce(src_kind = 'Pageable' OR dst_kind = 'Pageable', false)) AS pageable,
    count(DISTINCT rank)                        AS ranks
FROM ops
GROUP BY name
ORDER BY total_ns DESC, name
