-- advice_run: facts about the scope that every advice rule needs (traceq/advice).
--
-- Definition:
--   steps        rows of scope_steps (the scope's steps from queries/steps.sql: --step-pattern
--                regions, else ProfilerSteps, timer BATCH, DataLoader iterations); 0 when
--                none (rules then count the whole trace as one step per rank)
--   backward     evidence of a backward pass: host ops or regions named like *backward*
--                / autograd::engine*, or GPU kernels named like *backward* / *_bw_* /
--                *dgrad* / *wgrad* (cuDNN gradient kernels)
--   optimizer    evidence of an optimizer: regions or cpu ops named like Optimizer.step#… /
--                *zero_grad*, or GPU kernels of category optimizer
-- A scope with neither backward nor optimizer evidence is an inference trace: no training
-- advice is given for it.
--   optimizers   the optimizer classes PyTorch names in its step regions/ops
--                (`Optimizer.step#SGD.step` -> SGD), comma-separated, sorted; '' when none
--   compiled     evidence of compiled (fused) GPU code: kernels of library Triton or named
--                like triton_*/nvfuser_*, or host ops/regions of torch.compile's runtime
--                (CompiledFunction, Torch-Compiled Region, TorchDynamo)
--   devices      the ranks' device lists (runs.devices JSON), '|'-separated
--   pytorch      PyTorch evidence, as queries/framework.sql defines it (kernels of library
--                ATen; host ops; regions with a PyTorch name): without it advice names
--                CUDA/HIP calls, not PyTorch APIs
--
-- Parameters: $run (text). Requires scope_window, scope_steps (Scope.ensure_steps) and the
-- macros of framework_macros.sql (traceq.queries.install_macros).
--
-- Output columns (one row):
--   ranks, steps                 ranks in scope; steps in scope (as defined above)
--   gpu_ns                       summed duration of kernels, copies and memsets, ns
--   backward_host, backward_gpu  host ops/regions and GPU kernels showing a backward pass
--   optimizer_host, optimizer_gpu  host ops/regions and GPU kernels showing an optimizer
--   optimizers                   optimizer class names, comma-separated ('' when none)
--   compiled                     kernels and host ops/regions of compiled code
--   devices                      device lists of the ranks in scope ('' when unknown)
--   pytorch                      kinds of PyTorch evidence found, 0-3
WITH g AS (
    SELECT g.name, g.kind, g.category, g.library, count(*) AS n
    FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
    GROUP BY ALL
), gpu_time AS (
    SELECT coalesce(sum(g.end_ns - g.start_ns), 0)::BIGINT AS ns
    FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
), names AS (
    -- per distinct name (the regular expressions below run once per name, not per event)
    SELECT r.name, r.source AS what, count(*) AS n FROM regions r JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
      AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
    GROUP BY ALL
    UNION ALL
    SELECT h.name, 'host', count(*) FROM host_ops h JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND h.kind IN ('cpu_op', 'python')
      AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns))
    GROUP BY ALL
)
SELECT (SELECT count(*) FROM scope_window) AS ranks,
       (SELECT count(*) FROM scope_steps) AS steps,
       (SELECT ns FROM gpu_time) AS gpu_ns,
       (SELECT coalesce(sum(n), 0) FROM names WHERE regexp_matches(name, '(?i)backward|^autograd::engine')) AS backward_host,
       (SELECT coalesce(sum(n), 0) FROM g WHERE kind = 'kernel'
               AND regexp_matches(name, '(?i)backward|_bw_|dgrad|wgrad')) AS backward_gpu,
       (SELECT coalesce(sum(n), 0) FROM names WHERE regexp_matches(name, '(?i)^optimizer\.|zero_grad')) AS optimizer_host,
       (SELECT coalesce(sum(n), 0) FROM g WHERE category = 'optimizer') AS optimizer_gpu,
       (SELECT coalesce(string_agg(DISTINCT o, ',' ORDER BY o), '') FROM (
            SELECT regexp_extract(name, '(?i)^Optimizer\.step#(\w+)\.step', 1) AS o FROM names) WHERE o <> '') AS optimizers,
       (SELECT coalesce(sum(n), 0) FROM g WHERE kind = 'kernel' AND (library = 'Triton'
               OR regexp_matches(name, '(?i)^triton_|^nvfuser_|^kernel_cutlass_triton')))
         + (SELECT coalesce(sum(n), 0) FROM names
            WHERE regexp_matches(name, '(?i)^CompiledFunction|Torch-Compiled Region|TorchDynamo'))
         AS compiled,
       (SELECT coalesce(string_agg(DISTINCT r.devices, '|'), '') FROM runs r
        WHERE r.run = $run AND r.rank IN (SELECT rank FROM scope_window)) AS devices,
       (SELECT count(*) FROM (SELECT 1 FROM g WHERE library = 'ATen' LIMIT 1))
         + (SELECT count(*) FROM (SELECT 1 FROM names WHERE what = 'host' AND pytorch_name(name) LIMIT 1))
         + (SELECT count(*) FROM (SELECT 1 FROM names WHERE what <> 'host' AND pytorch_name(name) LIMIT 1)) AS pytorch
