-- stalls_ranks: stalls.sql per rank — each rank's GPU idle time by cause, for diagnose's
-- verdict of every rank of a scope in one pass (traceq/engine/rank_facts.py).
--
-- Definition: stalls.sql's, over each rank's own devices and gaps: GPU span = Σ over the
-- rank's devices of (last op end − first op start) in scope (st_busy); per cause, the gap
-- time attributed to it summed over the rank's gaps.
--
-- Parameters: none. Requires st_busy (stalls_busy.sql) and st_gaps (stalls_gaps.sql).
-- No rows for a rank without GPU ops in scope.
--
-- Output columns (per rank, one row per cause, in precedence order):
--   rank        the rank
--   cause       as stalls.sql
--   gaps        gaps of the rank with some time attributed to this cause
--   gaps_main   gaps of the rank where this cause has the largest share
--   idle_ns     the rank's GPU idle time attributed to the cause, ns
--   idle_pct    100 · idle_ns / the rank's GPU span, %
--   share_pct   100 · idle_ns / the rank's idle time in the listed gaps, %
WITH span AS (
    SELECT key.rank AS rank, sum(hi - lo) AS span_ns
    FROM (SELECT key, min(start_ns) AS lo, max(end_ns) AS hi FROM st_busy GROUP BY key)
    GROUP BY key.rank
), causes(ord, cause) AS (
    VALUES (1, 'data_loading'), (2, 'communication'), (3, 'synchronization'), (4, 'blocking_copy'),
           (5, 'memory_management'), (6, 'launch_overhead'), (7, 'host_compute'), (8, 'unattributed')
), long AS (
    SELECT rank, 'data_loading' AS cause, data_ns AS ns, cause AS main FROM st_gaps
    UNION ALL SELECT rank, 'communication', comm_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'synchronization', sync_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'blocking_copy', copy_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'memory_management', memory_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'launch_overhead', launch_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'host_compute', host_ns, cause FROM st_gaps
    UNION ALL SELECT rank, 'unattributed', unattributed_ns, cause FROM st_gaps
), per AS (
    SELECT rank, cause,
           count(*) FILTER (WHERE ns > 0) AS gaps,
           count(*) FILTER (WHERE main = cause) AS gaps_main,
           sum(ns) AS idle_ns
    FROM long
    GROUP BY rank, cause
), total AS (
    SELECT rank, sum(gap_ns) AS idle_ns FROM st_gaps GROUP BY rank
)
SELECT s.rank,
       c.cause,
       coalesce(p.gaps, 0) AS gaps,
       coalesce(p.gaps_main, 0) AS gaps_main,
       coalesce(p.idle_ns, 0)::BIGINT AS idle_ns,
       100.0 * coalesce(p.idle_ns, 0) / nullif(s.span_ns, 0) AS idle_pct,
       100.0 * coalesce(p.idle_ns, 0) / nullif(t.idle_ns, 0) AS share_pct
FROM span s
CROSS JOIN causes c
LEFT JOIN total t ON t.rank = s.rank
LEFT JOIN per p ON p.rank = s.rank AND p.cause = c.cause
WHERE s.span_ns IS NOT NULL
ORDER BY s.rank, c.ord
