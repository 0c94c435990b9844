-- diff: what changed between run A and run B.
--
-- Inputs: the diff_side.sql tables of each run, registered as a_categories, a_kernels,
-- a_regions (run A, the baseline) and b_categories, b_kernels, b_regions (run B).
-- Each key (category; GPU op name; region source + name) is compared with a full outer join:
--   delta_count = count_b − count_a
--   delta_ns    = total_b − total_a               (B slower: positive)
--   delta_pct   = 100 · delta_ns / total_a        (NULL when A has none)
--   status      = appeared    only in B
--                 disappeared only in A
--                 changed     in both, count or total time differ
--                 unchanged   in both, identical count and total time
-- Rows are sorted by |delta_ns|, largest first.
--
-- Output: temp tables diff_categories, diff_kernels, diff_regions with columns
--   category | name, kind, category | source, name   the key (kernels also: identity, library)
--   count_a, count_b       number of ops / region instances in A and B
--   total_a_ns, total_b_ns summed durations in A and B, ns (GPU time; regions: CPU time)
--   delta_count            count_b − count_a
--   delta_ns               total_b − total_a, ns
--   delta_pct              100 · delta / total_a, %
--   status                 appeared | disappeared | changed | unchanged
-- and, as the result, one row per status with the number of kernels (GPU op names) in it:
--   status, kernels

CREATE OR REPLACE TEMP MACRO diff_status(ca, cb, ta, tb) AS
    CASE WHEN coalesce(ca, 0) = 0 THEN 'appeared'
         WHEN coalesce(cb, 0) = 0 THEN 'disappeared'
         WHEN ca <> cb OR ta <> tb THEN 'changed'
         ELSE 'unchanged' END;

CREATE OR REPLACE TEMP TABLE diff_categories AS
WITH j AS (
    SELECT coalesce(a.category, b.category) AS category,
           coalesce(a.count, 0) AS count_a, coalesce(b.count, 0) AS count_b,
           coalesce(a.total_ns, 0) AS total_a_ns, coalesce(b.total_ns, 0) AS total_b_ns
    FROM a_categories a FULL OUTER JOIN b_categories b ON a.category IS NOT DISTINCT FROM b.category
)
SELECT *, count_b - count_a AS delta_count, total_b_ns - total_a_ns AS delta_ns,
       100.0 * (total_b_ns - total_a_ns) / nullif(total_a_ns, 0) AS delta_pct,
       diff_status(count_a, count_b, total_a_ns, total_b_ns) AS status
FROM j ORDER BY abs(delta_ns) DESC, category;

CREATE OR REPLACE TEMP TABLE diff_kernels AS
WITH j AS (
    SELECT coalesce(a.name, b.name) AS name, coalesce(a.identity, b.identity) AS identity,
           coalesce(a.library, b.library) AS library, coalesce(a.kind, b.kind) AS kind,
           coalesce(a.category, b.category) AS category,
           coalesce(a.count, 0) AS count_a, coalesce(b.count, 0) AS count_b,
           coalesce(a.total_ns, 0) AS total_a_ns, coalesce(b.total_ns, 0) AS total_b_ns
    FROM a_kernels a FULL OUTER JOIN b_kernels b ON a.name IS NOT DISTINCT FROM b.name
)
SELECT *, count_b - count_a AS delta_count, total_b_ns - total_a_ns AS delta_ns,
       100.0 * (total_b_ns - total_a_ns) / nullif(total_a_ns, 0) AS delta_pct,
       diff_status(count_a, count_b, total_a_ns, total_b_ns) AS status
FROM j ORDER BY abs(delta_ns) DESC, name;

CREATE OR REPLACE TEMP TABLE diff_regions AS
WITH j AS (
    SELECT coalesce(a.source, b.source) AS source, coalesce(a.name, b.name) AS name,
           coalesce(a.count, 0) AS count_a, coalesce(b.count, 0) AS count_b,
           coalesce(a.total_ns, 0) AS total_a_ns, coalesce(b.total_ns, 0) AS total_b_ns
    FROM a_regions a FULL OUTER JOIN b_regions b ON a.source IS NOT DISTINCT FROM b.source AND a.name IS NOT DISTINCT FROM b.name
)
SELECT *, count_b - count_a AS delta_count, total_b_ns - total_a_ns AS delta_ns,
       100.0 * (total_b_ns - total_a_ns) / nullif(total_a_ns, 0) AS delta_pct,
       diff_status(count_a, count_b, total_a_ns, total_b_ns) AS status
FROM j ORDER BY abs(delta_ns) DESC, source, name;

SELECT status, count(*) AS kernels FROM diff_kernels GROUP BY status ORDER BY status
