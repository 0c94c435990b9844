-- advice_warm: GPU idle time spent in one-off start-up work, per idle gap (diagnose's
-- `warmup` share and the warmup finding, traceq/advice/run_facts.py).
--
-- Definition: start-up activity = host ops of the gap's rank (any thread) of the host-API
-- class host_is_warmup (traceq/rules/host_api.py: context creation, module/library loading,
-- run-time compilation, framework JIT/compile ops), NVTX/annotation regions (not GPU-side)
-- named like framework compilation (is_warmup_name), and two kinds of calls that only
-- start-up makes that long:
--   * a launch call (runtime/driver call with a correlation id, i.e. one that launched GPU
--     work) of at least $slow_launch_ns and $slow_launch_factor times the rank's median
--     launch call: the first launch of a kernel loading its module (CUDA lazy loading, ROCm
--     code objects), which a trace shows only as a slow launch;
--   * an allocator call (host_is_memory) of at least $slow_alloc_ns: an allocation or free
--     that returns in microseconds to milliseconds when it only allocates; seconds inside
--     one are context or library initialisation (cudaFree(0) creating the context, cuDNN
--     handles).
-- For each gap of af_gaps:
--   warm_ns = |gap ∩ ∪ start-up activity of its rank|
-- Gaps without any are left out.
--
-- Parameters: $run (text), $slow_launch_ns, $slow_launch_factor, $slow_alloc_ns
-- (traceq/advice/run_facts.py). Requires af_gaps (the Stalls result's gaps: rank, device,
-- start_ns, end_ns), scope_window and the macros of intervals.sql and host_api.py.
--
-- Output columns (one row per gap with start-up time):
--   rank, device, start_ns   the gap
--   warm_ns                  its time with start-up activity running, ns
CREATE OR REPLACE TEMP TABLE aw_launch_median AS
SELECT h.rank, median(h.end_ns - h.start_ns) AS ns FROM host_ops h
WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
  AND h.rank IN (SELECT DISTINCT rank FROM af_gaps)
GROUP BY h.rank;

-- the start-up calls, named as the evidence cites them (a slow launch or allocator call by
-- what it is taken for)
CREATE OR REPLACE TEMP TABLE aw_names AS
-- the classes are decided once per distinct (kind, name), not once per host op
SELECT kind, name, host_is_warmup(kind, name) AS warm, host_is_memory(kind, name) AS mem
FROM (SELECT DISTINCT kind, name FROM host_ops WHERE run = $run AND rank IN (SELECT DISTINCT rank FROM af_gaps))
WHERE host_is_warmup(kind, name) OR host_is_memory(kind, name);

CREATE OR REPLACE TEMP TABLE aw_calls AS
SELECT h.rank, h.start_ns, h.end_ns,
       CASE WHEN n.warm THEN h.name
            WHEN n.mem THEN h.name || ' (slow: initialisation)'
            ELSE h.name || ' (slow first launch: module loading)' END AS name
FROM host_ops h JOIN scope_window w ON w.rank = h.rank
LEFT JOIN aw_names n ON n.kind = h.kind AND n.name = h.name
LEFT JOIN aw_launch_median m ON m.rank = h.rank
WHERE h.run = $run AND h.end_ns > h.start_ns AND h.rank IN (SELECT DISTINCT rank FROM af_gaps)
  AND (coalesce(n.warm, false)
       OR (h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL AND h.end_ns - h.start_ns >= $slow_launch_ns
           AND h.end_ns - h.start_ns >= $slow_launch_factor * m.ns)
       OR (coalesce(n.mem, false) AND h.end_ns - h.start_ns >= $slow_alloc_ns));

CREATE OR REPLACE TEMP TABLE aw_act AS
SELECT rank, start_ns, end_ns FROM aw_calls
UNION ALL
SELECT r.rank, r.start_ns, r.end_ns FROM regions r JOIN scope_window w ON w.rank = r.rank
WHERE r.run = $run AND r.end_ns > r.start_ns AND r.source IN ('nvtx', 'annotation')
  AND coalesce(r.domain, '') <> 'gpu' AND is_warmup_name(r.name)
  AND r.rank IN (SELECT DISTINCT rank FROM af_gaps);

CREATE OR REPLACE TEMP VIEW aw_act_dev AS
SELECT {'rank': a.rank, 'device': d.device} AS key, a.start_ns, a.end_ns
FROM aw_act a JOIN (SELECT DISTINCT rank, device FROM af_gaps) d ON d.rank = a.rank;
CREATE OR REPLACE TEMP TABLE aw_act_u AS SELECT * FROM iv_union('aw_act_dev');
CREATE OR REPLACE TEMP TABLE aw_gaps AS
SELECT {'rank': rank, 'device': device} AS key, start_ns, end_ns FROM af_gaps;

SELECT x.key.rank AS rank, x.key.device AS device, g.start_ns, sum(x.end_ns - x.start_ns)::BIGINT AS warm_ns
FROM iv_intersect('aw_gaps', 'aw_act_u') x
JOIN aw_gaps g ON g.key = x.key AND x.start_ns >= g.start_ns AND x.end_ns <= g.end_ns
GROUP BY ALL
