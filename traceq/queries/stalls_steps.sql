-- stalls_steps: per step, how long the host waited for data and how much of that the GPU
-- sat idle (the PyTorch profiler TensorBoard plugin reports the first as the "DataLoader"
-- share of step time).
--
-- Steps: the scope's steps (temp table scope_steps, from queries/steps.sql: --step-pattern
-- regions, else ProfilerStep#N, else timer BATCH, else DataLoader iterations; narrowed by
-- --skip-first and --steps); a rank without any is one step, first to last event (host or
-- GPU), step_source 'trace'.
-- Overlapping steps are cut at the next step's start so that no time counts twice.
--
-- Per step (times inside the step):
--   data_wait_ns         |data loading ∩ step|: host time in DataLoader spans, timer IO
--                        regions or --data-pattern regions (st_data, any thread of the rank)
--   gpu_idle_ns          |GPU idle gaps ≥ --min-gap-us ∩ step| (st_gaps), summed over the
--                        rank's devices; null when the rank has no GPU ops (CPU-only)
--   gpu_idle_waiting_ns  |GPU idle gaps ∩ data loading ∩ step|: the GPU starved while the
--                        host was loading data (null when CPU-only)
--
-- Parameters: $run (text). Requires scope_window, scope_steps, st_busy, st_data, st_gaps and
-- the macros of intervals.sql.
--
-- Output columns (one row per rank and step, in time order):
--   rank                 rank
--   step                 step number (ProfilerStep N, a number in the --step-pattern names,
--                        else 0-based index): what --steps selects
--   step_source          pattern | ProfilerStep | BATCH | DataLoader | trace
--   start_ns             step start, ns
--   step_ns              step duration (end − start), ns
--   data_wait_ns         host data-loading time in the step, ns
--   data_wait_pct        100 · data_wait_ns / step_ns, %
--   gpu_idle_ns          GPU idle (gaps ≥ min gap) in the step, ns
--   gpu_idle_waiting_ns  GPU idle while the host loads data, ns
--   gpu_idle_waiting_pct 100 · gpu_idle_waiting_ns / step_ns, %
WITH rank_span AS (
    SELECT rank, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM (
        SELECT h.rank, h.start_ns, h.end_ns FROM host_ops h JOIN scope_window w ON w.rank = h.rank
        WHERE h.run = $run AND h.kind <> 'graph_op'   -- graph_op rows hold GPU times
        UNION ALL
        SELECT r.rank, r.start_ns, r.end_ns FROM regions r JOIN scope_window w ON w.rank = r.rank
        WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
        UNION ALL
        SELECT g.rank, g.start_ns, g.end_ns FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
        WHERE g.run = $run
    ) GROUP BY rank
), chosen AS (
    SELECT rank, step, step_source, start_ns, end_ns FROM scope_steps
    UNION ALL
    SELECT s.rank, 0, 'trace', s.start_ns, s.end_ns FROM rank_span s
    WHERE NOT EXISTS (SELECT 1 FROM scope_steps t WHERE t.rank = s.rank)
), steps AS (
    SELECT rank, step, step_source, start_ns, end_ns,
           least(end_ns, coalesce(lead(start_ns) OVER (PARTITION BY rank ORDER BY start_ns, end_ns), end_ns)) AS cut_end_ns
    FROM chosen
), steps_r AS (
    SELECT rank AS key, start_ns, cut_end_ns AS end_ns FROM steps WHERE cut_end_ns > start_ns
), devs AS (
    SELECT DISTINCT key FROM st_busy
), steps_d AS (
    SELECT d.key, s.start_ns, s.end_ns FROM steps_r s JOIN devs d ON d.key.rank = s.key
), data_d AS (
    SELECT d.key, s.start_ns, s.end_ns FROM st_data s JOIN devs d ON d.key.rank = s.key
), gaps_d AS (
    SELECT {'rank': rank, 'device': device} AS key, start_ns, end_ns FROM st_gaps
), idle_data AS (
    SELECT * FROM iv_intersect(gaps_d, data_d)
), wait_pieces AS (
    SELECT p.key AS rank, s.start_ns AS step_start, p.end_ns - p.start_ns AS ns
    FROM iv_intersect(st_data, steps_r) p
    ASOF JOIN steps_r s ON s.key = p.key AND p.start_ns >= s.start_ns
), idle_pieces AS (
    SELECT p.key.rank AS rank, s.start_ns AS step_start, p.end_ns - p.start_ns AS ns
    FROM iv_intersect(gaps_d, steps_d) p
    ASOF JOIN steps_d s ON s.key = p.key AND p.start_ns >= s.start_ns
), idle_wait_pieces AS (
    SELECT p.key.rank AS rank, s.start_ns AS step_start, p.end_ns - p.start_ns AS ns
    FROM iv_intersect(idle_data, steps_d) p
    ASOF JOIN steps_d s ON s.key = p.key AND p.start_ns >= s.start_ns
), agg AS (
    SELECT rank, step_start,
           sum(ns) FILTER (WHERE what = 'wait') AS wait_ns,
           sum(ns) FILTER (WHERE what = 'idle') AS idle_ns,
           sum(ns) FILTER (WHERE what = 'idle_wait') AS idle_wait_ns
    FROM (SELECT 'wait' AS what, * FROM wait_pieces
          UNION ALL SELECT 'idle', * FROM idle_pieces
          UNION ALL SELECT 'idle_wait', * FROM idle_wait_pieces)
    GROUP BY rank, step_start
), gpu_ranks AS (
    SELECT DISTINCT key.rank AS rank FROM st_busy
)
SELECT s.rank, s.step, s.step_source, s.start_ns,
       s.end_ns - s.start_ns AS step_ns,
       coalesce(a.wait_ns, 0)::BIGINT AS data_wait_ns,
       100.0 * coalesce(a.wait_ns, 0) / nullif(s.end_ns - s.start_ns, 0) AS data_wait_pct,
       CASE WHEN g.rank IS NOT NULL THEN coalesce(a.idle_ns, 0)::BIGINT END AS gpu_idle_ns,
       CASE WHEN g.rank IS NOT NULL THEN coalesce(a.idle_wait_ns, 0)::BIGINT END AS gpu_idle_waiting_ns,
       CASE WHEN g.rank IS NOT NULL
            THEN 100.0 * coalesce(a.idle_wait_ns, 0) / nullif(s.end_ns - s.start_ns, 0) END AS gpu_idle_waiting_pct
FROM steps s
LEFT JOIN agg a ON a.rank = s.rank AND a.step_start = s.start_ns
LEFT JOIN gpu_ranks g ON g.rank = s.rank
ORDER BY s.rank, s.start_ns
