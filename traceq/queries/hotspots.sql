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
-- Kernel view columns (the TensorBoard profiler plugin's Kernel view, kernel_parser.py):
-- per kernel name, the means of the launch facts Kineto writes on each kernel ("blocks per SM",
-- "est. achieved occupancy %"; computed at ingest by traceq.kernels.occupancy where the source
-- did not record them), weighted by the calls' durations. A call without the value counts as 0
-- (the plugin fills the missing values with 0 before averaging: its numbers, and a name whose
-- launches are partly unrecorded is not pictured better than it is); a name none of whose calls
-- has the value gets NULL; a name whose calls all last 0 ns gets 0 (the plugin's fallback).
--
-- Parameters: $run (text), $rank (integer or NULL = every rank of the run), $tb (boolean):
-- the plugin's scope (its Kernel view lists every kernel of the trace: kernels only, the step
-- window is ignored).
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
--   tensor_cores  the kernel runs on tensor/matrix cores by its name (gpu_ops.tensor_core,
--                 traceq.kernels.tensor_cores); NULL for copies and memsets
--   blocks_per_sm  duration-weighted mean of the calls' blocks per SM (grid blocks / SM count;
--                 above 1: more blocks than SMs); NULL when no call records it
--   est_occupancy_pct  duration-weighted mean of the calls' estimated achieved occupancy, %
--                 (Kineto's: active threads per SM / max threads per SM, limited by the grid and
--                 by the CUDA occupancy calculator); NULL when no call records it
--                 (both weighted sums in DECIMAL: exact, so the same whatever order threads add them)
WITH ops AS (
    SELECT g.name, g.identity, g.library, g.category, g.kind, g.rank, g.src_kind, g.dst_kind,
           g.tensor_core, g.blocks_per_sm, g.est_occupancy_pct,
           g.end_ns - g.start_ns AS dur_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run
      AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (NOT $tb OR g.kind = 'kernel')
      AND ($tb OR w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
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
    count(DISTINCT rank)                        AS ranks,
    bool_or(tensor_core)                        AS tensor_cores,
    CASE WHEN count(blocks_per_sm) > 0 THEN coalesce(
        sum((coalesce(blocks_per_sm, 0) * dur_ns)::DECIMAL(38, 6))::DOUBLE / nullif(sum(dur_ns), 0), 0)
        END AS blocks_per_sm,
    CASE WHEN count(est_occupancy_pct) > 0 THEN coalesce(
        sum((coalesce(est_occupancy_pct, 0) * dur_ns)::DECIMAL(38, 6))::DOUBLE / nullif(sum(dur_ns), 0), 0)
        END AS est_occupancy_pct
FROM ops
GROUP BY name
ORDER BY total_ns DESC, name
