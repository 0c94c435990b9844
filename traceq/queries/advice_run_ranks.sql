-- advice_run_ranks: advice_run.sql per rank — the facts every advice rule needs, for each
-- rank of the scope in one pass (diagnose of every rank, traceq/engine/rank_facts.py).
--
-- Definition: advice_run.sql's, each over the rank's own ops, regions and steps in its
-- window (a rank's `ranks` is 1).
--
-- Parameters: $run (text). Requires scope_window, scope_steps (Scope.ensure_steps) and the
-- macros of framework_macros.sql (traceq.queries.install_macros).
--
-- Output columns (one row per rank of scope_window; the others as advice_run.sql's):
--   rank                         the rank
--   ranks, steps                 1; the rank's steps in scope
--   gpu_ns                       summed duration of the rank's kernels, copies and memsets, ns
--   backward_host, backward_gpu, optimizer_host, optimizer_gpu, optimizers, compiled,
--   devices, pytorch             as advice_run.sql, of the rank
WITH g AS (
    SELECT g.rank, g.name, g.kind, g.category, g.library, count(*) AS n,
           sum(g.end_ns - g.start_ns) AS ns
    FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
    GROUP BY ALL
), names AS (
    SELECT r.rank, r.name, r.source AS what, count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
      AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
    GROUP BY ALL
    UNION ALL
    SELECT h.rank, h.name, 'host', count(*) FROM host_ops h JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND h.kind IN ('cpu_op', 'python')
      AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns))
    GROUP BY ALL
), gf AS (
    SELECT rank,
           coalesce(sum(ns), 0)::BIGINT AS gpu_ns,
           coalesce(sum(n) FILTER (kind = 'kernel' AND regexp_matches(name, '(?i)backward|_bw_|dgrad|wgrad')), 0)
             AS backward_gpu,
           coalesce(sum(n) FILTER (category = 'optimizer'), 0) AS optimizer_gpu,
           coalesce(sum(n) FILTER (kind = 'kernel' AND (library = 'Triton'
               OR regexp_matches(name, '(?i)^triton_|^nvfuser_|^kernel_cutlass_triton'))), 0) AS compiled,
           bool_or(library = 'ATen') AS aten
    FROM g GROUP BY rank
), nf AS (
    SELECT rank,
           coalesce(sum(n) FILTER (regexp_matches(name, '(?i)backward|^autograd::engine')), 0) AS backward_host,
           coalesce(sum(n) FILTER (regexp_matches(name, '(?i)^optimizer\.|zero_grad')), 0) AS optimizer_host,
           coalesce(string_agg(DISTINCT o, ',' ORDER BY o) FILTER (o <> ''), '') AS optimizers,
           coalesce(sum(n) FILTER (regexp_matches(name, '(?i)^CompiledFunction|Torch-Compiled Region|TorchDynamo')), 0)
             AS compiled,
           bool_or(what = 'host' AND pytorch_name(name)) AS torch_host,
           bool_or(what <> 'host' AND pytorch_name(name)) AS torch_regions
    FROM (SELECT *, regexp_extract(name, '(?i)^Optimizer\.step#(\w+)\.step', 1) AS o FROM names)
    GROUP BY rank
), sf AS (
    SELECT rank, count(*) AS steps FROM scope_steps GROUP BY rank
)
SELECT w.rank,
       1 AS ranks,
       coalesce(sf.steps, 0) AS steps,
       coalesce(gf.gpu_ns, 0)::BIGINT AS gpu_ns,
       coalesce(nf.backward_host, 0) AS backward_host,
       coalesce(gf.backward_gpu, 0) AS backward_gpu,
       coalesce(nf.optimizer_host, 0) AS optimizer_host,
       coalesce(gf.optimizer_gpu, 0) AS optimizer_gpu,
       coalesce(nf.optimizers, '') AS optimizers,
       coalesce(gf.compiled, 0) + coalesce(nf.compiled, 0) AS compiled,
       coalesce(m.devices, '') AS devices,
       coalesce(gf.aten, false)::INTEGER + coalesce(nf.torch_host, false)::INTEGER
         + coalesce(nf.torch_regions, false)::INTEGER AS pytorch
FROM scope_window w
LEFT JOIN sf ON sf.rank = w.rank
LEFT JOIN gf ON gf.rank = w.rank
LEFT JOIN nf ON nf.rank = w.rank
LEFT JOIN runs m ON m.run = $run AND m.rank = w.rank
ORDER BY w.rank
