-- advice_warm: GPU idle time spent in one-off start-up work, per idle gap (diagnose's
-- `warmup` share and the warmup finding, traceq/advice/run_facts.py).
--
-- Definition: start-up activity = host ops of the gap's rank (any thread) of the host-API
-- class host_is_warmup (traceq/rules/host_api.py: context creation, module/library loading,
-- run-time compilation, framework JIT/compile ops) and NVTX/annotation regions (not
-- GPU-side) named like framework compilation (is_warmup_name). For each gap of af_gaps:
--   warm_ns = |gap ∩ ∪ start-up activity of its rank|
-- Gaps without any are left out.
--
-- Parameters: $run (text). Requires af_gaps (the Stalls result's gaps: rank, device,
-- start_ns, end_ns), scope_window and the macros of intervals.sql and host_api.py.
--
-- Output columns (one row per gap with start-up time):
--   rank, device, start_ns   the gap
--   warm_ns                  its time with start-up activity running, ns
CREATE OR REPLACE TEMP TABLE aw_act AS
SELECT h.rank, h.start_ns, h.end_ns FROM host_ops h JOIN scope_window w ON w.rank = h.rank
WHERE h.run = $run AND h.end_ns > h.start_ns AND host_is_warmup(h.kind, h.name)
  AND h.rank IN (SELECT DISTINCT rank FROM af_gaps)
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
