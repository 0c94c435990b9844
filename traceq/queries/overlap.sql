-- overlap: how much communication is hidden under computation, per rank or per step
-- (overlap_pct is HTA's get_comm_comp_overlap: the share of communication time during which
-- compute also runs).
--
-- Definition, for each group of ops of overlap_ops (summary_ops.sql decides the window and
-- which ops are communication / compute; overlap_ops.sql the launching step): with $by = 'rank' a rank (all its ops), with
-- $by = 'step' a (rank, step) pair (the ops launched during ProfilerStep#step):
--   comm_ns          = |∪ communication ops|
--   compute_ns       = |∪ compute ops|
--   overlapped_ns    = |(∪ comm) ∩ (∪ compute)|   (comm time during which compute also runs)
--   exposed_ns       = comm_ns − overlapped_ns     (comm time nothing hides)
--   overlap_pct      = 100 · overlapped / comm     (NULL when there is no communication)
--   step_ns          = step time including the GPU work the step launched. A step row: the
--                      step's span, from the ProfilerStep's start (or its first op's, if
--                      earlier) to its end (or the end of the last op it launched, if later):
--                      GPU work launched late in a step runs past the CPU step. A rank row:
--                      the time covered by the spans of the steps that launched its ops and by
--                      its communication (some may be launched outside every step).
--   exposed_step_pct = 100 · exposed / step_ns     (exposed comm as a share of step time).
--                      Never above 100 %: exposed comm lies inside the group's comm, which
--                      lies inside step_ns (the CPU step alone would not do: a step's
--                      collectives can outlive it, which would give shares above 100 %).
-- Every stream of the rank is pooled, as in HTA. With --steps, a rank row holds the ops that
-- start inside the selected steps (as in every analysis) and step rows are given for the
-- selected steps only. A rank without ops has no row.
--
-- Parameters: $run (text), $by ('rank' | 'step').
-- Requires: temp table overlap_ops (summary_ops.sql, then overlap_ops.sql); interval macros iv_union and
-- iv_intersect (intervals.sql).
--
-- Output columns (one row per rank, or per (rank, step)):
--   rank              rank
--   step              ProfilerStep number; NULL on a rank row
--   steps             steps that launched ops (rank row); 1 on a step row
--   comm_ops          number of communication ops
--   comm_ns           union of communication ops, ns
--   compute_ns        union of compute ops, ns
--   overlapped_ns     communication time with compute running, ns
--   exposed_ns        communication time without compute, ns
--   overlap_pct       100 · overlapped / comm, %
--   step_ns           step time (see above), ns
--   exposed_step_pct  100 · exposed / step_ns, %

CREATE OR REPLACE TEMP TABLE overlap_steps AS   -- ProfilerSteps of the scope (CPU spans)
    SELECT r.rank, r.step, r.start_ns, r.end_ns
    FROM regions r JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run AND r.source = 'step' AND r.domain IS NULL AND r.step IS NOT NULL
      AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
    QUALIFY row_number() OVER (PARTITION BY r.rank, r.step ORDER BY r.start_ns) = 1;

-- Group key: rank · 2^32 + step + 1 for a step, rank · 2^32 for a whole rank.
CREATE OR REPLACE TEMP TABLE overlap_keyed AS
    SELECT rank::BIGINT * 4294967296 + CASE WHEN $by = 'step' THEN step + 1 ELSE 0 END AS key,
           rank, step, cls, start_ns, end_ns
    FROM overlap_ops o
    WHERE $by <> 'step' OR EXISTS (SELECT 1 FROM overlap_steps s WHERE s.rank = o.rank AND s.step = o.step);

CREATE OR REPLACE TEMP VIEW overlap_comm_iv AS
    SELECT key, start_ns, end_ns FROM overlap_keyed WHERE cls = 'communication';

CREATE OR REPLACE TEMP VIEW overlap_compute_iv AS
    SELECT key, start_ns, end_ns FROM overlap_keyed WHERE cls = 'compute';

CREATE OR REPLACE TEMP TABLE overlap_comm_union AS SELECT * FROM iv_union('overlap_comm_iv');

CREATE OR REPLACE TEMP TABLE overlap_compute_union AS SELECT * FROM iv_union('overlap_compute_iv');

CREATE OR REPLACE TEMP TABLE overlap_step_spans AS   -- each step with the ops it launched
    SELECT s.rank, s.step, least(s.start_ns, min(o.start_ns)) AS start_ns,
           greatest(s.end_ns, max(o.end_ns)) AS end_ns
    FROM overlap_steps s JOIN overlap_ops o ON o.rank = s.rank AND o.step = s.step
    GROUP BY s.rank, s.step, s.start_ns, s.end_ns;

CREATE OR REPLACE TEMP TABLE overlap_rank_time_iv AS   -- rank rows: step spans ∪ communication
    SELECT rank::BIGINT * 4294967296 AS key, start_ns, end_ns FROM overlap_step_spans WHERE $by <> 'step'
    UNION ALL
    SELECT key, start_ns, end_ns FROM overlap_comm_union
    WHERE $by <> 'step' AND key // 4294967296 IN (SELECT rank FROM overlap_step_spans);

CREATE OR REPLACE TEMP TABLE overlap_rank_time AS SELECT * FROM iv_union('overlap_rank_time_iv');

WITH
groups AS (
    SELECT key, any_value(rank) AS rank, any_value(step) AS step,
           count(*) FILTER (WHERE cls = 'communication') AS comm_ops
    FROM overlap_keyed GROUP BY key
),
comm AS (SELECT key, sum(end_ns - start_ns) AS comm_ns FROM overlap_comm_union GROUP BY key),
comp AS (SELECT key, sum(end_ns - start_ns) AS compute_ns FROM overlap_compute_union GROUP BY key),
both_ AS (
    SELECT key, sum(end_ns - start_ns) AS overlapped_ns
    FROM iv_intersect('overlap_comm_union', 'overlap_compute_union') GROUP BY key
),
launched_steps AS (   -- per rank: the steps that launched ops, and the time they cover
    SELECT rank, count(*) AS steps FROM overlap_step_spans GROUP BY rank
),
rank_time AS (
    SELECT key // 4294967296 AS rank, sum(end_ns - start_ns)::BIGINT AS step_ns FROM overlap_rank_time GROUP BY 1
),
m AS (
    SELECT g.rank, CASE WHEN $by = 'step' THEN g.step END AS step, g.comm_ops,
           coalesce(c.comm_ns, 0)::BIGINT       AS comm_ns,
           coalesce(p.compute_ns, 0)::BIGINT    AS compute_ns,
           coalesce(b.overlapped_ns, 0)::BIGINT AS overlapped_ns
    FROM groups g
    LEFT JOIN comm c ON c.key = g.key
    LEFT JOIN comp p ON p.key = g.key
    LEFT JOIN both_ b ON b.key = g.key
),
r AS (
    SELECT m.*, m.comm_ns - m.overlapped_ns AS exposed_ns,
           CASE WHEN $by = 'step' THEN 1 ELSE coalesce(l.steps, 0) END AS steps,
           CASE WHEN $by = 'step' THEN s.end_ns - s.start_ns ELSE t.step_ns END AS step_ns
    FROM m
    LEFT JOIN launched_steps l ON l.rank = m.rank
    LEFT JOIN rank_time t ON t.rank = m.rank
    LEFT JOIN overlap_step_spans s ON s.rank = m.rank AND s.step = m.step
)
SELECT rank::INTEGER AS rank, step, steps, comm_ops, comm_ns, compute_ns, overlapped_ns, exposed_ns,
       100.0 * overlapped_ns / nullif(comm_ns, 0) AS overlap_pct,
       step_ns,
       100.0 * exposed_ns / nullif(step_ns, 0) AS exposed_step_pct
FROM r
ORDER BY rank, step
