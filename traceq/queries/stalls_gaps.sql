-- stalls_gaps: GPU idle gaps and what the host was doing meanwhile (DESIGN §4.4).
--
-- Definition: a gap is a hole of at least $min_gap_ns between consecutive busy intervals
-- of one GPU (st_busy, per rank and device; idle time before the first and after the last
-- op is not a gap). Each gap's time is split by priority among the host activities of the
-- same rank (any process or thread) that overlap it:
--   1. data_ns    overlaps data loading (st_data: DataLoader spans, timer IO regions,
--                 regions matching --data-pattern);
--   2. sync_ns    else overlaps a blocking synchronisation call: host_ops of kind sync_api
--                 named *Synchronize (cudaStreamSynchronize, cudaDeviceSynchronize,
--                 cudaEventSynchronize, cuCtxSynchronize, ...; cudaStreamWaitEvent does not
--                 block the host and is not counted here), or a blocking copy: runtime/driver
--                 cudaMemcpy*/cuMemcpy*/hipMemcpy* without "Async" in the name;
--   3. launch_ns  else a thread that launches GPU work (one of whose runtime/driver calls
--                 is linked by correlation id to a GPU op) is inside any runtime/driver API
--                 call (launch-bound: the host is busy issuing work and cannot keep the GPU
--                 fed). API calls of threads that never launch (e.g. NCCL watchdog threads
--                 polling cudaEventQuery) do not count;
--   4. other_ns   the rest (host computing in Python/framework code, or idle).
-- With cumulative unions P1 = data, P2 = P1 ∪ sync, P3 = P2 ∪ launching threads' API calls:
--   data = |gap ∩ P1|, sync = |gap ∩ P2| − data, launch = |gap ∩ P3| − |gap ∩ P2|,
--   other = |gap| − |gap ∩ P3|; the four add up to the gap.
--
-- Parameters: $run (text), $min_gap_ns (integer). Requires scope_window, st_busy
-- (stalls_busy.sql), st_data (stalls_data.sql) and the macros of intervals.sql.
--
-- Output columns (one row per gap):
--   rank, device     where
--   start_ns, end_ns the gap (GPU idle), ns
--   gap_ns           end_ns − start_ns, ns
--   data_ns, sync_ns, launch_ns, other_ns   the gap's time by cause (priority split), ns
--   cause            the cause with the most time (data_loading | synchronization |
--                    launch_bound | other; ties go to the earlier in priority order)
WITH gaps AS (
    SELECT key, start_ns, end_ns FROM iv_gaps(st_busy) WHERE end_ns - start_ns >= $min_gap_ns
), devs AS (
    SELECT DISTINCT key FROM gaps
), launcher AS (
    -- threads that launch GPU work: a runtime/driver call of theirs has the correlation id
    -- of a GPU op of the same process (keeps out e.g. NCCL watchdog threads polling
    -- cudaEventQuery, which issue API calls but never feed the GPU)
    SELECT DISTINCT h.rank, h.pid, h.tid
    FROM host_ops h
    JOIN gpu_ops g ON g.run = h.run AND g.rank = h.rank AND g.pid = h.pid AND g.correlation = h.correlation
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
      AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND h.rank IN (SELECT key.rank FROM devs)
), api AS (
    -- host API calls of the ranks with gaps, one copy per device of the rank
    SELECT d.key, h.start_ns, h.end_ns,
           (h.kind = 'sync_api' AND contains(h.name, 'Synchronize'))
           OR (h.kind IN ('runtime', 'driver') AND NOT contains(h.name, 'Async')
               AND (starts_with(h.name, 'cudaMemcpy') OR starts_with(h.name, 'cuMemcpy')
                    OR starts_with(h.name, 'hipMemcpy'))) AS blocking,
           l.rank IS NOT NULL AS on_launcher
    FROM host_ops h
    JOIN scope_window w ON w.rank = h.rank
    JOIN devs d ON d.key.rank = h.rank
    LEFT JOIN launcher l ON l.rank = h.rank AND l.pid = h.pid AND l.tid = h.tid
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver', 'sync_api')
), api_near AS (
    -- only calls that overlap a gap matter: gaps are disjoint and sorted, so the candidate
    -- is the last gap starting before the call ends (a sort-merge ASOF join, not a range join)
    SELECT a.key, a.start_ns, a.end_ns, a.blocking, a.on_launcher
    FROM api a
    ASOF JOIN gaps g ON g.key = a.key AND a.end_ns > g.start_ns
    WHERE g.end_ns > a.start_ns
), p1 AS (
    SELECT d.key, s.start_ns, s.end_ns FROM st_data s JOIN devs d ON d.key.rank = s.key
), p2_in AS (
    SELECT key, start_ns, end_ns FROM p1
    UNION ALL
    SELECT key, start_ns, end_ns FROM api_near WHERE blocking
), p2 AS (
    SELECT * FROM iv_union(p2_in)
), p3_in AS (
    SELECT key, start_ns, end_ns FROM p2
    UNION ALL
    SELECT key, start_ns, end_ns FROM api_near WHERE on_launcher
), p3 AS (
    SELECT * FROM iv_union(p3_in)
), pieces AS (
    SELECT 1 AS level, * FROM iv_intersect(gaps, p1)
    UNION ALL
    SELECT 2, * FROM iv_intersect(gaps, p2)
    UNION ALL
    SELECT 3, * FROM iv_intersect(gaps, p3)
), per_gap AS (
    SELECT g.key, g.start_ns,
           coalesce(sum(p.end_ns - p.start_ns) FILTER (WHERE p.level = 1), 0) AS in1,
           coalesce(sum(p.end_ns - p.start_ns) FILTER (WHERE p.level = 2), 0) AS in2,
           coalesce(sum(p.end_ns - p.start_ns) FILTER (WHERE p.level = 3), 0) AS in3
    FROM pieces p
    ASOF JOIN gaps g ON g.key = p.key AND p.start_ns >= g.start_ns
    GROUP BY g.key, g.start_ns
), attributed AS (
    SELECT g.key.rank AS rank, g.key.device AS device, g.start_ns, g.end_ns,
           g.end_ns - g.start_ns AS gap_ns,
           coalesce(a.in1, 0)::BIGINT AS data_ns,
           (coalesce(a.in2, 0) - coalesce(a.in1, 0))::BIGINT AS sync_ns,
           (coalesce(a.in3, 0) - coalesce(a.in2, 0))::BIGINT AS launch_ns,
           (g.end_ns - g.start_ns - coalesce(a.in3, 0))::BIGINT AS other_ns
    FROM gaps g
    LEFT JOIN per_gap a ON a.key = g.key AND a.start_ns = g.start_ns
)
SELECT rank, device, start_ns, end_ns, gap_ns, data_ns, sync_ns, launch_ns, other_ns,
       CASE greatest(data_ns, sync_ns, launch_ns, other_ns)
           WHEN data_ns THEN 'data_loading'
           WHEN sync_ns THEN 'synchronization'
           WHEN launch_ns THEN 'launch_bound'
           ELSE 'other' END AS cause
FROM attributed
ORDER BY rank, device, start_ns
