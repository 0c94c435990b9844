-- summary: where the GPU timeline goes, per rank (HTA's temporal breakdown).
--
-- Definition, per rank, over the ops of analysis_ops (summary_ops.sql: which ops, which
-- window, which are "compute"), all streams and devices of the rank pooled:
--   span        = end of the last op − start of the first op
--   busy        = |∪ all ops|            (time at least one op runs)
--   idle        = span − busy            (nothing runs on any stream)
--   compute     = |∪ compute ops|
--   non_compute = span − compute − idle  (busy, but no compute op running: communication,
--                                         copies, memsets, and in the hta window sync rows)
--   *_pct       = 100 · x / span; null when span = 0 (one zero-duration op, or in the hta
--                 window an op its µs rounding empties, ceil of start = floor of end): a
--                 share of nothing is undefined, not 0 or 100 % ("–" in tables)
-- A rank with no op in scope has no row ("no GPU activity").
--
-- Requires: temp table analysis_ops (summary_ops.sql) and the interval macros
-- (intervals.sql: iv_union).
--
-- Output columns:
--   rank             rank
--   ops              number of ops measured
--   span_ns          first op start to last op end, ns
--   busy_ns          union of all ops, ns
--   idle_ns          span − busy, ns
--   compute_ns       union of compute ops, ns
--   non_compute_ns   span − compute − idle, ns
--   idle_pct         100 · idle / span, %
--   compute_pct      100 · compute / span, %
--   non_compute_pct  100 · non_compute / span, %

CREATE OR REPLACE TEMP VIEW summary_all_iv AS
    SELECT rank AS key, start_ns, end_ns FROM analysis_ops;

CREATE OR REPLACE TEMP VIEW summary_compute_iv AS
    SELECT rank AS key, start_ns, end_ns FROM analysis_ops WHERE cls = 'compute';

WITH
busy AS (
    SELECT key AS rank, min(start_ns) AS first_ns, max(end_ns) AS last_ns,
           sum(end_ns - start_ns) AS busy_ns
    FROM iv_union('summary_all_iv') GROUP BY key
),
compute AS (
    SELECT key AS rank, sum(end_ns - start_ns) AS compute_ns
    FROM iv_union('summary_compute_iv') GROUP BY key
),
counts AS (
    SELECT rank, count(*) AS ops FROM analysis_ops GROUP BY rank
),
t AS (
    SELECT b.rank, c.ops,
           (b.last_ns - b.first_ns)                     AS span_ns,
           b.busy_ns::BIGINT                            AS busy_ns,
           coalesce(k.compute_ns, 0)::BIGINT            AS compute_ns
    FROM busy b JOIN counts c USING (rank) LEFT JOIN compute k USING (rank)
)
SELECT
    rank,
    ops,
    span_ns,
    busy_ns,
    span_ns - busy_ns                                   AS idle_ns,
    compute_ns,
    span_ns - compute_ns - (span_ns - busy_ns)          AS non_compute_ns,
    100.0 * (span_ns - busy_ns) / nullif(span_ns, 0)    AS idle_pct,
    100.0 * compute_ns / nullif(span_ns, 0)             AS compute_pct,
    100.0 * (busy_ns - compute_ns) / nullif(span_ns, 0) AS non_compute_pct
FROM t
ORDER BY rank
