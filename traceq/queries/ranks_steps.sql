-- ranks_steps: step count and mean step time of each rank of the scope (its CPU ProfilerStep spans).
--
-- Parameters: $run (text). Requires scope_window (the ranks).
-- Output columns (one row per rank of scope_window):
--   rank     the rank
--   steps    count of its steps
--   step_ns  mean step duration, ns (NULL without steps)
SELECT w.rank, count(r.rank)::BIGINT AS steps, avg(r.end_ns - r.start_ns)::BIGINT AS step_ns
FROM scope_window w
LEFT JOIN regions r ON r.rank = w.rank AND r.run = $run AND r.source = 'step' AND r.domain IS NULL
                   AND r.step IS NOT NULL
GROUP BY w.rank
ORDER BY w.rank
