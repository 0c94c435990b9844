-- stalls_activity: the GPU idle gaps and the host activity that overlaps them, each with its
-- precedence level: the input of the sweep that splits every gap by cause.
--
-- Definition: the gaps and the levels 1-7 of stalls_gaps.sql (its header states them: data
-- loading, communication, synchronization, blocking copy, memory management, launch overhead,
-- host compute). Only host activity that overlaps some gap is kept. The sweep
-- (traceq/engine/level_sweep.py) then gives each elementary segment of a gap the lowest
-- level that covers it, and stalls_gaps.sql adds the segments up per gap.
--
-- Parameters: $run (text), $min_gap_ns (integer). Requires scope_window, scope_links
-- (launch_links.sql), st_busy (stalls_busy.sql), st_data (stalls_data.sql), the macros of
-- intervals.sql and the host-API classes of traceq/rules/host_api.py.
--
-- Output columns (one row per gap, level 0, and per activity that overlaps a gap):
--   rank, device     the GPU (an activity is repeated for each device of its rank with gaps)
--   start_ns, end_ns the gap or the activity, ns
--   level            0 for a gap, else the activity's precedence level (1-7)
WITH gaps AS (
    SELECT key, start_ns, end_ns FROM iv_gaps(st_busy) WHERE end_ns - start_ns >= $min_gap_ns
), devs AS (
    SELECT DISTINCT key FROM gaps
), launcher AS (
    -- threads that launch GPU work: a runtime/driver call of theirs has the correlation id
    -- of a GPU op of the same process (scope_links)
    SELECT DISTINCT rank, pid, tid
    FROM scope_links
    WHERE rank IN (SELECT key.rank FROM devs)
), pageable AS (
    -- copy API calls whose copy touches pageable host memory
    SELECT DISTINCT g.rank, g.pid, g.correlation
    FROM gpu_ops g
    WHERE g.run = $run AND g.kind = 'memcpy' AND g.correlation IS NOT NULL
      AND (g.src_kind = 'Pageable' OR g.dst_kind = 'Pageable')
), cand AS (
    -- host activity of the ranks with gaps, one copy per device of the rank: host ops (their
    -- level is decided in act_near), collective regions (level 2) and data loading (st_data, level 1)
    SELECT d.key, h.rank, h.pid, h.tid, h.kind, h.name, h.correlation, h.start_ns, h.end_ns, NULL::INTEGER AS level
    FROM host_ops h
    JOIN scope_window w ON w.rank = h.rank
    JOIN devs d ON d.key.rank = h.rank
    WHERE h.run = $run AND h.end_ns > h.start_ns
      AND h.kind <> 'graph_op'   -- captured ops replayed on the GPU (ingest --graph-capture): no host activity
    UNION ALL
    SELECT d.key, r.rank, NULL, NULL, NULL, NULL, NULL, r.start_ns, r.end_ns, 2
    FROM regions r
    JOIN scope_window w ON w.rank = r.rank
    JOIN devs d ON d.key.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu' AND r.end_ns > r.start_ns
      AND is_communication_name(r.name)
    UNION ALL
    SELECT d.key, s.key, NULL, NULL, NULL, NULL, NULL, s.start_ns, s.end_ns, 1
    FROM st_data s JOIN devs d ON d.key.rank = s.key
), near AS (
    -- only activity that overlaps a gap matters: gaps are disjoint and sorted, so the
    -- candidate is the last gap starting before the activity ends (ASOF join, no range join)
    SELECT c.*
    FROM cand c
    ASOF JOIN (SELECT key.rank AS r, key.device AS dv, start_ns AS gs, end_ns AS ge FROM gaps) g
      ON g.r = c.key.rank AND g.dv = c.key.device AND c.end_ns > g.gs
    WHERE g.ge > c.start_ns
), act_near AS (
    -- the precedence level of each activity (NULL = no cause: left out)
    SELECT * FROM (
        SELECT h.key, h.start_ns, h.end_ns,
               coalesce(h.level, CASE
                 WHEN host_is_communication(h.kind, h.name) THEN 2
                 WHEN host_is_sync(h.kind, h.name) THEN 3
                 WHEN host_is_blocking_copy(h.kind, h.name) THEN 4
                 WHEN h.kind IN ('runtime', 'driver') AND p.correlation IS NOT NULL THEN 4
                 WHEN host_is_memory(h.kind, h.name) THEN 5
                 WHEN h.kind IN ('runtime', 'driver', 'sync_api') AND l.tid IS NOT NULL
                      AND NOT host_is_graph_launch(h.kind, h.name) THEN 6
                 WHEN h.kind IN ('cpu_op', 'python')
                      AND h.pid IN (SELECT pid FROM launcher x WHERE x.rank = h.rank) THEN 7
               END) AS level
        FROM near h
        LEFT JOIN launcher l ON l.rank = h.rank AND l.pid = h.pid AND l.tid = h.tid
        LEFT JOIN pageable p ON p.rank = h.rank AND p.pid = h.pid AND p.correlation = h.correlation
                            AND h.kind IN ('runtime', 'driver')
    )
    WHERE level IS NOT NULL
)
SELECT key.rank AS rank, key.device AS device, start_ns, end_ns, 0 AS level FROM gaps
UNION ALL
SELECT key.rank, key.device, start_ns, end_ns, level FROM act_near
