-- ledger_windows: the window of every step the time ledger partitions (traceq/engine/ledger.py).
--
-- Definition, per rank of the scope:
--   * the steps are the scope's steps (scope_steps: queries/steps.sql, narrowed by --steps and
--     --skip-first); a rank without steps is one step, the whole capture: from its first event
--     (GPU op, host op or region) to its last, step 0, step_source 'capture';
--   * a step's window runs from its start to the later of its end and the end of the last GPU
--     op it launched (an op whose launch call starts inside the step; an op without a recorded
--     launch call counts where it starts): the GPU work a step queued belongs to it;
--   * windows tile time: a window starts no earlier than the previous window of the rank ends
--     (the spill of step N's GPU work is N's, not N+1's) and is empty (lo_ns = hi_ns) when
--     that spill covers the whole next step.
-- The windows of a rank are disjoint and in time order; a window is the same on every device
-- of the rank.
--
-- Parameters: $run (text). Requires scope_window, scope_steps and scope_links.
--
-- Output columns (one row per rank and step):
--   rank, step, step_source   the step (queries/steps.sql's numbers)
--   step_start_ns, step_end_ns  the step as recorded, ns
--   gpu_end_ns                the end of the last GPU op the step launched (NULL: none), ns
--   lo_ns, hi_ns              the window, ns
WITH st AS (
    SELECT s.rank, s.step, s.step_source, s.start_ns, s.end_ns
    FROM scope_steps s JOIN scope_window w ON w.rank = s.rank
), capture AS (
    SELECT rank, min(s) AS start_ns, max(e) AS end_ns FROM (
        SELECT rank, start_ns AS s, end_ns AS e FROM gpu_ops
        WHERE run = $run AND kind IN ('kernel', 'memcpy', 'memset')
        UNION ALL
        SELECT rank, start_ns, end_ns FROM host_ops WHERE run = $run AND kind <> 'graph_op'
        UNION ALL
        SELECT rank, start_ns, end_ns FROM regions WHERE run = $run AND coalesce(domain, '') <> 'gpu'
    ) x
    WHERE rank IN (SELECT rank FROM scope_window) AND rank NOT IN (SELECT rank FROM st)
    GROUP BY rank
), steps AS (
    SELECT rank, step, step_source, start_ns, end_ns FROM st
    UNION ALL
    SELECT rank, 0::BIGINT, 'capture', start_ns, end_ns FROM capture
), launched AS (
    -- each GPU op by the time the host issued it: its launch call's start, else its own start
    SELECT g.rank, coalesce(min(l.call_start_ns), g.start_ns) AS issued_ns, g.end_ns
    FROM gpu_ops g
    LEFT JOIN scope_links l ON l.rank = g.rank AND l.device = g.device AND l.op_start_ns = g.start_ns
                           AND l.op_end_ns = g.end_ns
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND g.rank IN (SELECT rank FROM steps)
    GROUP BY g.rank, g.device, g.start_ns, g.end_ns
), owned AS (
    -- the step an op was issued in: the last step starting at or before the issue (ASOF),
    -- when the issue falls before that step's end
    SELECT s.rank, s.start_ns, max(o.end_ns) AS gpu_end_ns
    FROM launched o
    ASOF JOIN steps s ON s.rank = o.rank AND o.issued_ns >= s.start_ns
    WHERE o.issued_ns < s.end_ns
    GROUP BY s.rank, s.start_ns
), reach AS (
    SELECT s.*, o.gpu_end_ns, greatest(s.end_ns, coalesce(o.gpu_end_ns, s.end_ns)) AS reach_ns
    FROM steps s LEFT JOIN owned o ON o.rank = s.rank AND o.start_ns = s.start_ns
), tiled AS (
    SELECT *, greatest(start_ns, coalesce(max(reach_ns) OVER (PARTITION BY rank ORDER BY start_ns, end_ns
                                          ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), start_ns)) AS lo_ns
    FROM reach
)
SELECT rank::INTEGER AS rank, step::BIGINT AS step, step_source, start_ns AS step_start_ns,
       end_ns AS step_end_ns, gpu_end_ns, lo_ns, greatest(lo_ns, reach_ns) AS hi_ns
FROM tiled
ORDER BY rank, lo_ns, step
