-- stalls_gaps: GPU idle gaps and what the host was doing meanwhile.
--
-- Definition: a gap is a hole of at least $min_gap_ns between consecutive busy intervals
-- of one GPU (st_busy, per rank and device; idle time before the first and after the last
-- op is not a gap). Every instant of a gap gets ONE cause: the first of these host
-- activities of the same rank that covers it (fixed vocabulary, in precedence order):
--   1. data_loading       st_data: DataLoader spans, timer IO regions, --data-pattern regions
--   2. communication      the host inside a collective: host ops or regions (any thread)
--                         named like nccl*/rccl*/c10d::*/ProcessGroup*/record_param_comms/
--                         all_reduce/all_gather/reduce_scatter/alltoall or MPI's
--                         point-to-point and collective calls (is_communication_name,
--                         traceq/rules/host_api.py)
--   3. synchronization    blocking waits: host_ops of kind sync_api named *Synchronize
--                         (cudaStream/Device/Event/CtxSynchronize, hip*; cudaStreamWaitEvent
--                         does not block the host and is not counted), and `.item()`:
--                         cpu ops aten::item / aten::_local_scalar_dense
--   4. blocking_copy      synchronous copies: runtime/driver cudaMemcpy*/cuMemcpy*/hipMemcpy*
--                         without "Async", and any copy API call whose copy involves
--                         pageable host memory (gpu_ops src_kind/dst_kind 'Pageable', by
--                         correlation): a pageable cudaMemcpyAsync returns only when staged
--   5. memory_management  allocator calls: runtime/driver cudaMalloc*/cudaFree*/cudaHostAlloc/
--                         cudaHostRegister/Unregister, cuMemAlloc*/cuMemFree*/cuMemCreate/
--                         cuMemMap/cuMemUnmap/cuMemRelease/cuMemHostAlloc, hipMalloc*/hipFree*/
--                         hipHostMalloc/hipHostFree/hipExtMallocWithFlags (allocator churn)
--   6. launch_overhead    a thread that launches GPU work (one of its runtime/driver calls
--                         is linked by correlation id to a GPU op) is inside any other
--                         runtime/driver call: the host is busy issuing work. Threads that
--                         never launch (e.g. NCCL watchdogs polling cudaEventQuery) do not count;
--                         nor do graph launches (cudaGraphLaunch/hipGraphLaunch: their kernels
--                         are graph replays, queued as one, never launch overhead)
--   7. host_compute       a cpu_op / python op of a process that launches GPU work, with no
--                         CUDA API call under it: the host computes (CPU-bound)
--   8. unattributed       nothing recorded (no host activity the trace shows)
-- Host ops of kind graph_op (captured ops replayed from a graph, ingest --graph-capture) hold
-- GPU times and are no host activity. Only the host activity that overlaps some gap is considered. Method: one sweep over the
-- edges of the gaps and of every activity level; each elementary segment inside a gap
-- takes the lowest level covering it. The eight parts add up to the gap exactly.
--
-- Parameters: $run (text), $min_gap_ns (integer). Requires scope_window, scope_links
-- (launch_links.sql), st_busy (stalls_busy.sql), st_data (stalls_data.sql), the macros
-- of intervals.sql and the host-API classes host_is_communication / host_is_sync /
-- host_is_blocking_copy / host_is_memory (traceq/rules/host_api.py: levels 2 to 5 above).
--
-- Output columns (one row per gap):
--   rank, device     where
--   start_ns, end_ns the gap (GPU idle), ns
--   gap_ns           end_ns − start_ns, ns
--   data_ns, comm_ns, sync_ns, copy_ns, memory_ns, launch_ns, host_ns, unattributed_ns
--                    the gap's time by cause (levels 1-8 above), ns
--   cause            the cause with the most time (ties go to the earlier in precedence)
--   queued           the GPU op that ends the gap was already in the GPU's queue when the gap
--                    began (its runtime/driver launch call had returned at or before start_ns):
--                    the host had issued the next work and the GPU waited on something else
--                    (an event, a peer, work the trace does not show). As in HTA's idle-time
--                    breakdown, a gap is the host's (host_wait) only when the next
--                    op was not issued yet; a launch call still running when the gap begins
--                    is the host still launching (HTA: kernel_wait). False when no launch
--                    call of that op is recorded
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
), edges AS (
    SELECT key, start_ns AS t, 0 AS level, 1 AS d FROM gaps
    UNION ALL SELECT key, end_ns, 0, -1 FROM gaps
    UNION ALL SELECT key, start_ns, level, 1 FROM act_near
    UNION ALL SELECT key, end_ns, level, -1 FROM act_near
), at_t AS (
    SELECT key, t,
           sum(d) FILTER (WHERE level = 0) AS d0, sum(d) FILTER (WHERE level = 1) AS d1,
           sum(d) FILTER (WHERE level = 2) AS d2, sum(d) FILTER (WHERE level = 3) AS d3,
           sum(d) FILTER (WHERE level = 4) AS d4, sum(d) FILTER (WHERE level = 5) AS d5,
           sum(d) FILTER (WHERE level = 6) AS d6, sum(d) FILTER (WHERE level = 7) AS d7
    FROM edges GROUP BY key, t
), sweep AS (
    SELECT key, t, lead(t) OVER (PARTITION BY key ORDER BY t) AS t_next,
           sum(coalesce(d0, 0)) OVER w AS in_gap, sum(coalesce(d1, 0)) OVER w AS c1,
           sum(coalesce(d2, 0)) OVER w AS c2, sum(coalesce(d3, 0)) OVER w AS c3,
           sum(coalesce(d4, 0)) OVER w AS c4, sum(coalesce(d5, 0)) OVER w AS c5,
           sum(coalesce(d6, 0)) OVER w AS c6, sum(coalesce(d7, 0)) OVER w AS c7
    FROM at_t
    WINDOW w AS (PARTITION BY key ORDER BY t ROWS UNBOUNDED PRECEDING)
), segs AS (
    SELECT key, t AS start_ns, t_next - t AS ns,
           CASE WHEN c1 > 0 THEN 1 WHEN c2 > 0 THEN 2 WHEN c3 > 0 THEN 3 WHEN c4 > 0 THEN 4
                WHEN c5 > 0 THEN 5 WHEN c6 > 0 THEN 6 WHEN c7 > 0 THEN 7 ELSE 8 END AS level
    FROM sweep
    WHERE in_gap > 0 AND t_next > t
), per_gap AS (
    SELECT g.key, g.start_ns,
           sum(s.ns) FILTER (WHERE s.level = 1) AS l1, sum(s.ns) FILTER (WHERE s.level = 2) AS l2,
           sum(s.ns) FILTER (WHERE s.level = 3) AS l3, sum(s.ns) FILTER (WHERE s.level = 4) AS l4,
           sum(s.ns) FILTER (WHERE s.level = 5) AS l5, sum(s.ns) FILTER (WHERE s.level = 6) AS l6,
           sum(s.ns) FILTER (WHERE s.level = 7) AS l7
    FROM segs s
    ASOF JOIN gaps g ON g.key = s.key AND s.start_ns >= g.start_ns
    GROUP BY g.key, g.start_ns
), queued AS (
    -- gaps whose ending op (an op of the device starting at the gap's end) was enqueued
    -- (launch call returned) no later than the gap's start
    SELECT DISTINCT g.key, g.start_ns
    FROM gaps g
    JOIN scope_links l ON l.rank = g.key.rank AND l.device = g.key.device AND l.op_start_ns = g.end_ns
    WHERE l.call_end_ns <= g.start_ns
), attributed AS (
    SELECT g.key.rank AS rank, g.key.device AS device, g.start_ns, g.end_ns,
           g.end_ns - g.start_ns AS gap_ns,
           coalesce(a.l1, 0)::BIGINT AS data_ns, coalesce(a.l2, 0)::BIGINT AS comm_ns,
           coalesce(a.l3, 0)::BIGINT AS sync_ns, coalesce(a.l4, 0)::BIGINT AS copy_ns,
           coalesce(a.l5, 0)::BIGINT AS memory_ns, coalesce(a.l6, 0)::BIGINT AS launch_ns,
           coalesce(a.l7, 0)::BIGINT AS host_ns, q.key IS NOT NULL AS queued
    FROM gaps g
    LEFT JOIN per_gap a ON a.key = g.key AND a.start_ns = g.start_ns
    LEFT JOIN queued q ON q.key = g.key AND q.start_ns = g.start_ns
)
SELECT rank, device, start_ns, end_ns, gap_ns, data_ns, comm_ns, sync_ns, copy_ns, memory_ns,
       launch_ns, host_ns,
       (gap_ns - data_ns - comm_ns - sync_ns - copy_ns - memory_ns - launch_ns - host_ns)::BIGINT AS unattributed_ns,
       CASE greatest(data_ns, comm_ns, sync_ns, copy_ns, memory_ns, launch_ns, host_ns,
                     gap_ns - data_ns - comm_ns - sync_ns - copy_ns - memory_ns - launch_ns - host_ns)
           WHEN data_ns THEN 'data_loading'
           WHEN comm_ns THEN 'communication'
           WHEN sync_ns THEN 'synchronization'
           WHEN copy_ns THEN 'blocking_copy'
           WHEN memory_ns THEN 'memory_management'
           WHEN launch_ns THEN 'launch_overhead'
           WHEN host_ns THEN 'host_compute'
           ELSE 'unattributed' END AS cause,
       queued
FROM attributed
ORDER BY rank, device, start_ns
