-- tb_steps: the steps the TensorBoard profiler plugin (torch-tb-profiler 0.4.3) analyses, per
-- rank of the scope (one plugin "worker" = one rank), as its StepParser builds them.
--
-- Event types: tb_events.sql (the plugin's typing of CPU ops, runtime calls, GPU ops).
--   step      = a span named ProfilerStep#N of any category (cpu_op, user_annotation, and
--               gpu_user_annotation too: a trace with both has each step twice), named N
--
-- Definition, per rank:
--   1. host steps = the ProfilerStep#N spans in start order; none -> one step "0" from the
--      first start to the last end of the CPU ops and Python events (ProfilerStep spans included).
--   2. a runtime call launches the GPU ops with its correlation id. Runtime calls in start
--      order are matched to host steps as the plugin's two-way merge does: call r belongs to
--      the step i with max(end of steps before i) <= r.start < end_i (its "current" step) when
--      it lies inside it (start_i <= r.start, r.end <= end_i); calls across a step boundary
--      belong to none. matched_i = the GPU ops launched by step i's calls.
--   3. When some step matched a GPU op, the steps move to the device side:
--        P = host start of step 0, raised to the end of the latest unmatched GPU op that ends
--            before step 0's first matched GPU op starts (when step 0 matched any)
--        end_i   = max(P, max over j <= i of max(host end_j, last end of step j's matched ops))
--        start_i = max(end_{i-1} (P for step 0), host start_i)
--      and the tail goes: the steps after the last one that matched a GPU op, and that one
--      too when it matched fewer than 80 % of the ops of the step before it (several steps only).
--
-- Requires: tb_host, tb_regions, tb_device (tb_events.sql).
--
-- Output: temp table tb_steps, one row per rank and step in time order:
--   rank      rank
--   step      the step's name (N of ProfilerStep#N; "0" without steps)
--   idx       0-based position among the rank's steps
--   start_ns  step start (device side when moved), ns
--   end_ns    step end, ns
--   matched   GPU ops launched by the runtime calls matched to the step

CREATE OR REPLACE TEMP TABLE tb_host_steps AS
WITH named AS (
    SELECT rank, CAST(step AS VARCHAR) AS step, start_ns, end_ns
    FROM tb_regions WHERE source = 'step' AND step IS NOT NULL
), cpu AS (   -- step 1's fallback: the span of the CPU ops and Python events
    SELECT rank, min(start_ns) AS start_ns, max(end_ns) AS end_ns FROM (
        SELECT rank, start_ns, end_ns FROM tb_host WHERE cat IN ('cpu_op', 'operator', 'python')
        UNION ALL
        SELECT rank, start_ns, end_ns FROM tb_regions WHERE cat IN ('cpu_op', 'operator')
    ) GROUP BY rank
)
SELECT rank, step, start_ns, end_ns,
       row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns, step) - 1 AS idx
FROM named
UNION ALL
SELECT rank, '0', start_ns, end_ns, 0 FROM cpu
WHERE rank NOT IN (SELECT rank FROM named);

CREATE OR REPLACE TEMP TABLE tb_steps AS
WITH hs AS (
    SELECT *, coalesce(max(end_ns) OVER (PARTITION BY rank ORDER BY idx
                                         ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
                       -9223372036854775807) AS before_ns   -- max end of the steps before
    FROM tb_host_steps
), current AS (   -- the steps that can be a call's current step: [before_ns, end_ns) non-empty
    SELECT rank, idx, before_ns, start_ns, end_ns FROM hs WHERE end_ns > before_ns
), rt AS (
    SELECT rank, start_ns, end_ns, correlation FROM tb_host WHERE cat = 'runtime'
), rt_step AS (   -- each runtime call's current step, then whether it lies inside it
    SELECT r.rank, r.correlation, c.idx
    FROM rt r ASOF JOIN current c ON c.rank = r.rank AND r.start_ns >= c.before_ns
    WHERE r.start_ns < c.end_ns AND r.start_ns >= c.start_ns AND r.end_ns <= c.end_ns
), launched AS (   -- the GPU ops of each matched call (correlation ids are per rank)
    SELECT s.rank, s.idx, d.start_ns, d.end_ns, d.correlation
    FROM rt_step s JOIN tb_device d ON d.rank = s.rank AND d.correlation = s.correlation
), per_step AS (
    SELECT rank, idx, count(*) AS matched, min(start_ns) AS dev_start_ns, max(end_ns) AS dev_end_ns
    FROM launched GROUP BY rank, idx
), joined AS (
    SELECT h.rank, h.step, h.idx, h.start_ns, h.end_ns, coalesce(p.matched, 0) AS matched,
           p.dev_start_ns, p.dev_end_ns
    FROM tb_host_steps h LEFT JOIN per_step p ON p.rank = h.rank AND p.idx = h.idx
), gpu_ranks AS (   -- ranks with a matched GPU op: first host start and step 0's first GPU op
    SELECT rank, max(matched) > 0 AS use_gpu, min(start_ns) FILTER (WHERE idx = 0) AS first_ns,
           min(dev_start_ns) FILTER (WHERE idx = 0) AS dev0_ns,
           max(idx) FILTER (WHERE matched > 0) AS last_matched, count(*) AS n
    FROM joined GROUP BY rank
), unmatched_before AS (   -- P: the latest unmatched GPU op end before step 0's first GPU op
    SELECT g.rank, max(d.end_ns) AS end_ns
    FROM gpu_ranks g JOIN tb_device d ON d.rank = g.rank AND d.end_ns < g.dev0_ns
    WHERE g.use_gpu AND NOT EXISTS (SELECT 1 FROM launched l WHERE l.rank = d.rank
                                    AND l.correlation IS NOT DISTINCT FROM d.correlation
                                    AND l.start_ns = d.start_ns AND l.end_ns = d.end_ns)
    GROUP BY g.rank
), moved AS (
    SELECT j.rank, j.step, j.idx, j.matched, g.use_gpu, g.last_matched, g.n,
           j.start_ns AS host_start_ns,
           greatest(coalesce(u.end_ns, g.first_ns), g.first_ns) AS p_ns,
           max(greatest(j.end_ns, coalesce(j.dev_end_ns, j.end_ns)))
               OVER (PARTITION BY j.rank ORDER BY j.idx ROWS UNBOUNDED PRECEDING) AS run_end_ns,
           j.end_ns AS host_end_ns
    FROM joined j JOIN gpu_ranks g ON g.rank = j.rank LEFT JOIN unmatched_before u ON u.rank = j.rank
), device_side AS (
    SELECT *, greatest(p_ns, run_end_ns) AS dev_end_ns FROM moved
), final AS (
    SELECT rank, step, idx, matched, use_gpu, last_matched, n,
           CASE WHEN use_gpu THEN greatest(coalesce(lag(dev_end_ns) OVER w, p_ns), host_start_ns)
                ELSE host_start_ns END AS start_ns,
           CASE WHEN use_gpu THEN dev_end_ns ELSE host_end_ns END AS end_ns,
           lag(matched) OVER w AS prev_matched
    FROM device_side
    WINDOW w AS (PARTITION BY rank ORDER BY idx)
)
SELECT rank, step, idx, start_ns, end_ns, matched
FROM final
WHERE NOT (use_gpu AND n > 1)
   OR idx < last_matched
   OR (idx = last_matched AND NOT (idx > 0 AND prev_matched * 0.8 > matched))
ORDER BY rank, idx;
