-- breakdown_rank: the per-rank partial sums of `breakdown` (breakdown.sql), one row per rank
-- and region (source, domain, name). breakdown.sql adds these rows up over the ranks, so the
-- same numbers come out whether the ranks are aggregated in one process or each rank on a
-- worker (traceq.engine.per_rank): every column is a sum or a count, and the mean is
-- Σ sums / Σ counts.
--
-- Input: the temp table bd_instances (breakdown_instances.sql). Parameters: none.
--
-- Output columns:
--   rank, source, domain   where and which kind of region
--   name              region name (all ProfilerStep#N are one row named "ProfilerStep"; so
--                     are their GPU-side copies, in the row of source gpu_annotation)
--   instances         region instances
--   unfinished        instances still open at capture end
--   cpu_total_ns      Σ instance durations (CPU), ns (null when none has a CPU duration)
--   cpu_n             instances with a CPU duration
--   gpu_instances     instances with GPU work
--   gpu_ops           GPU ops launched inside, Σ over instances
--   gpu_proj_ns       Σ projected GPU duration, ns (null when none)
--   gpu_proj_n        instances with a projected GPU duration
--   gpu_busy_ns       Σ GPU busy time, ns (null when none)
--   gpu_busy_n        instances with a GPU busy time
SELECT
    rank,
    source,
    domain,
    CASE WHEN source = 'step' OR (source = 'gpu_annotation' AND step IS NOT NULL)
         THEN 'ProfilerStep' ELSE name END                       AS name,
    count(*)                                                     AS instances,
    count(*) FILTER (WHERE unfinished)                           AS unfinished,
    sum(cpu_ns)::BIGINT                                          AS cpu_total_ns,
    count(cpu_ns)                                                AS cpu_n,
    count(*) FILTER (WHERE gpu_proj_ns IS NOT NULL)              AS gpu_instances,
    sum(gpu_ops)::BIGINT                                         AS gpu_ops,
    sum(gpu_proj_ns)::BIGINT                                     AS gpu_proj_ns,
    count(gpu_proj_ns)                                           AS gpu_proj_n,
    sum(gpu_busy_ns)::BIGINT                                     AS gpu_busy_ns,
    count(gpu_busy_ns)                                           AS gpu_busy_n
FROM bd_instances
GROUP BY 1, 2, 3, 4
