-- stalls_steps: per step, how long the host waited for data and how much of that the GPU
-- sat idle (DESIGN §4.4; TensorBoard-profiler "DataLoader" share, REFERENCE A3.2/A3.4).
--
-- Steps, per rank, from the first of these that the rank has:
--   1. ProfilerStep#N regions (source step), step = N            step_source 'ProfilerStep'
--   2. timer BATCH regions (source timer, key BATCH), 0-based      step_source 'BATCH'
--   3. DataLoader iterations, when the trace has DataLoader calls but no ProfilerStep (e.g. a
--      profiler run without a schedule): on the thread with the most DataLoader calls, each
--      call starts an iteration that lasts until the next call starts; the last one lasts
--      until the rank's last host activity ends (host_ops and regions). 0-based.
--                                                                  step_source 'DataLoader'
--   4. otherwise the whole rank, first to last event (host or GPU), as one step
--                                                                  step_source 'trace'
-- With --steps only the selected ProfilerSteps are kept (the window needs ProfilerSteps).
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
-- Parameters: $run (text). Requires scope_window, st_busy, st_data, st_gaps and the macros
-- of intervals.sql.
--
-- Output columns (one row per rank and step, in time order):
--   rank                 rank
--   step                 step number (ProfilerStep N, else 0-based index)
--   step_source          ProfilerStep | BATCH | DataLoader | trace
--   start_ns             step start, ns
--   step_ns              step duration (end − start), ns
--   data_wait_ns         host data-loading time in the step, ns
--   data_wait_pct        100 · data_wait_ns / step_ns, %
--   gpu_idle_ns          GPU idle (gaps ≥ min gap) in the step, ns
--   gpu_idle_waiting_ns  GPU idle while the host loads data, ns
--   gpu_idle_waiting_pct 100 · gpu_idle_waiting_ns / step_ns, %
WITH reg AS (
    SELECT r.rank, r.pid, r.tid, r.source, r.name, r.step, r.start_ns, r.end_ns
    FROM regions r
    JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
), host_end AS (
    SELECT rank, max(end_ns) AS end_ns, min(start_ns) AS start_ns FROM (
        SELECT h.rank, h.start_ns, h.end_ns FROM host_ops h JOIN scope_window w ON w.rank = h.rank
        WHERE h.run = $run
        UNION ALL
        SELECT rank, start_ns, end_ns FROM reg
    ) GROUP BY rank
), rank_span AS (
    SELECT rank, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM (
        SELECT rank, start_ns, end_ns FROM host_end
        UNION ALL
        SELECT g.rank, g.start_ns, g.end_ns FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
        WHERE g.run = $run
    ) GROUP BY rank
), dl_calls AS (
    SELECT rank, pid, tid, start_ns FROM reg WHERE source = 'dataloader'
), dl_thread AS (
    SELECT rank, arg_max({'pid': pid, 'tid': tid}, n) AS th
    FROM (SELECT rank, pid, tid, count(*) AS n FROM dl_calls GROUP BY ALL)
    GROUP BY rank
), cand AS (
    SELECT 1 AS prio, rank, step, 'ProfilerStep' AS step_source, start_ns, end_ns
    FROM reg WHERE source = 'step'
    UNION ALL
    SELECT 2, rank, NULL, 'BATCH', start_ns, end_ns
    FROM reg WHERE source = 'timer' AND upper(name) = 'BATCH'
    UNION ALL
    SELECT 3, c.rank, NULL, 'DataLoader', c.start_ns,
           coalesce(lead(c.start_ns) OVER (PARTITION BY c.rank ORDER BY c.start_ns), e.end_ns)
    FROM dl_calls c
    JOIN dl_thread t ON t.rank = c.rank AND t.th.pid IS NOT DISTINCT FROM c.pid AND t.th.tid IS NOT DISTINCT FROM c.tid
    JOIN host_end e ON e.rank = c.rank
    UNION ALL
    SELECT 4, rank, 0, 'trace', start_ns, end_ns FROM rank_span
), chosen AS (
    SELECT c.* FROM cand c
    JOIN scope_window w ON w.rank = c.rank
    WHERE c.prio = (SELECT min(prio) FROM cand c2 WHERE c2.rank = c.rank)
      AND (w.lo_ns IS NULL OR (c.start_ns >= w.lo_ns AND c.start_ns < w.hi_ns))
), steps AS (
    SELECT rank, coalesce(step, row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns) - 1) AS step,
           step_source, start_ns, end_ns,
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
