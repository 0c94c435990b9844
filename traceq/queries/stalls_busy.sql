-- stalls_busy: when each GPU is busy (input of `stalls`).
--
-- Definition: per (rank, device), the union of the intervals of all GPU ops of kind kernel,
-- memcpy or memset (`sync` records are host waits, not GPU work; HTA excludes them too),
-- clipped to the scope's step window when --steps is given.
--
-- Parameters: $run (text). Requires scope_window and the macros of intervals.sql.
--
-- Output columns (one row per busy interval):
--   key        struct {rank, device}
--   start_ns   start of a maximal busy interval, ns
--   end_ns     its end, ns
WITH ops AS (
    SELECT {'rank': g.rank, 'device': g.device} AS key,
           CASE WHEN w.lo_ns IS NULL THEN g.start_ns ELSE greatest(g.start_ns, w.lo_ns) END AS start_ns,
           CASE WHEN w.lo_ns IS NULL THEN g.end_ns ELSE least(g.end_ns, w.hi_ns) END AS end_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.end_ns > w.lo_ns AND g.start_ns < w.hi_ns))
)
SELECT key, start_ns, end_ns FROM iv_union(ops)
