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
-- Method: one sweep over the ops' edges per (rank, device): at each instant the number of
-- compute, communication and copy ops running; each elementary segment counts where they say.
--
-- Parameters: $run (text). Requires scope_window.
--
-- Output columns: one row per rank with the columns above.
WITH ops AS (
    SELECT g.rank, g.device,
           CASE WHEN w.lo_ns IS NULL THEN g.start_ns ELSE greatest(g.start_ns, w.lo_ns) END AS s,
           CASE WHEN w.lo_ns IS NULL THEN g.end_ns ELSE least(g.end_ns, w.hi_ns) END AS e,
           CASE WHEN g.category = 'communication' THEN 'comm'
                WHEN g.kind IN ('memcpy', 'memset') OR g.category IN ('memcpy', 'memset') THEN 'copy'
                WHEN g.category = 'sync' THEN 'other'
                ELSE 'compute' END AS cls
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
      AND (w.lo_ns IS NULL OR (g.end_ns > w.lo_ns AND g.start_ns < w.hi_ns))
), edges AS (
    SELECT rank, device, s AS t, 1 AS d, cls FROM ops WHERE e >= s
    UNION ALL
    SELECT rank, device, e AS t, -1 AS d, cls FROM ops WHERE e >= s
), at_t AS (
    SELECT rank, device, t,
           sum(d) AS d_all,
           sum(d) FILTER (cls = 'compute') AS d_compute,
           sum(d) FILTER (cls = 'comm') AS d_comm,
           sum(d) FILTER (cls = 'copy') AS d_copy
    FROM edges GROUP BY rank, device, t
), level AS (
    SELECT rank, device, t,
           sum(d_all) OVER w AS n_all,
           sum(coalesce(d_compute, 0)) OVER w AS n_compute,
           sum(coalesce(d_comm, 0)) OVER w AS n_comm,
           sum(coalesce(d_copy, 0)) OVER w AS n_copy,
           lead(t) OVER (PARTITION BY rank, device ORDER BY t) - t AS len
    FROM at_t
    WINDOW w AS (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING)
), dev AS (
    SELECT rank, device,
           max(t) - min(t)                                                          AS span_ns,
           sum(len) FILTER (n_all > 0)                                              AS busy_ns,
           sum(len) FILTER (n_comm > 0)                                             AS comm_ns,
           sum(len) FILTER (n_comm > 0 AND n_compute = 0)                           AS exposed_comm_ns,
           sum(len) FILTER (n_copy > 0)                                             AS copy_ns,
           sum(len) FILTER (n_copy > 0 AND n_compute = 0 AND n_comm = 0)           AS exposed_copy_ns
    FROM level GROUP BY rank, device
), counts AS (
    SELECT rank, count(*) FILTER (cls = 'comm') AS comm_ops FROM ops GROUP BY rank
)
SELECT d.rank,
       sum(d.span_ns)::BIGINT                          AS span_ns,
       coalesce(sum(d.busy_ns), 0)::BIGINT             AS busy_ns,
       coalesce(sum(d.comm_ns), 0)::BIGINT             AS comm_ns,
       coalesce(sum(d.exposed_comm_ns), 0)::BIGINT     AS exposed_comm_ns,
       coalesce(sum(d.copy_ns), 0)::BIGINT             AS copy_ns,
       coalesce(sum(d.exposed_copy_ns), 0)::BIGINT     AS exposed_copy_ns,
       any_value(c.comm_ops)::BIGINT                   AS comm_ops
FROM dev d JOIN counts c USING (rank)
GROUP BY d.rank
ORDER BY d.rank
