-- overview_gpu: the GPU summary of the TensorBoard profiler plugin's Overview page
-- (torch-tb-profiler 0.4.3, gpu_metrics_parser.py), per rank and device.
--
-- Window: from the start of the rank's first step to the end of its last one (in step order)
-- of ov_steps. Kernels are every kernel on the device (communication kernels included;
-- memcpys and memsets are not).
--   gpu_utilization_pct    = 100 · |∪ kernels ∩ window| / window length
--   sm_efficiency_pct      = 100 · Σ over time of min(Σ blocks_per_sm of the kernels running
--                            then, 1) / window length ("est. SM efficiency": a kernel with
--                            fewer blocks than SMs keeps part of the GPU idle; idle time counts
--                            as 0); kernels without blocks_per_sm, or with 0, add nothing; null
--                            when no kernel with blocks_per_sm runs in the window
--   achieved_occupancy_pct = Σ est_occupancy_pct · d / Σ d over the kernels with
--                            est_occupancy_pct >= 0, d = the kernel's time inside the window;
--                            null when there is none
--   tensor_core_pct        = 100 · time of the kernels gpu_ops.tensor_core marks / time of
--                            all kernels, inside the window (traceq's classifier,
--                            traceq/kernels/tensor_cores.py); null without kernels there
-- Blocks per SM and occupancies are added up as exact integers (millionths), so the result
-- does not depend on the order of the additions (one pass or a map over batches of ranks).
--
-- Requires: ov_steps(rank, step, idx, start_ns, end_ns) and ov_kernels(rank, device,
-- start_ns, end_ns, blocks_per_sm, est_occupancy_pct, tensor_core) (traceq.analyses.overview).
--
-- Output columns (one row per rank and device with kernels):
--   rank                    rank
--   device                  device id (the kernels' "device")
--   gpu_utilization_pct     share of the window with a kernel running, %
--   sm_efficiency_pct       estimated SM efficiency, %
--   achieved_occupancy_pct  estimated achieved occupancy (duration-weighted), %
--   tensor_core_pct         share of kernel time in tensor-core kernels, %

CREATE OR REPLACE TEMP TABLE ov_window AS
SELECT rank, arg_min(start_ns, idx) AS lo_ns, arg_max(end_ns, idx) AS hi_ns FROM ov_steps GROUP BY rank;

CREATE OR REPLACE TEMP TABLE ov_kernel_iv AS
SELECT {'rank': rank, 'device': device} AS key, start_ns, end_ns FROM ov_kernels;

WITH busy AS (
    SELECT u.key.rank AS rank, u.key.device AS device,
           sum(greatest(least(u.end_ns, w.hi_ns) - greatest(u.start_ns, w.lo_ns), 0)) AS busy_ns
    FROM iv_union(ov_kernel_iv) u JOIN ov_window w ON w.rank = u.key.rank
    GROUP BY ALL
), edges AS (
    -- blocks per SM in millionths (exact integers: the sums below do not depend on the order
    -- DuckDB adds them in, so one pass over every rank and a map over batches agree to the bit)
    SELECT rank, device, start_ns AS t, round(blocks_per_sm * 1e6)::BIGINT AS v FROM ov_kernels
    WHERE round(blocks_per_sm * 1e6) > 0
    UNION ALL
    SELECT rank, device, end_ns, -round(blocks_per_sm * 1e6)::BIGINT FROM ov_kernels
    WHERE round(blocks_per_sm * 1e6) > 0
), at_t AS (
    SELECT rank, device, t, sum(v) AS v FROM edges GROUP BY ALL
), level AS (
    SELECT rank, device, t, lead(t) OVER (PARTITION BY rank, device ORDER BY t) AS t_next,
           sum(v) OVER (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING) AS v
    FROM at_t
), sm AS (
    SELECT l.rank, l.device,
           sum(least(l.v, 1000000)::HUGEINT * (least(l.t_next, w.hi_ns) - greatest(l.t, w.lo_ns))) AS weighted,
           count(*) AS n
    FROM level l JOIN ov_window w ON w.rank = l.rank
    WHERE l.v > 0 AND least(l.t_next, w.hi_ns) > greatest(l.t, w.lo_ns)
    GROUP BY ALL
), clipped AS (
    SELECT k.rank, k.device, k.est_occupancy_pct, k.tensor_core,
           greatest(least(k.end_ns, w.hi_ns) - greatest(k.start_ns, w.lo_ns), 0) AS d
    FROM ov_kernels k JOIN ov_window w ON w.rank = k.rank
), occ AS (
    SELECT rank, device,
           -- occupancy in millionths of a percent: an exact integer sum, as above
           sum(round(est_occupancy_pct * 1e6)::HUGEINT * d) FILTER (WHERE est_occupancy_pct >= 0 AND d > 0) AS occ_w,
           sum(d) FILTER (WHERE est_occupancy_pct >= 0 AND d > 0) AS occ_d,
           sum(d) FILTER (WHERE tensor_core) AS tc_ns, sum(d) AS k_ns
    FROM clipped GROUP BY ALL
), devices AS (
    SELECT DISTINCT rank, device FROM ov_kernels
)
SELECT d.rank, d.device,
       CASE WHEN w.hi_ns > w.lo_ns THEN 100.0 * coalesce(b.busy_ns, 0) / (w.hi_ns - w.lo_ns) END
           AS gpu_utilization_pct,
       CASE WHEN w.hi_ns > w.lo_ns AND s.n > 0 THEN 100.0 * (s.weighted::DOUBLE / 1e6) / (w.hi_ns - w.lo_ns) END
           AS sm_efficiency_pct,
       CASE WHEN o.occ_d > 0 THEN (o.occ_w::DOUBLE / 1e6) / o.occ_d END AS achieved_occupancy_pct,
       CASE WHEN o.k_ns > 0 THEN 100.0 * coalesce(o.tc_ns, 0) / o.k_ns END AS tensor_core_pct
FROM devices d
JOIN ov_window w ON w.rank = d.rank
LEFT JOIN busy b ON b.rank = d.rank AND b.device = d.device
LEFT JOIN sm s ON s.rank = d.rank AND s.device = d.device
LEFT JOIN occ o ON o.rank = d.rank AND o.device = d.device
ORDER BY d.rank, d.device;
