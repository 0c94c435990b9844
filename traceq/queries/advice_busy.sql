-- advice_busy: what the GPU is busy with, per rank, for diagnose's verdict and the
-- exposed-communication finding (traceq/advice/run_facts.py).
--
-- Definition, per (rank, device), over the GPU ops of kind kernel, memcpy or memset of the
-- scope (clipped to the step window when --steps is given, as stalls_busy.sql does), then
-- summed over the rank's devices (the GPU span of the stall attribution: Σ per device):
--   span_ns          last op end − first op start
--   busy_ns          |∪ all ops|
--   comm_ns          |∪ communication kernels|   (category communication: NCCL/RCCL/...)
--   exposed_comm_ns  |∪ comm − ∪ compute|        (communication no compute hides: the step
--                                                 waits for it; HTA's exposed communication)
--   copy_ns          |∪ copies and memsets|       (kind memcpy/memset, category memcpy/memset)
--   exposed_copy_ns  |∪ copies − ∪ (compute ∪ comm)| (the GPU does nothing but copy)
--   comm_ops         number of communication kernels
-- compute = every other kernel (not communication, memcpy, memset or sync), as summary_ops.sql.
--
-- Parameters: $run (text). Requires scope_window and the macros of intervals.sql.
--
-- Output columns: one row per rank with the columns above.
CREATE OR REPLACE TEMP TABLE ab_ops AS
SELECT {'rank': g.rank, 'device': g.device} AS key,
       CASE WHEN w.lo_ns IS NULL THEN g.start_ns ELSE greatest(g.start_ns, w.lo_ns) END AS start_ns,
       CASE WHEN w.lo_ns IS NULL THEN g.end_ns ELSE least(g.end_ns, w.hi_ns) END AS end_ns,
       CASE WHEN g.category = 'communication' THEN 'comm'
            WHEN g.kind IN ('memcpy', 'memset') OR g.category IN ('memcpy', 'memset') THEN 'copy'
            WHEN g.category = 'sync' THEN 'other'
            ELSE 'compute' END AS cls
FROM gpu_ops g
JOIN scope_window w ON w.rank = g.rank
WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
  AND (w.lo_ns IS NULL OR (g.end_ns > w.lo_ns AND g.start_ns < w.hi_ns));

CREATE OR REPLACE TEMP VIEW ab_comm AS SELECT key, start_ns, end_ns FROM ab_ops WHERE cls = 'comm';
CREATE OR REPLACE TEMP VIEW ab_compute AS SELECT key, start_ns, end_ns FROM ab_ops WHERE cls = 'compute';
CREATE OR REPLACE TEMP VIEW ab_copy AS SELECT key, start_ns, end_ns FROM ab_ops WHERE cls = 'copy';
CREATE OR REPLACE TEMP VIEW ab_work AS SELECT key, start_ns, end_ns FROM ab_ops WHERE cls IN ('comm', 'compute');
CREATE OR REPLACE TEMP TABLE ab_comm_u AS SELECT * FROM iv_union('ab_comm');
CREATE OR REPLACE TEMP TABLE ab_compute_u AS SELECT * FROM iv_union('ab_compute');
CREATE OR REPLACE TEMP TABLE ab_copy_u AS SELECT * FROM iv_union('ab_copy');
CREATE OR REPLACE TEMP TABLE ab_work_u AS SELECT * FROM iv_union('ab_work');

WITH dev AS (
    SELECT key, min(start_ns) AS first_ns, max(end_ns) AS last_ns, count(*) FILTER (cls = 'comm') AS comm_ops
    FROM ab_ops GROUP BY key
), busy AS (
    SELECT key, sum(end_ns - start_ns) AS ns FROM iv_union('ab_ops') GROUP BY key
), comm AS (
    SELECT key, sum(end_ns - start_ns) AS ns FROM ab_comm_u GROUP BY key
), comm_hidden AS (
    SELECT key, sum(end_ns - start_ns) AS ns FROM iv_intersect('ab_comm_u', 'ab_compute_u') GROUP BY key
), copy AS (
    SELECT key, sum(end_ns - start_ns) AS ns FROM ab_copy_u GROUP BY key
), copy_hidden AS (
    SELECT key, sum(end_ns - start_ns) AS ns FROM iv_intersect('ab_copy_u', 'ab_work_u') GROUP BY key
)
SELECT d.key.rank AS rank,
       sum(d.last_ns - d.first_ns)::BIGINT                                    AS span_ns,
       coalesce(sum(b.ns), 0)::BIGINT                                         AS busy_ns,
       coalesce(sum(c.ns), 0)::BIGINT                                         AS comm_ns,
       coalesce(sum(c.ns - coalesce(ch.ns, 0)), 0)::BIGINT                    AS exposed_comm_ns,
       coalesce(sum(p.ns), 0)::BIGINT                                         AS copy_ns,
       coalesce(sum(p.ns - coalesce(ph.ns, 0)), 0)::BIGINT                    AS exposed_copy_ns,
       sum(d.comm_ops)::BIGINT                                                AS comm_ops
FROM dev d
LEFT JOIN busy b USING (key) LEFT JOIN comm c USING (key) LEFT JOIN comm_hidden ch USING (key)
LEFT JOIN copy p USING (key) LEFT JOIN copy_hidden ph USING (key)
GROUP BY d.key.rank
ORDER BY rank
