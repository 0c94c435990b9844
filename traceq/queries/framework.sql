-- framework: does the scope show PyTorch? Advice names PyTorch APIs (DataLoader,
-- tensor.pin_memory(), torch.compile, ...) only where it does; on anything else (a CUDA/HIP
-- application such as CloverLeaf, a JAX, TensorFlow or TensorRT program, Deep500 timer
-- regions alone) it names the CUDA/HIP runtime calls and framework-neutral fixes instead
-- (traceq/advice, traceq/engine/stall_attribution.py). queries/advice_run.sql computes the same
-- evidence beside its other facts.
--
-- Definition: pytorch = the number of these kinds of evidence in the scope (its ranks, in
-- the step window), each looked for until its first hit:
--   kernels   GPU ops of PyTorch's own kernel library (gpu_ops.library = 'ATen'), which
--             every PyTorch program on a GPU launches (elementwise ops, fills, copies)
--   host ops  cpu ops or Python functions with a PyTorch name (pytorch_name, in
--             queries/framework_macros.sql)
--   regions   regions (other than GPU-side ones) with a PyTorch name
-- 0 means no evidence of PyTorch, not evidence of another framework.
--
-- Parameters: $run (text). Requires scope_window and the macros of framework_macros.sql
-- (traceq.queries.install_macros).
--
-- Output columns (one row):
--   pytorch      kinds of PyTorch evidence found, 0-3
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
            WHERE g.run = $run AND g.library = 'ATen'
              AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns)) LIMIT 1))
     + (SELECT count(*) FROM (
            SELECT 1 FROM host_ops h JOIN scope_window w ON w.rank = h.rank
            WHERE h.run = $run AND h.kind IN ('cpu_op', 'python') AND pytorch_name(h.name)
              AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns)) LIMIT 1))
     + (SELECT count(*) FROM (
            SELECT 1 FROM regions r JOIN scope_window w ON w.rank = r.rank
            WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu' AND pytorch_name(r.name)
              AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns)) LIMIT 1)) AS pytorch
