-- framework_ranks: framework.sql per rank — does each rank of the scope show PyTorch?
-- (diagnose of every rank of a scope in one pass, traceq/engine/rank_facts.py)
--
-- Definition: framework.sql's, over each rank's own ops and regions in its step window:
-- pytorch = the number of the three kinds of evidence (ATen kernels, host ops with a PyTorch
-- name, non-GPU regions with a PyTorch name) the rank shows, 0-3.
--
-- Parameters: $run (text). Requires scope_window and the macros of framework_macros.sql.
--
-- Output columns (one row per rank of scope_window):
--   rank        the rank
--   pytorch     kinds of PyTorch evidence found in the rank, 0-3
WITH aten AS (
    SELECT DISTINCT g.rank FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.library = 'ATen'
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
), host AS (
    -- the macro runs once per distinct (rank, name), not once per op
    SELECT DISTINCT rank FROM (
        SELECT DISTINCT h.rank, h.name FROM host_ops h JOIN scope_window w ON w.rank = h.rank
        WHERE h.run = $run AND h.kind IN ('cpu_op', 'python')
          AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns)))
    WHERE pytorch_name(name)
), reg AS (
    SELECT DISTINCT rank FROM (
        SELECT DISTINCT r.rank, r.name FROM regions r JOIN scope_window w ON w.rank = r.rank
        WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
          AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns)))
    WHERE pytorch_name(name)
)
SELECT w.rank,
       (w.rank IN (SELECT rank FROM aten))::INTEGER + (w.rank IN (SELECT rank FROM host))::INTEGER
         + (w.rank IN (SELECT rank FROM reg))::INTEGER AS pytorch
FROM scope_window w
ORDER BY w.rank
