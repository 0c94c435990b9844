-- advice_ops: the evidence table of the advice rules (traceq/advice): every GPU op of the
-- scope with the host context that launched it.
--
-- Definition: GPU ops of kind kernel, memcpy or memset that start inside the scope's step
-- window. The launching call is the runtime/driver host op with the same rank, process and
-- correlation id. A launch is "in zero_grad" when that call lies inside (same rank and
-- thread, closed bounds) a region or cpu op named like `Optimizer.zero_grad#…` or
-- `*zero_grad*`, and "in optimizer" when it lies inside one named like
-- `Optimizer.step#…` / `optimizer*step` / `*optimizer*` (Kineto record_function
-- annotations, NVTX ranges). Ops without a launching call (nsys/Kineto without host
-- records) have both flags false.
--
-- Parameters: $run (text), $by_rank (boolean: the groups per rank; false: over the scope's
-- ranks, rank null). Requires scope_window and the macros of intervals.sql
-- (traceq.queries.install_macros).
--
-- Output columns (one row per distinct (kind, name, category, library, src_kind, dst_kind,
-- in_zero_grad, in_optimizer): the ops grouped, so the rules stay cheap on big traces):
--   rank                         the rank with $by_rank, else null
--   kind, name, identity, category, library   the ops (identity and library:
--                                traceq.kernels.identity; category: traceq.rules.categories)
--   tensor_core                  the kernel runs on tensor/matrix cores by its name
--                                (traceq.kernels.tensor_cores; null: not a kernel, or a store
--                                ingested before the column existed)
--   src_kind, dst_kind           memcpy only
--   in_zero_grad                 launched inside a zero_grad context (bool)
--   in_optimizer                 launched inside an optimizer-step context (bool)
--   n                            number of ops
--   dur_ns                       Σ (end_ns − start_ns), ns
--   bytes                        Σ bytes (memcpy), bytes
WITH ops AS (
    SELECT g.rank, g.pid, g.correlation, g.kind, g.name, g.identity, g.category, g.library, g.tensor_core,
           g.end_ns - g.start_ns AS dur_ns,
           g.src_kind, g.dst_kind, g.bytes
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
), ctx AS (
    -- the (few) zero_grad / optimizer spans: regions and cpu ops
    SELECT r.rank, r.pid, r.tid, r.start_ns, r.end_ns,
           regexp_matches(r.name, '(?i)zero_grad') AS zg
    FROM regions r JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND coalesce(r.domain, '') <> 'gpu'
      AND regexp_matches(r.name, '(?i)zero_grad|optimizer')
    UNION ALL
    SELECT h.rank, h.pid, h.tid, h.start_ns, h.end_ns, regexp_matches(h.name, '(?i)zero_grad')
    FROM host_ops h JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND h.kind IN ('cpu_op', 'python')
      -- the regular expression runs once per distinct name (a list, which the optimizer does
      -- not push the filter through), not once per op
      AND h.name IN (SELECT unnest(list_filter(list(DISTINCT name),
                                               lambda n: regexp_matches(n, '(?i)zero_grad|^Optimizer\.step|optimizer.*step')))
                     FROM host_ops WHERE run = $run AND kind IN ('cpu_op', 'python'))
), launch AS (
    SELECT h.rank, h.pid, h.tid, h.correlation, h.start_ns, h.end_ns
    FROM host_ops h
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver') AND h.correlation IS NOT NULL
      AND h.rank IN (SELECT rank FROM scope_window)
      AND EXISTS (SELECT 1 FROM ctx)
), ctx_iv AS (
    SELECT {'rank': rank, 'pid': pid, 'tid': tid} AS key, row_number() OVER () AS oid, start_ns, end_ns, zg
    FROM ctx WHERE tid IS NOT NULL
), launch_iv AS (
    SELECT {'rank': rank, 'pid': pid, 'tid': tid} AS key, row_number() OVER () AS iid, rank, pid, correlation,
           start_ns, end_ns
    FROM launch WHERE tid IS NOT NULL
), flagged AS (
    -- launches inside the contexts (closed bounds, same rank, process and thread): the interval
    -- index of intervals.sql (a plain range join is quadratic in launches x contexts per thread)
    SELECT l.rank, l.pid, l.correlation, bool_or(c.zg) AS in_zero_grad, bool_or(NOT c.zg) AS in_optimizer
    FROM iv_contains(ctx_iv, launch_iv) x
    JOIN ctx_iv c ON c.oid = x.oid
    JOIN launch_iv l ON l.iid = x.iid
    GROUP BY ALL
)
SELECT CASE WHEN $by_rank THEN o.rank END AS rank,
       o.kind, o.name, o.identity, o.category, o.library, o.tensor_core, o.src_kind, o.dst_kind,
       coalesce(f.in_zero_grad, false) AS in_zero_grad,
       coalesce(f.in_optimizer, false) AS in_optimizer,
       count(*) AS n, sum(o.dur_ns)::BIGINT AS dur_ns, coalesce(sum(o.bytes), 0)::BIGINT AS bytes
FROM ops o
LEFT JOIN flagged f ON f.rank = o.rank AND f.pid = o.pid AND f.correlation = o.correlation
GROUP BY ALL
