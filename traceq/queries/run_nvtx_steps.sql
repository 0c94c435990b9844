-- run_nvtx_steps: training steps marked by NVTX ranges, for runs without ProfilerStep, timer
-- BATCH or DataLoader regions (nsys traces of code that wraps each iteration in an NVTX range,
-- as Extra-Deep's training-step reader expects).
--
-- A step range is an NVTX range (source nvtx, not a GPU-side span) whose name, ignoring case,
-- is `step`, `train_step`, `training step`, `iteration`, `iter` or `batch`, optionally followed
-- by a separator and a number (`step 12`, `train_step#3`). Per rank only the outermost such
-- ranges count (the smallest depth among them), numbered 0, 1, ... in time order.
--
-- Parameters: $run (text).
-- Output columns (one row per rank and step): rank, step (0-based), step_source ('NVTX'),
--   step_ns (range duration, ns), data_wait_ns (null: not known from NVTX alone).
WITH cand AS (
    SELECT rank, start_ns, end_ns, depth FROM regions
    WHERE run = $run AND source = 'nvtx' AND coalesce(domain, '') <> 'gpu' AND end_ns > start_ns
      AND regexp_matches(lower(name), '^\s*(train(ing)?[ _-]?)?(step|iteration|iter|batch)([ _#:.-]*\d+)?\s*$')
), top AS (
    SELECT rank, min(depth) AS depth FROM cand GROUP BY rank
)
SELECT c.rank, (row_number() OVER (PARTITION BY c.rank ORDER BY c.start_ns) - 1)::BIGINT AS step,
       'NVTX' AS step_source, c.end_ns - c.start_ns AS step_ns, CAST(NULL AS BIGINT) AS data_wait_ns
FROM cand c JOIN top t ON t.rank = c.rank AND t.depth = c.depth
ORDER BY c.rank, c.start_ns
