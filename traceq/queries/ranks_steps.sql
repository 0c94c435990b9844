-- ranks_steps: step count and mean step time of one rank (its CPU ProfilerStep spans).
--
-- Parameters: $run (text), $rank (int).
-- Output columns (one row): steps (count), step_ns (mean duration, ns; NULL without steps)

SELECT count(*)::BIGINT AS steps, avg(end_ns - start_ns)::BIGINT AS step_ns
FROM regions
WHERE run = $run AND rank = $rank AND source = 'step' AND domain IS NULL AND step IS NOT NULL
