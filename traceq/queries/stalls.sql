-- stalls: GPU starvation by cause — how much GPU idle time, in gaps of at least
-- --min-gap-us, coincides with data loading, synchronisation, API launch work or other
-- host activity (DESIGN §4.4; the per-gap split is defined in stalls_gaps.sql).
--
-- Definition: GPU span = Σ over (rank, device) of (last op end − first op start) in scope
-- (st_busy). For each cause, the gap time attributed to it (priority split: data loading,
-- then synchronisation, then launch-bound, then other) summed over all gaps.
--
-- Parameters: none. Requires st_busy (stalls_busy.sql) and st_gaps (stalls_gaps.sql).
-- No rows when the scope has no GPU ops (CPU-only trace).
--
-- Output columns (one row per cause, in priority order):
--   cause       data_loading | synchronization | launch_bound | other
--   gaps        gaps with some time attributed to this cause (a gap can count under several)
--   gaps_main   gaps where this cause has the largest share
--   idle_ns     GPU idle time attributed to the cause, ns
--   idle_pct    100 · idle_ns / GPU span, %
--   share_pct   100 · idle_ns / total idle time in the listed gaps, %
WITH span AS (
    SELECT sum(hi - lo) AS span_ns
    FROM (SELECT key, min(start_ns) AS lo, max(end_ns) AS hi FROM st_busy GROUP BY key)
), causes(ord, cause) AS (
    VALUES (1, 'data_loading'), (2, 'synchronization'), (3, 'launch_bound'), (4, 'other')
), long AS (
    SELECT 'data_loading' AS cause, data_ns AS ns, cause AS main FROM st_gaps
    UNION ALL SELECT 'synchronization', sync_ns, cause FROM st_gaps
    UNION ALL SELECT 'launch_bound', launch_ns, cause FROM st_gaps
    UNION ALL SELECT 'other', other_ns, cause FROM st_gaps
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
