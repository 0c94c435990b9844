-- overview: each step's time split into the TensorBoard profiler plugin's categories (its
-- Overview page, "Step Time Breakdown": torch-tb-profiler 0.4.3, event_parser.py and
-- overall_parser.py), per rank.
--
-- Role ranges (event typing: tb_steps.sql), each the union of its events on the rank:
--   0 Kernel         kernels, except communication kernels
--   1 Memcpy         memcpys;  2 Memset: memsets
--   3 Communication  kernels whose External id is that of a CPU op named exactly
--                    nccl:{broadcast, reduce, all_reduce, all_gather, reduce_scatter} or
--                    gloo:{the same five}, and those ops' own spans (CPU ops, Python events,
--                    user annotations); other collectives (all_to_all, send/recv) are not
--   4 Runtime        runtime calls (the plugin's typing: category "runtime" only)
--   5 DataLoader     CPU ops named enumerate(DataLoader)#….__next__ or enumerate(DataPipe)#…
--   6 CPU Exec       the other CPU ops and Python events (not python_function, not user
--                    annotations, not the ProfilerStep spans)
-- Priority: each instant of the union of the steps goes to the first role (in the order
-- above) active then; Other = instants of no role. A step's category = its instants of that
-- category, so the categories of a step add up to its length (overlapping steps, e.g. a
-- trace's CPU and GPU ProfilerStep#N spans, each count their own instants).
--
-- Requires: tb_host, tb_regions, tb_device (tb_events.sql) and the temp table ov_steps(rank,
-- step, idx, start_ns, end_ns): the steps to split (tb_steps, or traceq's steps with
-- --window all).
--
-- Output columns (one row per rank and step, in step order):
--   rank              rank
--   step              the step's name (ProfilerStep#N -> N)
--   idx               0-based position of the step on its rank
--   step_ns           step length, ns
--   kernel_ns         Kernel, ns
--   memcpy_ns         Memcpy, ns
--   memset_ns         Memset, ns
--   communication_ns  Communication, ns
--   runtime_ns        Runtime, ns
--   dataloader_ns     DataLoader, ns
--   cpu_exec_ns       CPU Exec, ns
--   other_ns          step time in no role, ns

CREATE OR REPLACE TEMP TABLE ov_roles AS
WITH comm_names AS (
    SELECT unnest(['nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
                   'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter'])
           AS name
), host_ops_typed AS (   -- CPU ops and Python events (the plugin's Operator and Python types)
    SELECT rank, name, start_ns, end_ns, external_id FROM tb_host WHERE cat IN ('cpu_op', 'operator', 'python')
), comm_host AS (
    SELECT rank, start_ns, end_ns, external_id FROM host_ops_typed WHERE name IN (SELECT name FROM comm_names)
), comm_ops AS (   -- the communication ops' spans (user annotations and GPU-side ones too)
    SELECT rank, start_ns, end_ns FROM comm_host
    UNION ALL
    SELECT rank, start_ns, end_ns FROM tb_regions
    WHERE cat IN ('user_annotation', 'gpu_user_annotation', 'cpu_op', 'operator')
      AND name IN (SELECT name FROM comm_names)
), comm_ids AS (   -- their External ids (the store keeps none for annotations: their kernels stay Kernel)
    SELECT DISTINCT rank, external_id FROM comm_host
)
SELECT d.rank,
       CASE WHEN d.kind = 'memcpy' THEN 1 WHEN d.kind = 'memset' THEN 2
            WHEN c.rank IS NOT NULL THEN 3 ELSE 0 END AS prio,
       d.start_ns, d.end_ns
FROM tb_device d
LEFT JOIN comm_ids c ON d.kind = 'kernel' AND c.rank = d.rank AND c.external_id IS NOT DISTINCT FROM d.external_id
UNION ALL
SELECT rank, 3, start_ns, end_ns FROM comm_ops
UNION ALL
SELECT rank, 4, start_ns, end_ns FROM tb_host WHERE cat = 'runtime'
UNION ALL
SELECT rank, 5, start_ns, end_ns FROM tb_regions
WHERE cat IN ('cpu_op', 'operator')
  AND ((starts_with(name, 'enumerate(DataLoader)#') AND ends_with(name, '.__next__'))
       OR starts_with(name, 'enumerate(DataPipe)#'))
UNION ALL
SELECT rank, 6, start_ns, end_ns FROM host_ops_typed WHERE name NOT IN (SELECT name FROM comm_names)
UNION ALL   -- CPU ops the store keeps among regions: enumerate(DataLoader)#… calls that are no __next__
SELECT rank, 6, start_ns, end_ns FROM tb_regions
WHERE cat IN ('cpu_op', 'operator') AND source = 'dataloader'
  AND NOT ((starts_with(name, 'enumerate(DataLoader)#') AND ends_with(name, '.__next__'))
           OR starts_with(name, 'enumerate(DataPipe)#'));

WITH role_edges AS (   -- per role: +1 where one of its intervals starts, -1 where one ends
    SELECT rank, prio, start_ns AS t, 1 AS d FROM ov_roles WHERE end_ns > start_ns
    UNION ALL SELECT rank, prio, end_ns, -1 FROM ov_roles WHERE end_ns > start_ns
), role_sorted AS (
    SELECT * FROM role_edges ORDER BY rank, prio, t
), role_level AS (     -- per role: how many of its intervals are open after the edge. A running
                       -- sum over all roles in (rank, role, t) order: each role's edges sum to 0,
                       -- so the sum restarts at 0 for the next role (a streaming window, half the
                       -- cost of a partitioned one). Edges at one instant come in any order: the
                       -- turns on/off between them cancel below.
    SELECT rank, prio, t, d, sum(d) OVER (ROWS UNBOUNDED PRECEDING) AS n
    FROM role_sorted
), edges AS (          -- the role turns on (+2^prio) or off (-2^prio) at t: a running sum of
                       -- these is the set of roles active (one bit per role)
    SELECT rank, t, CASE WHEN n > 0 THEN CAST(1 AS BIGINT) << prio ELSE -(CAST(1 AS BIGINT) << prio) END AS d
    FROM role_level WHERE (n > 0) <> (n - d > 0)
    UNION ALL SELECT rank, start_ns, 0 FROM ov_steps   -- the steps' ends split the timeline too
    UNION ALL SELECT rank, end_ns, 0 FROM ov_steps
), at_t AS (
    SELECT rank, t, sum(d) AS d FROM edges GROUP BY rank, t
), level AS (
    SELECT rank, t AS start_ns, lead(t) OVER (PARTITION BY rank ORDER BY t) AS end_ns,
           CAST(sum(d) OVER (PARTITION BY rank ORDER BY t ROWS UNBOUNDED PRECEDING) AS BIGINT) AS roles
    FROM at_t
), seg AS (   -- elementary segments, each with its highest-priority role (7 = Other)
    SELECT rank, start_ns, end_ns,
           CASE WHEN roles & 1 <> 0 THEN 0 WHEN roles & 2 <> 0 THEN 1 WHEN roles & 4 <> 0 THEN 2
                WHEN roles & 8 <> 0 THEN 3 WHEN roles & 16 <> 0 THEN 4 WHEN roles & 32 <> 0 THEN 5
                WHEN roles & 64 <> 0 THEN 6 ELSE 7 END AS prio
    FROM level WHERE end_ns > start_ns
), per AS (
    SELECT s.rank, s.step, s.idx, g.prio, sum(g.end_ns - g.start_ns) AS ns
    FROM ov_steps s JOIN seg g ON g.rank = s.rank AND g.start_ns >= s.start_ns AND g.end_ns <= s.end_ns
    GROUP BY ALL
)
SELECT s.rank, s.step, s.idx, s.end_ns - s.start_ns AS step_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 0), 0) AS kernel_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 1), 0) AS memcpy_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 2), 0) AS memset_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 3), 0) AS communication_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 4), 0) AS runtime_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 5), 0) AS dataloader_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 6), 0) AS cpu_exec_ns,
       coalesce(sum(p.ns) FILTER (WHERE p.prio = 7), 0) AS other_ns
FROM ov_steps s LEFT JOIN per p ON p.rank = s.rank AND p.idx = s.idx
GROUP BY s.rank, s.step, s.idx, s.start_ns, s.end_ns
ORDER BY s.rank, s.idx;
