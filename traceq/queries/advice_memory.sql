-- advice_memory: does the scope churn device memory? (allocator_churn and warmup,
-- traceq/advice/run_facts.py: RunFacts.churn)
--
-- Definition, over the allocator calls of the scope (host-API class host_is_memory,
-- traceq/rules/host_api.py) that start in the step window:
--   a free      a call whose name gives memory back ($free: *free*, release, unmap,
--               unregister) lasting $free_min to $slow_alloc ns: cudaFree(0), the idiom that
--               creates the context, returns at once and frees nothing; a call of $slow_alloc
--               or more is context/library initialisation (advice_warm.sql)
--   frees       the number of frees
--   allocs      the number of calls that take memory
--   reallocs    allocations that start after the rank's first free: memory given back and
--               taken again
--
-- Parameters: $run (text), $free (regex), $free_min, $slow_alloc (ns), $by_rank (boolean: a
-- row per rank with allocator calls; false: one row over the scope, rank null, no row when
-- the scope has no allocator call). Requires scope_window and the macros of host_api.py.
--
-- Output columns: rank (null unless $by_rank), frees, allocs, reallocs.
WITH m AS (
    SELECT h.rank, h.start_ns, regexp_matches(h.name, $free) AS gives,
           h.end_ns - h.start_ns BETWEEN $free_min AND $slow_alloc AS real
    FROM host_ops h JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND host_is_memory(h.kind, h.name)
      AND (w.lo_ns IS NULL OR (h.start_ns >= w.lo_ns AND h.start_ns < w.hi_ns))
), first_free AS (
    SELECT rank, min(start_ns) AS t FROM m WHERE gives AND real GROUP BY rank
)
SELECT CASE WHEN $by_rank THEN rank END          AS rank,
       count(*) FILTER (gives AND real)             AS frees,
       count(*) FILTER (NOT gives)                  AS allocs,
       count(*) FILTER (NOT gives AND m.start_ns > ff.t) AS reallocs
FROM m LEFT JOIN first_free ff USING (rank)
GROUP BY 1 ORDER BY 1
