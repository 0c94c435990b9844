-- ledger: the inputs of the time ledger's sweep (traceq/engine/ledger.py, ledger_sweep.py):
-- the GPU ops, the idle intervals, and the host activity that explains idle time, each with
-- the label it gives an instant.
--
-- Definition (docs/ledger.md has a worked example). Per (rank, device) of the scope, over the
-- step windows of lg_windows (ledger_windows.sql):
--   GPU ops   kernels, copies and memsets (kind kernel, memcpy, memset; category `sync`
--             records are host waits, not GPU work), by class:
--               1 compute        a kernel that is not communication, copy or memset
--               2 communication  category communication (traceq/rules/categories.toml: NCCL,
--                                RCCL, DeepEP, MSCCL, NVSHMEM, custom all-reduce, ...)
--               3 copy           copies and memsets
--             An instant where an op runs takes the lowest class running (compute hides
--             communication; communication hides copies).
--   idle      the instants of a window where no GPU op runs (lg_idle), including the time
--             before the window's first op and after its last. An idle interval is `queued`
--             from the instant the op that ends it was launched (its launch call returned; the
--             interval's start when that was earlier) to its end: from then on the GPU waited on
--             something other than the host issuing work (the op that ends it: the device's next
--             op, also when the interval is cut by the end of the last window). Idle after the
--             device's last GPU op of the capture is a `tail`.
--   host activity overlapping idle, by label (the stall attribution's precedence, stalls_gaps.sql):
--               4 data               DataLoader spans, timer IO, --data-pattern regions (stalls_data.sql)
--               5 communication_wait the host in a collective or P2P call (is_communication_name)
--               6 sync               *Synchronize calls, .item()/_local_scalar_dense
--               7 blocking_copy      synchronous and pageable copies
--               8 memory_management  allocator calls (host_is_memory)
--               9 warmup             one-off start-up work: context/module/library loading and
--                                    JIT/compile calls (host_is_warmup, is_warmup_name regions),
--                                    slow launches (>= $slow_launch_ns and >= $slow_launch_factor
--                                    x the rank's median launch call: a kernel's first launch loads
--                                    its module, the first runtime call creates the context; their
--                                    recurrence is that of the slow calls launching the same kernel
--                                    name, or of the same API name for a call that launches none),
--                                    allocator calls, and allocator calls of >= $slow_alloc_ns
--                                    (an allocation that takes that long initialises a context or
--                                    a library: cudaFree(0), cuDNN handles; their recurrence is
--                                    that of such slow calls) -- each only when its calls do not recur
--                                    (lg_recurring: its calls start in >= 2 periods, one of them
--                                    in the second half of the capture -- period p >= (n - 1) / 2
--                                    of n -- so it goes on into steady state; periods are the
--                                    rank's steps, or tenths of its capture when it has fewer than
--                                    two); a recurring one keeps its own label (memory_management,
--                                    launch, host_compute)
--              10 launch             a launching thread inside another runtime/driver call
--              11 host_compute       a cpu_op/python op of a process that launches GPU work
--             An idle instant takes the lowest label covering it; 12 unattributed when none.
--             In queued idle, launch and host_compute do not explain the wait: unattributed.
--
-- Parameters: $run (text), $data_pattern (text or NULL), $slow_launch_ns, $slow_launch_factor,
-- $slow_alloc_ns.
-- Requires lg_windows, lg_periods (rank, lo_ns: the periods' starts), scope_window,
-- scope_links, the macros of intervals.sql and the host-API classes of traceq/rules/host_api.py.
--
-- Output columns of the last statement (one row per activity overlapping idle):
--   rank, device, start_ns, end_ns, label   the activity (labels 4-11 above)
CREATE OR REPLACE TEMP TABLE lg_bounds AS
SELECT rank, min(lo_ns) AS lo_ns, max(hi_ns) AS hi_ns FROM lg_windows GROUP BY rank;

CREATE OR REPLACE TEMP TABLE lg_ops AS
SELECT g.rank::INTEGER AS rank, g.device::INTEGER AS device, g.start_ns, g.end_ns,
       CASE WHEN g.category = 'communication' THEN 2
            WHEN g.kind IN ('memcpy', 'memset') OR g.category IN ('memcpy', 'memset') THEN 3
            ELSE 1 END AS cls
FROM gpu_ops g JOIN lg_bounds b ON b.rank = g.rank
WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset') AND coalesce(g.category, '') <> 'sync'
  AND g.end_ns > b.lo_ns AND g.start_ns < b.hi_ns AND g.end_ns >= g.start_ns;

CREATE OR REPLACE TEMP TABLE lg_devs AS SELECT DISTINCT rank, device FROM lg_ops;

-- idle: the windows minus the busy time, per device (blockers: the ops and everything outside
-- the windows; idle = the gaps between blockers)
CREATE OR REPLACE TEMP TABLE lg_idle AS
WITH wd AS (
    SELECT d.rank, d.device, w.lo_ns, w.hi_ns,
           lag(w.hi_ns) OVER (PARTITION BY d.rank, d.device ORDER BY w.lo_ns, w.hi_ns) AS prev_hi
    FROM lg_devs d JOIN lg_windows w ON w.rank = d.rank
), blockers AS (
    SELECT {'rank': rank, 'device': device} AS key, start_ns, end_ns FROM lg_ops
    UNION ALL
    SELECT {'rank': rank, 'device': device}, coalesce(prev_hi, lo_ns - 1), lo_ns FROM wd
    WHERE coalesce(prev_hi, lo_ns - 1) < lo_ns   -- windows that tile time leave no hole between them
    UNION ALL
    SELECT {'rank': rank, 'device': device}, max(hi_ns), max(hi_ns) + 1 FROM wd GROUP BY rank, device
), busy AS (
    SELECT key, start_ns, end_ns FROM iv_union(blockers)
), gaps AS (
    SELECT key, start_ns, end_ns FROM iv_gaps(busy)
), next_op AS (
    -- the next GPU op of the device at or after each idle interval's end (the op that ends it,
    -- or, for idle cut by the end of the last window, the op the capture runs next), by ASOF;
    -- its launch call when recorded
    SELECT g.key, g.start_ns, g.end_ns, o.start_ns AS op_start_ns
    FROM gaps g
    ASOF LEFT JOIN (SELECT rank, device, start_ns FROM gpu_ops
                    WHERE run = $run AND kind IN ('kernel', 'memcpy', 'memset')
                      AND coalesce(category, '') <> 'sync' AND rank IN (SELECT rank FROM lg_devs)) o
      ON o.rank = g.key.rank AND o.device = g.key.device AND o.start_ns >= g.end_ns
), queued AS (
    SELECT n.key, n.start_ns, min(l.call_end_ns) AS launched_ns
    FROM next_op n
    JOIN scope_links l ON l.rank = n.key.rank AND l.device = n.key.device AND l.op_start_ns = n.op_start_ns
    GROUP BY n.key, n.start_ns
)
SELECT n.key.rank AS rank, n.key.device AS device, n.start_ns, n.end_ns,
       CASE WHEN q.launched_ns < n.end_ns THEN greatest(n.start_ns, q.launched_ns) END AS queued_ns,
       n.op_start_ns IS NULL AS tail
FROM next_op n LEFT JOIN queued q ON q.key = n.key AND q.start_ns = n.start_ns;

CREATE OR REPLACE TEMP TABLE lg_data AS
SELECT r.rank AS key, r.start_ns, r.end_ns
FROM regions r JOIN lg_bounds b ON b.rank = r.rank
WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu' AND r.end_ns > r.start_ns
  AND r.end_ns > b.lo_ns AND r.start_ns < b.hi_ns
  AND (r.source = 'dataloader' OR (r.source = 'timer' AND upper(r.name) = 'IO')
       OR ($data_pattern IS NOT NULL AND regexp_matches(r.name, $data_pattern)));

CREATE OR REPLACE TEMP TABLE lg_launch_median AS
SELECT h.rank, median(h.end_ns - h.start_ns) AS ns FROM host_ops h
WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
  AND h.rank IN (SELECT rank FROM lg_devs)
GROUP BY h.rank;

-- host activity of the ranks with GPU ops that overlaps an idle interval (ASOF: idle
-- intervals are disjoint and sorted per device), one copy per device of the rank, with its
-- label and the key its recurrence is judged by
CREATE OR REPLACE TEMP TABLE lg_near AS
WITH launcher AS (
    SELECT DISTINCT rank, pid, tid FROM scope_links WHERE rank IN (SELECT rank FROM lg_devs)
), pageable AS (
    SELECT DISTINCT g.rank, g.pid, g.correlation
    FROM gpu_ops g
    WHERE g.run = $run AND g.kind = 'memcpy' AND g.correlation IS NOT NULL
      AND (g.src_kind = 'Pageable' OR g.dst_kind = 'Pageable')
), cand AS (
    SELECT d.device, h.rank, h.pid, h.tid, h.kind, h.name, h.correlation, h.start_ns, h.end_ns,
           NULL::INTEGER AS label, false AS warm_region
    FROM host_ops h
    JOIN lg_bounds b ON b.rank = h.rank
    JOIN lg_devs d ON d.rank = h.rank
    WHERE h.run = $run AND h.end_ns > h.start_ns AND h.kind <> 'graph_op'
      AND h.end_ns > b.lo_ns AND h.start_ns < b.hi_ns
    UNION ALL
    SELECT d.device, r.rank, NULL, NULL, NULL, r.name, NULL, r.start_ns, r.end_ns,
           CASE WHEN is_communication_name(r.name) THEN 5 END, is_warmup_name(r.name)
    FROM regions r
    JOIN lg_bounds b ON b.rank = r.rank
    JOIN lg_devs d ON d.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu' AND r.end_ns > r.start_ns
      AND (is_communication_name(r.name) OR (r.source IN ('nvtx', 'annotation') AND is_warmup_name(r.name)))
      AND r.end_ns > b.lo_ns AND r.start_ns < b.hi_ns
    UNION ALL
    SELECT d.device, s.key, NULL, NULL, NULL, NULL, NULL, s.start_ns, s.end_ns, 4, false
    FROM lg_data s JOIN lg_devs d ON d.rank = s.key
), near AS (
    SELECT c.*
    FROM cand c
    ASOF JOIN (SELECT rank AS r, device AS dv, start_ns AS gs, end_ns AS ge FROM lg_idle) g
      ON g.r = c.rank AND g.dv = c.device AND c.end_ns > g.gs
    WHERE g.ge > c.start_ns
), launched AS (   -- the kernel each slow launch call near idle launched
    SELECT g.rank, g.pid, g.correlation, min(g.name) AS kname
    FROM gpu_ops g
    JOIN (SELECT DISTINCT rank, pid, correlation FROM near
          WHERE kind IN ('runtime', 'driver') AND correlation IS NOT NULL
            AND end_ns - start_ns >= $slow_launch_ns) s
      ON s.rank = g.rank AND s.pid = g.pid AND s.correlation = g.correlation
    WHERE g.run = $run
    GROUP BY ALL
)
SELECT n.rank, n.device, n.start_ns, n.end_ns, n.name,
       coalesce(n.label, CASE
         WHEN host_is_communication(n.kind, n.name) THEN 5
         WHEN host_is_sync(n.kind, n.name) THEN 6
         WHEN host_is_blocking_copy(n.kind, n.name) THEN 7
         WHEN n.kind IN ('runtime', 'driver') AND p.correlation IS NOT NULL THEN 7
         WHEN host_is_memory(n.kind, n.name) THEN 8
         WHEN n.kind IN ('runtime', 'driver', 'sync_api') AND l.tid IS NOT NULL
              AND NOT host_is_graph_launch(n.kind, n.name) THEN 10
         WHEN n.kind IN ('cpu_op', 'python')
              AND n.pid IN (SELECT pid FROM launcher x WHERE x.rank = n.rank) THEN 11
       END) AS label,
       -- the start-up candidates and the key their recurrence is judged by
       CASE WHEN host_is_memory(n.kind, n.name) AND n.end_ns - n.start_ns >= $slow_alloc_ns THEN '(slow allocator call)'
            WHEN n.warm_region OR host_is_warmup(n.kind, n.name) OR host_is_memory(n.kind, n.name) THEN n.name
            WHEN n.kind IN ('runtime', 'driver') AND n.correlation IS NOT NULL
                 AND n.end_ns - n.start_ns >= $slow_launch_ns
                 AND n.end_ns - n.start_ns >= $slow_launch_factor * m.ns
                 THEN coalesce('(slow launch) ' || k.kname, '(slow call) ' || n.name)
       END AS warm_key,
       n.kind
FROM near n
LEFT JOIN launcher l ON l.rank = n.rank AND l.pid = n.pid AND l.tid = n.tid
LEFT JOIN pageable p ON p.rank = n.rank AND p.pid = n.pid AND p.correlation = n.correlation
                    AND n.kind IN ('runtime', 'driver')
LEFT JOIN lg_launch_median m ON m.rank = n.rank
LEFT JOIN launched k ON k.rank = n.rank AND k.pid = n.pid AND k.correlation = n.correlation;

-- recurrence of each start-up candidate key: the periods its calls start in, over the rank's
-- whole capture (all calls of that name; for slow launches, all slow launch calls)
CREATE OR REPLACE TEMP TABLE lg_recurring AS
WITH keys AS (
    SELECT DISTINCT rank, warm_key FROM lg_near WHERE warm_key IS NOT NULL
), calls AS (
    SELECT h.rank, k.warm_key, h.start_ns
    FROM host_ops h JOIN keys k ON k.rank = h.rank AND k.warm_key = h.name
    WHERE h.run = $run AND NOT (host_is_memory(h.kind, h.name) AND h.end_ns - h.start_ns >= $slow_alloc_ns)
    UNION ALL
    SELECT r.rank, k.warm_key, r.start_ns
    FROM regions r JOIN keys k ON k.rank = r.rank AND k.warm_key = r.name
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
    UNION ALL
    SELECT s.rank, coalesce('(slow launch) ' || min(g.name), '(slow call) ' || any_value(s.name)), any_value(s.start_ns)
    FROM (SELECT h.rank, h.pid, h.correlation, h.start_ns, h.name
          FROM host_ops h JOIN lg_launch_median m ON m.rank = h.rank
          WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
            AND h.end_ns - h.start_ns >= $slow_launch_ns AND h.end_ns - h.start_ns >= $slow_launch_factor * m.ns
            AND h.rank IN (SELECT rank FROM keys WHERE warm_key LIKE '(slow launch) %' OR warm_key LIKE '(slow call) %')) s
    LEFT JOIN gpu_ops g ON g.run = $run AND g.rank = s.rank AND g.pid = s.pid AND g.correlation = s.correlation
    GROUP BY s.rank, s.pid, s.correlation
    UNION ALL
    SELECT h.rank, '(slow allocator call)', h.start_ns
    FROM host_ops h
    WHERE h.run = $run AND host_is_memory(h.kind, h.name) AND h.end_ns - h.start_ns >= $slow_alloc_ns
      AND (h.rank, '(slow allocator call)') IN (SELECT (rank, warm_key) FROM keys)
), placed AS (
    SELECT c.rank, c.warm_key, p.p
    FROM calls c ASOF JOIN lg_periods p ON p.rank = c.rank AND c.start_ns >= p.lo_ns
), n_periods AS (
    SELECT rank, count(*) AS n FROM lg_periods GROUP BY rank
)
SELECT x.rank, x.warm_key, count(DISTINCT x.p) AS periods, any_value(n.n) AS of_periods,
       count(DISTINCT x.p) >= 2 AND 2 * max(x.p) >= any_value(n.n) - 1 AS recurring
FROM placed x JOIN n_periods n ON n.rank = x.rank
GROUP BY x.rank, x.warm_key;

SELECT n.rank, n.device, n.start_ns, n.end_ns,
       CASE WHEN n.warm_key IS NOT NULL AND NOT coalesce(r.recurring, false)
                 AND coalesce(n.label, 99) >= 8 THEN 9
            ELSE n.label END AS label
FROM lg_near n
LEFT JOIN lg_recurring r ON r.rank = n.rank AND r.warm_key = n.warm_key
WHERE n.label IS NOT NULL OR (n.warm_key IS NOT NULL AND NOT coalesce(r.recurring, false))
