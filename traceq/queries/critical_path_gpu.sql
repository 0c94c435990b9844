-- critical_path_gpu: the GPU ops the critical path walks and the host calls that launched
-- them (input of traceq/engine/cp_graph.py), per rank of the scope.
--
-- Definition: every kernel, memcpy and memset of the scope's ranks (GPU-side sync markers
-- are no work and are left out). Its launch call: the runtime/driver host call of the same
-- rank, process and correlation id (the earliest, when two carry it); a graph launch
-- (cudaGraphLaunch/hipGraphLaunch) launches every kernel it replays.
--
-- Parameters: $run (text). Requires scope_window and the host-API macros.
--
-- Output columns (one row per GPU op, by device, stream and start):
--   rank, pid, device, stream   where it ran and the process that launched it
--   kind                kernel | memcpy | memset
--   name, category      the op's name and category (traceq/rules/categories.toml)
--   start_ns, end_ns    the op, ns
--   call_tid            the launching thread (null without a launch call)
--   call_start_ns       the launch call's start, ns (null without one)
--   graph               the launch call is a graph launch
WITH calls AS (
    SELECT rank, pid, correlation, arg_min(tid, start_ns) AS tid, min(start_ns) AS start_ns,
           bool_or(host_is_graph_launch(kind, name)) AS graph
    FROM host_ops
    WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND kind IN ('runtime', 'driver')
      AND correlation IS NOT NULL
    GROUP BY rank, pid, correlation
)
SELECT g.rank, g.pid, g.device, g.stream, g.kind, g.name, g.category, g.start_ns, g.end_ns,
       c.tid AS call_tid, c.start_ns AS call_start_ns, coalesce(c.graph, false) AS graph
FROM gpu_ops g
LEFT JOIN calls c ON c.rank = g.rank AND c.pid = g.pid AND c.correlation = g.correlation
WHERE g.run = $run AND g.rank IN (SELECT rank FROM scope_window)
  AND g.kind IN ('kernel', 'memcpy', 'memset') AND g.end_ns >= g.start_ns
ORDER BY g.rank, g.device, g.stream, g.start_ns, g.end_ns
