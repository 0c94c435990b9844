-- operators_launches: the host runtime calls of the operator view and the GPU work each
-- launched (input of traceq/engine/op_tree.py).
--
-- Definition: on every rank of the scope, the runtime API calls ($kinds: the plugin reads
-- CUDA runtime calls, synchronisations included, and no driver calls; traceq's own window adds
-- the driver calls, e.g. Triton's cuLaunchKernel), each with the kernels, copies and memsets
-- whose correlation id is its own (same rank and process; a GPU op whose correlation id
-- several calls share goes to the earliest).
-- An op's self device time is the GPU time its launch calls launched; the calls' host time is
-- taken out of the op's self host time (the plugin: "cpu_self_time does not include runtime's
-- time").
--
-- The plugin's typing ($plugin): torch-tb-profiler 0.4.3 types only the Kineto category
-- "runtime" (PyTorch < 1.10) as a runtime call; "cuda_runtime" calls (every later trace) are
-- no events to it, so on those traces it links no GPU work to any op. Calls whose category the
-- store does not know (host_ops.source_category null: nsys, stores written before it) count.
--
-- Parameters: $run (text), $kinds (list of host_ops kinds), $plugin (bool). Requires scope_window.
--
-- Output columns (one row per launch call):
--   rank, pid, tid    the thread of the call
--   start_ns, end_ns  the call, ns
--   external_id       Kineto "External id": the op that made the call (the plugin's link)
--   gpu_ns            summed duration of the GPU ops it launched, ns
--   tc_ns             the part in kernels that ran on tensor cores (gpu_ops.tensor_core), ns
WITH calls AS (
    SELECT rank, pid, tid, start_ns, end_ns, external_id, correlation,
           row_number() OVER (PARTITION BY rank, pid, correlation ORDER BY start_ns) AS nth
    FROM host_ops
    WHERE run = $run AND kind IN (SELECT unnest($kinds)) AND rank IN (SELECT rank FROM scope_window)
      AND start_ns IS NOT NULL AND end_ns IS NOT NULL
      AND (NOT $plugin OR source_category IS NULL OR source_category = 'runtime')),
gpu AS (
    SELECT rank, pid, correlation, sum(end_ns - start_ns) AS gpu_ns,
           sum(CASE WHEN tensor_core THEN end_ns - start_ns ELSE 0 END) AS tc_ns
    FROM gpu_ops
    WHERE run = $run AND kind IN ('kernel', 'memcpy', 'memset') AND correlation IS NOT NULL
      AND rank IN (SELECT rank FROM scope_window)
    GROUP BY rank, pid, correlation)
SELECT c.rank, c.pid, c.tid, c.start_ns, c.end_ns, c.external_id,
       coalesce(g.gpu_ns, 0)::BIGINT AS gpu_ns, coalesce(g.tc_ns, 0)::BIGINT AS tc_ns
FROM calls c
LEFT JOIN gpu g ON g.rank = c.rank AND g.pid = c.pid AND g.correlation = c.correlation AND c.nth = 1
