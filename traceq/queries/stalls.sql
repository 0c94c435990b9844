-- stalls: GPU starvation by cause — how much GPU idle time, in gaps of at least
-- --min-gap-us, the host spent on each activity of the fixed stall vocabulary
-- (the per-gap split and the precedence are defined in stalls_gaps.sql).
--
-- Definition: GPU span = Σ over (rank, device) of (last op end − first op start) in scope
-- (st_busy). For each cause, the gap time attributed to it summed over all gaps.
--
-- Parameters: none. Requires st_busy (stalls_busy.sql) and st_gaps (stalls_gaps.sql).
-- No rows when the scope has no GPU ops (CPU-only trace).
--
-- Output columns (one row per cause, in precedence order):
--   cause       data_loading | communication | synchronization | blocking_copy |
--               memory_management | launch_overhead | host_compute | unattributed
--   gaps        gaps with some time attributed to this cause (a gap can count under several)
--   gaps_main   gaps where this cause has the largest share
--   idle_ns     GPU idle time attributed to the cause, ns
--   idle_pct    100 · idle_ns / GPU span, %
--   share_pct   100 · idle_ns / total idle time in the listed gaps, %
WITH span AS (
    SELECT sum(hi - lo) AS span_ns
    FROM (SELECT key, min(start_ns) AS lo, max(end_ns) AS hi FROM st_busy GROUP BY key)
), causes(ord, cause) AS (
    VALUES (1, 'data_loading'), (2, 'communication'), (3, 'synchronization'), (4, 'blocking_copy'),
           (5, 'memory_management'), (6, 'launch_overhead'), (7, 'host_compute'), (8, 'unattributed')
), long AS (
    SELECT 'data_loading' AS cause, data_ns AS ns, cause AS main FROM st_gaps
    UNION ALL SELECT 'communication', comm_ns, cause FROM st_gaps
    UNION ALL SELECT 'synchronization', sync_ns, cause FROM st_gaps
    UNION ALL SELECT 'blocking_copy', copy_ns, cause FROM st_gaps
    UNION ALL SELECT 'memory_management', memory_ns, cause FROM st_gaps
    UNION ALL SELECT 'launch_overhead', launch_ns, cause FROM st_gaps
    UNION ALL SELECT 'host_compute', host_ns, cause FROM st_gaps
    UNION ALL SELECT 'unattributed', unattributed_ns, cause FROM st_gaps
), per AS (
    SELECT cause,
           count(*) FILTER (WHERE ns > 0) AS gaps,
           count(*) FILTER (WHERE main = cause) AS gaps_main,
           sum(ns) AS idle_ns
    FROM long
    GROUP BY cause
), total AS (
    SELECT sum(gap_ns) AS idle_ns FROM st_gaps
)
SELECT c.cause,
       coalesce(p.gaps, 0) AS gaps,
       coalesce(p.gaps_main, 0) AS gaps_main,
       coalesce(p.idle_ns, 0)::BIGINT AS idle_ns,
       100.0 * coalesce(p.idle_ns, 0) / nullif(s.span_ns, 0) AS idle_pct,
       100.0 * coalesce(p.idle_ns, 0) / nullif(t.idle_ns, 0) AS share_pct
FROM causes c
CROSS JOIN span s
CROSS JOIN total t
LEFT JOIN per p ON p.cause = c.cause
WHERE s.span_ns IS NOT NULL
ORDER BY c.ord
