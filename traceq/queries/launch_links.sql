-- launch_links: each GPU op of the scope's ranks and the runtime/driver call that launched it
-- (input of stalls_gaps.sql and launch_stats.sql, built once per scope: Scope.ensure_links).
--
-- Definition: a GPU op of kind kernel, memcpy or memset with a correlation id, paired with
-- every runtime/driver host call of the same run, rank, process and correlation id (one row
-- per pair: a correlation carried by two calls gives two rows; an op without such a call
-- gives none). Ops of the whole rank, not only of the scope's window: the queries that need
-- the window filter op_start_ns themselves. A call named cudaGraphLaunch / cuGraphLaunch /
-- hipGraphLaunch (traceq.rules.host_api.GRAPH_LAUNCH) replays a graph: its ops are graph
-- replays (`graph`), not ops that call launched one by one.
--
-- Parameters: $run (text). Requires scope_window and the host-API macros (traceq/rules/host_api.py).
--
-- Output columns (one row per op and call):
--   rank, device, pid        where the op ran and the process that launched it
--   tid                      the launching thread
--   kind                     the op's kind (kernel, memcpy, memset)
--   op_start_ns, op_end_ns   the GPU op, ns
--   call_start_ns, call_end_ns  the launch call on the host, ns
--   graph                    true when the call is a graph launch (the op is replayed from a graph)
SELECT g.rank, g.device, g.pid, h.tid, g.kind, g.start_ns AS op_start_ns, g.end_ns AS op_end_ns,
       h.start_ns AS call_start_ns, h.end_ns AS call_end_ns,
       host_is_graph_launch(h.kind, h.name) AS graph
FROM gpu_ops g
JOIN host_ops h ON h.run = g.run AND h.rank = g.rank AND h.pid = g.pid AND h.correlation = g.correlation
WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset') AND g.correlation IS NOT NULL
  AND h.kind IN ('runtime', 'driver')
  AND g.rank IN (SELECT rank FROM scope_window)
