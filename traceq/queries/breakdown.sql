-- breakdown: per-region CPU time versus the GPU work launched inside it (nsys
-- `nvtx_gpu_proj_sum` semantics).
--
-- Input: the table bd_partials (breakdown_rank.sql: per rank and region, sums and counts
-- over the instances of bd_instances, built by breakdown_instances.sql; read its header for
-- the projection rule: a GPU op belongs to every range on the launching thread that fully
-- contains its launch API call). The ranks are summed here: in one process, or after each
-- rank ran on a worker (traceq.engine.per_rank), with the same result.
--
-- Definition, per region (source, domain, name), summed over instances and ranks:
--   CPU time        = Σ (end − start) of the instances (children are not subtracted, so
--                     nested names can add up to more than the capture, as in nsys);
--   GPU projected   = Σ per instance (last op end − first op start) over the ops it launched
--                     (nsys "Total Proj Time"; can exceed the CPU range: the GPU runs late);
--   GPU busy        = Σ per instance |∪ op intervals| (projected time minus GPU idle inside);
--   busy / CPU      = GPU busy / CPU time: < 1 means the GPU works less than the host spends
--                     in the range (host-bound or waiting), > 1 means the range only enqueues.
-- Timer keys (source timer) use the measured GPU duration of each instance as projected and
-- busy time. Kineto GPU-side annotation spans are source gpu_annotation: no CPU time, their
-- GPU span as projected time. That includes Kineto's GPU-side copy of ProfilerStep#N (one
-- gpu_annotation row named "ProfilerStep"): it is not a step and is not added to the host
-- step row, whose CPU time is that of the host ProfilerStep spans only.
--
-- Parameters: none besides bd_partials.
--
-- Output columns:
--   source            nvtx | annotation | gpu_annotation | step | dataloader | timer
--   domain            NVTX domain (null for the default domain and non-NVTX sources)
--   name              region name (NVTX text without the domain, annotation name, timer key;
--                     all ProfilerStep#N are one row named "ProfilerStep", their GPU-side
--                     copies another, of source gpu_annotation)
--   ranks             number of ranks where the region occurs
--   instances         number of region instances
--   unfinished        instances still open at capture end (they end at capture end)
--   cpu_total_ns      Σ instance durations (CPU), ns
--   cpu_mean_ns       mean instance duration (CPU), ns
--   gpu_instances     instances with GPU work (nsys "Range Instances" of nvtx_gpu_proj_sum)
--   gpu_ops           GPU ops launched inside, Σ over instances (nsys "Total GPU Ops")
--   gpu_proj_ns       Σ projected GPU duration, ns (nsys "Total Proj Time"); 0 when no GPU
--                     work was launched inside, null for a timer key never timed on the GPU
--   gpu_busy_ns       Σ GPU busy time (union of the instance's ops), ns (same 0/null rule)
--   gpu_busy_per_cpu  gpu_busy_ns / cpu_total_ns (ratio; null without CPU or GPU time)
SELECT
    source,
    domain,
    name,
    count(DISTINCT rank)                                         AS ranks,
    sum(instances)::BIGINT                                       AS instances,
    sum(unfinished)::BIGINT                                      AS unfinished,
    sum(cpu_total_ns)::BIGINT                                    AS cpu_total_ns,
    sum(cpu_total_ns) / nullif(sum(cpu_n), 0)                    AS cpu_mean_ns,
    sum(gpu_instances)::BIGINT                                   AS gpu_instances,
    sum(gpu_ops)::BIGINT                                         AS gpu_ops,
    -- 0 = no GPU work launched inside; null = a timer key that was never timed on the GPU
    CASE WHEN source = 'timer' AND sum(gpu_proj_n) = 0 THEN NULL
         ELSE coalesce(sum(gpu_proj_ns), 0) END::BIGINT          AS gpu_proj_ns,
    CASE WHEN source = 'timer' AND sum(gpu_busy_n) = 0 THEN NULL
         ELSE coalesce(sum(gpu_busy_ns), 0) END::BIGINT          AS gpu_busy_ns,
    CASE WHEN source = 'timer' AND sum(gpu_busy_n) = 0 THEN NULL
         ELSE coalesce(sum(gpu_busy_ns), 0) / nullif(sum(cpu_total_ns), 0) END AS gpu_busy_per_cpu
FROM bd_partials
GROUP BY 1, 2, 3
ORDER BY cpu_total_ns DESC NULLS LAST, gpu_proj_ns DESC, source, name, domain
