-- diff_side: what `diff` compares, aggregated for ONE run (run on each side; diff.sql joins).
--
-- Scope: the run $run, its ranks in scope_window (all, or --rank) and, with --steps, the
-- ops / regions that start inside the selected ProfilerSteps. Totals are summed over ranks.
-- GPU ops are kernels, memcpy and memset (as in hotspots; sync rows are waits, not work).
-- Regions are CPU-side spans (NVTX, annotations, ProfilerSteps, DataLoader, timers; GPU-side
-- annotation copies excluded); ProfilerStep#N is counted under the one name
-- "ProfilerStep#*" so that runs with different step numbers compare.
--
-- Parameters: $run (text). Output: temp tables
--   side_categories(category, count, total_ns)           per rule-table category
--   side_kernels(name, identity, library, kind, category, count, total_ns)  per GPU op name
--   side_regions(source, name, count, total_ns)          per region name, CPU durations
-- and, as the result, one row of totals:
--   ranks       ranks in scope with data
--   ops         GPU ops (kernel, memcpy, memset)
--   gpu_ns      summed GPU op durations, ns (concurrent ops both count)

CREATE OR REPLACE TEMP TABLE side_ops AS
SELECT g.rank, g.name, g.identity, g.library, g.kind, coalesce(g.category, 'other') AS category, g.end_ns - g.start_ns AS dur_ns
FROM gpu_ops g
JOIN scope_window w ON w.rank = g.rank
WHERE g.run = $run
  AND g.kind IN ('kernel', 'memcpy', 'memset')
  AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns));

CREATE OR REPLACE TEMP TABLE side_categories AS
SELECT category, count(*) AS count, sum(dur_ns)::BIGINT AS total_ns
FROM side_ops GROUP BY category;

CREATE OR REPLACE TEMP TABLE side_kernels AS
SELECT name, any_value(identity) AS identity, any_value(library) AS library, any_value(kind) AS kind,
       any_value(category) AS category, count(*) AS count,
       sum(dur_ns)::BIGINT AS total_ns
FROM side_ops GROUP BY name;

CREATE OR REPLACE TEMP TABLE side_regions AS
SELECT r.source,
       CASE WHEN r.source = 'step' THEN 'ProfilerStep#*' ELSE r.name END AS name,
       count(*) AS count, sum(r.end_ns - r.start_ns)::BIGINT AS total_ns
FROM regions r
JOIN scope_window w ON w.rank = r.rank
WHERE r.run = $run
  AND r.domain IS DISTINCT FROM 'gpu'
  AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
GROUP BY ALL;

SELECT (SELECT count(DISTINCT rank) FROM side_ops) AS ranks,
       (SELECT count(*) FROM side_ops) AS ops,
       (SELECT coalesce(sum(dur_ns), 0) FROM side_ops)::BIGINT AS gpu_ns
