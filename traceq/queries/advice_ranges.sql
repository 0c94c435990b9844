-- advice_ranges: GPU idle time no stall cause explains, named by the user range the host
-- was in (the idle_in_range finding, traceq/advice/run_facts.py).
--
-- Definition: the unexplained part of a gap is its unattributed time (stalls_gaps.sql: the
-- host shows no activity of the stall vocabulary; start-up time already carved out,
-- traceq.advice.run_facts.carve_warm) in gaps the host was late for (not `queued`: the op
-- ending the gap was not launched yet). It is attributed to the innermost (deepest, then
-- latest-starting) user range that covers the gap's midpoint on a thread of the rank that
-- launches GPU work (a runtime/driver call with a correlation id): an NVTX or annotation
-- region, not GPU-side, not named like PyTorch's own ranges (pytorch_name: ProfilerStep#,
-- Optimizer.*, nn.Module:, aten:: ops of emit_nvtx, DDP/FSDP forward, the op markers of DLProf/pyprof ({'mod': ..., 'op': ...}), ...; the framework's
-- time is host_bound's)
-- and not start-up work (is_warmup_name). Names are grouped with their numbers replaced by
-- `*` (ensure_layer_12_weights and ensure_layer_13_weights are one range,
-- `ensure_layer_*_weights`; numbers inside words, like h2d, stay).
--
-- Parameters: $run (text), $by_rank (boolean: per rank; false: over the scope's ranks, rank
-- null). Requires af_gaps (the gaps, start-up carved out), scope_window
-- and the macros of framework_macros.sql and host_api.py.
--
-- Output columns (one row per range name, most idle first):
--   rank       the rank with $by_rank, else null
--   range      the region name, digits as `*`
--   idle_ns    unexplained idle time inside it, ns
--   gaps       gaps attributed to it
--   instances  distinct regions of that name the gaps fell in
WITH late AS (
    SELECT rank, start_ns, end_ns, unattributed_ns, (start_ns + end_ns) // 2 AS mid_ns
    FROM af_gaps WHERE NOT coalesce(queued, false) AND unattributed_ns > 0
), launcher AS (
    SELECT DISTINCT h.rank, h.pid, h.tid FROM host_ops h
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
      AND h.rank IN (SELECT DISTINCT rank FROM late)
), ranges AS (
    SELECT r.rank, r.name, r.start_ns, r.end_ns, coalesce(r.depth, 0) AS depth
    FROM regions r JOIN launcher l ON l.rank = r.rank AND l.pid = r.pid AND l.tid = r.tid
    WHERE r.run = $run AND r.source IN ('nvtx', 'annotation') AND coalesce(r.domain, '') <> 'gpu'
      AND r.end_ns > r.start_ns AND NOT pytorch_name(r.name) AND NOT is_warmup_name(r.name)
      AND NOT regexp_matches(r.name, '^(DistributedDataParallel|FullyShardedDataParallel)\.|^\{''(mod|traceMarker|funcStack)''')
), hit AS (
    SELECT g.rank, g.start_ns, g.unattributed_ns, r.name, r.start_ns AS r_start,
           row_number() OVER (PARTITION BY g.rank, g.start_ns, g.end_ns ORDER BY r.depth DESC, r.start_ns DESC, r.name) AS k
    FROM late g JOIN ranges r ON r.rank = g.rank AND r.start_ns <= g.mid_ns AND r.end_ns > g.mid_ns
)
SELECT CASE WHEN $by_rank THEN rank END AS rank,
       regexp_replace(name, '(^|[^A-Za-z0-9])[0-9]+', '\1*', 'g') AS range, sum(unattributed_ns)::BIGINT AS idle_ns,
       count(*) AS gaps, count(DISTINCT (rank, name, r_start)) AS instances
FROM hit WHERE k = 1
GROUP BY 1, 2 ORDER BY rank, idle_ns DESC, range
