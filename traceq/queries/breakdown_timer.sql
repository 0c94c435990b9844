-- breakdown_timer: CPU versus GPU time per timer key, with distribution statistics
-- (`traceq breakdown --by timer`; Deep500 `print_all_time_stats` numbers, per key).
--
-- Definition: timer regions (regions.source = 'timer', one row per timed instance of a key:
-- EPOCH, BATCH, FORWARD, BACKWARD, COMM, IO, OTHER or a free-form key) of the scope. CPU
-- duration = end_ns − start_ns (host wall clock); GPU duration = gpu_dur_ns (CUDA events),
-- else gpu_end_ns − gpu_start_ns, null when the instance was not timed on the GPU.
-- Statistics follow Deep500: median = mean of the two middle values for an even count,
-- stdev = sample standard deviation (0 below two samples).
-- Summary-only logs (Deep500 stats text, table timer_stats) have no instances: their keys
-- appear with source 'timer_stats', counts and totals null, and the summary statistics as
-- printed (seconds converted to ns).
--
-- Parameters: $run (text). Requires scope_window (ranks; step window = instances starting
-- inside it; summary-only stats ignore the step window).
--
-- Output columns (one row per key):
--   key                timer key
--   source             timer (instances from a traceq timer log) | timer_stats (summary only)
--   ranks              number of ranks with this key
--   count              CPU-timed instances
--   cpu_total_ns       Σ CPU durations, ns
--   cpu_min_ns, cpu_mean_ns, cpu_median_ns, cpu_max_ns, cpu_stdev_ns   CPU duration stats, ns
--   gpu_count          instances also timed on the GPU
--   gpu_total_ns       Σ GPU durations, ns
--   gpu_min_ns, gpu_mean_ns, gpu_median_ns, gpu_max_ns, gpu_stdev_ns   GPU duration stats, ns
--   gpu_per_cpu        gpu mean / cpu mean over the same key (ratio; < 1: the host takes
--                      longer than the GPU work it times, e.g. launch- or data-bound)
WITH t AS (
    SELECT r.rank, r.name AS key, r.end_ns - r.start_ns AS cpu_ns,
           coalesce(r.gpu_dur_ns, r.gpu_end_ns - r.gpu_start_ns) AS gpu_ns
    FROM regions r
    JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND r.source = 'timer'
      AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
), logged AS (
    SELECT key, 'timer' AS source, count(DISTINCT rank) AS ranks,
           count(cpu_ns) AS count,
           sum(cpu_ns)::BIGINT AS cpu_total_ns,
           min(cpu_ns)::DOUBLE AS cpu_min_ns, avg(cpu_ns) AS cpu_mean_ns,
           median(cpu_ns)::DOUBLE AS cpu_median_ns, max(cpu_ns)::DOUBLE AS cpu_max_ns,
           coalesce(stddev_samp(cpu_ns), 0) AS cpu_stdev_ns,
           count(gpu_ns) AS gpu_count,
           sum(gpu_ns)::BIGINT AS gpu_total_ns,
           min(gpu_ns)::DOUBLE AS gpu_min_ns, avg(gpu_ns) AS gpu_mean_ns,
           median(gpu_ns)::DOUBLE AS gpu_median_ns, max(gpu_ns)::DOUBLE AS gpu_max_ns,
           CASE WHEN count(gpu_ns) > 0 THEN coalesce(stddev_samp(gpu_ns), 0) END AS gpu_stdev_ns
    FROM t
    GROUP BY key
), summary AS (
    SELECT s.key, 'timer_stats' AS source, count(DISTINCT s.rank) AS ranks,
           NULL::BIGINT AS count, NULL::BIGINT AS cpu_total_ns,
           1e9 * min(s.min_s) FILTER (WHERE s.clock = 'cpu')      AS cpu_min_ns,
           1e9 * avg(s.mean_s) FILTER (WHERE s.clock = 'cpu')     AS cpu_mean_ns,
           1e9 * avg(s.median_s) FILTER (WHERE s.clock = 'cpu')   AS cpu_median_ns,
           1e9 * max(s.max_s) FILTER (WHERE s.clock = 'cpu')      AS cpu_max_ns,
           1e9 * avg(s.stdev_s) FILTER (WHERE s.clock = 'cpu')    AS cpu_stdev_ns,
           NULL::BIGINT AS gpu_count, NULL::BIGINT AS gpu_total_ns,
           1e9 * min(s.min_s) FILTER (WHERE s.clock = 'gpu')      AS gpu_min_ns,
           1e9 * avg(s.mean_s) FILTER (WHERE s.clock = 'gpu')     AS gpu_mean_ns,
           1e9 * avg(s.median_s) FILTER (WHERE s.clock = 'gpu')   AS gpu_median_ns,
           1e9 * max(s.max_s) FILTER (WHERE s.clock = 'gpu')      AS gpu_max_ns,
           1e9 * avg(s.stdev_s) FILTER (WHERE s.clock = 'gpu')    AS gpu_stdev_ns
    FROM timer_stats s
    JOIN scope_window w ON w.rank = s.rank
    WHERE s.run = $run AND s.key NOT IN (SELECT key FROM logged)
    GROUP BY s.key
), both_ AS (
    SELECT * FROM logged
    UNION ALL BY NAME
    SELECT * FROM summary
)
SELECT key, source, ranks, count, cpu_total_ns, cpu_min_ns, cpu_mean_ns, cpu_median_ns,
       cpu_max_ns, cpu_stdev_ns, gpu_count, gpu_total_ns, gpu_min_ns, gpu_mean_ns,
       gpu_median_ns, gpu_max_ns, gpu_stdev_ns,
       gpu_mean_ns / nullif(cpu_mean_ns, 0) AS gpu_per_cpu
FROM both_
ORDER BY cpu_total_ns DESC NULLS LAST, cpu_mean_ns DESC NULLS LAST, key
