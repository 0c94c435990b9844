-- launch_stats: how the host feeds the GPU, per rank (the launch CPU time and launch delay of
-- HTA's get_cuda_kernel_launch_stats, defined below).
--
-- Definition: a launch is a host runtime/driver call linked by correlation id (same rank
-- and process) to a GPU kernel of the scope (kernels that start inside the step window).
-- CPU launch time = the call's duration; launch delay = max(0, kernel start − call end)
-- (HTA's launch_delay; large values mean a deep queue: the host runs ahead of the GPU,
-- small ones with GPU idle gaps mean the GPU waits on launches). A CUDA-graph launch is a
-- host call named cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch (one call, many kernels);
-- the kernels it replays are graph replays: counted in `graph_kernels`, never as launches
-- (their launch CPU time and delay are the graph's, not theirs).
--
-- Parameters: $run (text). Requires scope_window, scope_links (launch_links.sql) and the host-API
-- macros (traceq/rules/host_api.py).
--
-- Output columns (one row per rank with kernels):
--   rank                 rank
--   kernels              GPU kernels in scope
--   launches             kernels launched one by one (a launch call each; graph replays not counted)
--   graph_launches       CUDA/HIP graph launch calls in scope
--   graph_kernels        kernels in scope replayed from a graph (by a graph launch call)
--   mean_launch_ns       mean CPU time of a launch call, ns
--   mean_delay_ns        mean launch delay (kernel start − launch call end, ≥ 0), ns
--   median_delay_ns      median launch delay, ns
--   short_kernels_pct    100 · kernels shorter than 10 µs / kernels, %
--   mean_kernel_ns       mean kernel duration, ns
WITH k AS (
    SELECT g.rank, g.pid, g.correlation, g.start_ns, g.end_ns - g.start_ns AS dur_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind = 'kernel'
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
), l AS (
    -- the kernels of k with their launch calls (scope_links: same rank, process, correlation)
    SELECT l.rank, l.call_end_ns - l.call_start_ns AS cpu_ns, greatest(l.op_start_ns - l.call_end_ns, 0) AS delay_ns
    FROM scope_links l
    JOIN scope_window w ON w.rank = l.rank
    WHERE l.kind = 'kernel' AND NOT l.graph
      AND (w.lo_ns IS NULL OR (l.op_start_ns >= w.lo_ns AND l.op_start_ns < w.hi_ns))
), replayed AS (
    SELECT l.rank, count(*) AS n
    FROM scope_links l
    JOIN scope_window w ON w.rank = l.rank
    WHERE l.kind = 'kernel' AND l.graph
      AND (w.lo_ns IS NULL OR (l.op_start_ns >= w.lo_ns AND l.op_start_ns < w.hi_ns))
    GROUP BY l.rank
), graphs AS (
    SELECT h.rank, count(*) AS n
    FROM host_ops h
    JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND host_is_graph_launch(h.kind, h.name)
      AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns))
    GROUP BY h.rank
), ks AS (
    SELECT rank, count(*) AS kernels, count(*) FILTER (WHERE dur_ns < 10000) AS short, avg(dur_ns) AS mean_kernel_ns
    FROM k GROUP BY rank
), ls AS (
    SELECT rank, count(*) AS launches, avg(cpu_ns) AS mean_launch_ns, avg(delay_ns) AS mean_delay_ns,
           median(delay_ns) AS median_delay_ns
    FROM l GROUP BY rank
)
SELECT ks.rank, ks.kernels, coalesce(ls.launches, 0) AS launches, coalesce(g.n, 0) AS graph_launches,
       coalesce(r.n, 0) AS graph_kernels,
       ls.mean_launch_ns, ls.mean_delay_ns, ls.median_delay_ns,
       100.0 * ks.short / ks.kernels AS short_kernels_pct, ks.mean_kernel_ns
FROM ks
LEFT JOIN ls ON ls.rank = ks.rank
LEFT JOIN graphs g ON g.rank = ks.rank
LEFT JOIN replayed r ON r.rank = ks.rank
ORDER BY ks.rank
