-- op_points: each GPU op of the scope and the point at which an op call may own it (input of
-- traceq/engine/op_owner.py).
--
-- Definition: kernels, copies and memsets that start inside the step window. The point:
--   a kernel replayed from a CUDA/HIP graph whose captured op is known (its external id is a
--   graph_op's): clock graph, on that graph_op's process and thread, at the kernel's start
--   (graph_op rows span GPU time);
--   any other GPU op launched by a runtime/driver call (same process and correlation id; the
--   earliest such call, whose name and kind say whether it is a graph launch): clock host, on the launching thread, at the call's start;
--   none (null) for an op without either, and for transfers: copies other than
--   device-to-device (host<->device, peer) are bound by the bus, not by the device's memory,
--   and belong to no op.
-- `graph_replay`: launched by a graph launch (host_is_graph_launch) with no captured op known.
--
-- Parameters: $run (text). Requires scope_window and the host-API macros
-- (traceq/rules/host_api.py).
--
-- Output columns (one row per GPU op):
--   rank, device, pid   where it ran
--   name, kind, category, tensor_core   the GPU op (gpu_ops)
--   start_ns, end_ns    the GPU op, ns
--   dur_ns              end_ns - start_ns, ns
--   clock, tid, t_ns    its point (null: no op can own it)
--   graph_replay        replayed from a graph without a known captured op
WITH ops AS (
    SELECT g.rank, g.device, g.pid, g.name, g.kind, g.category, g.tensor_core, g.start_ns, g.end_ns,
           g.correlation, g.external_id,
           g.kind = 'memcpy' AND coalesce(g.copy_kind, '') <> 'DtoD' AS transfer
    FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))),
launch AS (
    SELECT rank, pid, correlation, arg_min(tid, start_ns) AS tid, min(start_ns) AS call_ns,
           arg_min(kind, start_ns) AS call_kind, arg_min(name, start_ns) AS call_name
    FROM host_ops
    WHERE run = $run AND kind IN ('runtime', 'driver') AND correlation IS NOT NULL
      AND rank IN (SELECT rank FROM scope_window)
    GROUP BY rank, pid, correlation),
graph AS (
    SELECT rank, external_id, any_value(pid) AS pid, any_value(tid) AS tid
    FROM host_ops
    WHERE run = $run AND kind = 'graph_op' AND rank IN (SELECT rank FROM scope_window)
    GROUP BY rank, external_id)
SELECT o.rank, o.device, o.pid, o.name, o.kind, o.category, o.tensor_core, o.start_ns, o.end_ns,
       o.end_ns - o.start_ns AS dur_ns,
       CASE WHEN o.transfer THEN NULL WHEN x.tid IS NOT NULL THEN 'graph' WHEN l.tid IS NOT NULL THEN 'host' END AS clock,
       CASE WHEN x.tid IS NOT NULL THEN x.tid ELSE l.tid END AS tid,
       CASE WHEN x.tid IS NOT NULL THEN o.start_ns ELSE l.call_ns END AS t_ns,
       coalesce(x.tid IS NULL AND contains(l.call_name, 'raphLaunch') AND host_is_graph_launch(l.call_kind, l.call_name),
                false) AS graph_replay
FROM ops o
LEFT JOIN launch l ON l.rank = o.rank AND l.pid = o.pid AND l.correlation = o.correlation
LEFT JOIN graph x ON x.rank = o.rank AND x.external_id = o.external_id
