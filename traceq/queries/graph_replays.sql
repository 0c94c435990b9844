-- graph_replays: the kernels of the scope replayed from CUDA/HIP graphs, and how many of them
-- are attributed to the ops that captured them (`traceq ingest --graph-capture`).
--
-- Definition: a kernel is replayed from a graph when the host call with its correlation id
-- (same rank and process) is a graph launch: cudaGraphLaunch / cuGraphLaunch / hipGraphLaunch
-- (traceq.rules.host_api.GRAPH_LAUNCH). It is attributed when its external_id is that of a
-- host_ops row of kind graph_op (a captured op, replayed) of its rank. Kernels that start
-- inside the step window.
--
-- Parameters: $run (text). Requires scope_window and the host-API macros (traceq/rules/host_api.py).
--
-- Output columns (one row):
--   replayed        kernels in scope replayed from a graph
--   attributed      of them, those attributed to a captured op (graph_op)
--   graph_launches  graph launch calls that replayed them
WITH calls AS (
    SELECT h.rank, h.pid, h.correlation
    FROM host_ops h
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
      AND host_is_graph_launch(h.kind, h.name) AND h.rank IN (SELECT rank FROM scope_window)
), k AS (
    SELECT g.rank, g.correlation, g.external_id
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    JOIN calls c ON c.rank = g.rank AND c.pid = g.pid AND c.correlation = g.correlation
    WHERE g.run = $run AND g.kind = 'kernel'
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
), ops AS (
    SELECT DISTINCT rank, external_id FROM host_ops
    WHERE run = $run AND kind = 'graph_op' AND rank IN (SELECT rank FROM scope_window)
)
SELECT count(*) AS replayed,
       count(o.external_id) AS attributed,
       count(DISTINCT (k.rank, k.correlation)) AS graph_launches
FROM k LEFT JOIN ops o ON o.rank = k.rank AND o.external_id = k.external_id
