-- summary_ops: the GPU ops that `summary` and `overlap` measure, classified, in one of two
-- windows. Builds the temp table `analysis_ops`: summary.sql reads it, overlap_ops.sql adds
-- the launching ProfilerStep to it for overlap.sql.
--
-- Window $window = 'all' (traceq's default; exact nanoseconds):
--   every GPU op of kind kernel, memcpy or memset of the scope (run, rank, and with --steps
--   the ops that start inside the selected ProfilerSteps). `sync` rows (Kineto cuda_sync:
--   "Stream Wait Event", "Stream Sync", "Event Sync"; nsys synchronization) are NOT GPU
--   work: they are the GPU waiting, so counting them as busy would hide idle time.
--   Classes from the rule table (gpu_ops.category, traceq.rules.categories):
--     communication = category 'communication' (nccl/rccl/hccl kernels)
--     memory        = kind memcpy/memset, or category memcpy/memset (fill/zero kernels)
--     compute       = every other kernel (category not communication/memcpy/memset/sync)
--
-- Window $window = 'hta' (reproduces the temporal breakdown and the comm/compute overlap of
-- HTA 0.5.0, Holistic Trace Analysis, with its loading, filtering and kernel classes):
--   * GPU rows are all gpu_ops whose stream is not -1: kernels, memcpy, memset AND cuda_sync
--     rows that carry a stream (device-level syncs have stream -1 and are CPU rows in HTA).
--   * Only when the run holds at least 2 distinct names containing "ProfilerStep" (HTA
--     counts symbols over all ranks it loaded): per rank, the CPU rows (host_ops, and the
--     stream -1 rows of gpu_ops) that start before the start of the last ProfilerStep
--     (the latest start of any row named *ProfilerStep*, CPU or GPU annotation) are kept,
--     and a GPU row is kept only if its correlation id (>= 0) matches one of those CPU rows.
--     This drops the last, usually incomplete, step and any GPU op whose launch is outside.
--   * Times in integer microseconds as HTA rounds them: start := ceil(start_us),
--     end := floor(start_us + dur_us), that sum computed in float64 as HTA does (HTA rounds
--     float-µs traces; for integer-µs traces this is the identity, so it is always applied;
--     only a trace with integer ts but fractional dur, which HTA leaves unrounded, differs).
--     Rounding can make sub-µs ops empty or negative: those add no time.
--   * Classes by kernel NAME with HTA 0.5.0's regexes (Python re.match, anchored at the start):
--     communication = ^nccl.*Kernel
--     memory        = ^Memcpy | ^Memset | ^dma
--     compute       = does not match ^nccl.*Kernel | .*Memcpy | Memset | .*Sync
--     other         = the rest (e.g. names containing Sync: "Stream Sync", "Event Sync")
--     (evaluated as the equivalent LIKE / prefix / substring tests, which are much faster;
--     the regexes themselves for the rare name that holds a line break)
--   Not reproduced: HTA also treats a CPU op carrying a "stream" argument (Triton launches)
--   as a GPU row; traceq's host_ops keep no stream, so such rows are not counted.
--
-- Parameters: $run (text), $window ('all' | 'hta'), $run_step_names (the number of distinct
-- *ProfilerStep* names of the whole run, when the connection holds only some of its ranks: a
-- per-rank task, traceq.engine.per_rank; NULL = count them here); ranks and the step window
-- come from the temp table scope_window(rank, lo_ns, hi_ns) (traceq.engine.scope).
--
-- Output: temp table analysis_ops
--   rank       rank
--   kind       kernel | memcpy | memset | sync
--   cls        compute | communication | memory | other
--   start_ns   start, ns (hta window: a whole number of µs, in ns)
--   end_ns     end, ns   (hta window: a whole number of µs, in ns)
--   correlation  launch correlation id (-> host_ops.correlation)

CREATE OR REPLACE TEMP MACRO summary_floor_us_ns(x) AS
    (CASE WHEN x >= 0 THEN x // 1000 ELSE -((-x + 999) // 1000) END) * 1000;

CREATE OR REPLACE TEMP MACRO summary_ceil_us_ns(x) AS
    (CASE WHEN x >= 0 THEN (x + 999) // 1000 ELSE -((-x) // 1000) END) * 1000;

-- HTA computes end = ts + dur in float64 µs before flooring it. From 2^44 µs on (absolute
-- epoch µs, ~1.7e15, are there) a double's spacing is 2 ns or more (0.25 µs at 1.7e15), so
-- that sum is rounded (to nearest, ties to even) before the floor: emulated here with
-- 128-bit integers. k = binary exponent of the end in µs; the end in units of the
-- spacing 2^(k-52) µs is N / 1024000 with N = end_ns · 2^(62-k).
CREATE OR REPLACE TEMP MACRO summary_f64_exp(x) AS floor(log2(x / 1000.0))::INTEGER;

CREATE OR REPLACE TEMP MACRO summary_f64_scaled(x) AS x::HUGEINT * (1::HUGEINT << (62 - summary_f64_exp(x)));

CREATE OR REPLACE TEMP MACRO summary_round_half_even(n, r, d) AS
    n + CASE WHEN 2 * r > d OR (2 * r = d AND n % 2 = 1) THEN 1 ELSE 0 END;

CREATE OR REPLACE TEMP MACRO summary_hta_end_ns(x) AS
    CASE WHEN x < 17592186044416000 THEN summary_floor_us_ns(x)
         WHEN x % 1000 = 0 AND x < 9007199254740992000 THEN x   -- whole µs below 2^53: exact
         ELSE (summary_round_half_even(summary_f64_scaled(x) // 1024000, summary_f64_scaled(x) % 1024000, 1024000)
               // (1::HUGEINT << (52 - summary_f64_exp(x))))::BIGINT * 1000 END;

CREATE OR REPLACE TEMP TABLE analysis_ops AS
WITH
step_named AS (   -- rows named *ProfilerStep*: CPU spans and GPU annotation copies (the
                  -- ingestors put every ProfilerStep, even an old cpu_op one, in regions)
    SELECT rank, name, start_ns FROM regions WHERE run = $run AND name LIKE '%ProfilerStep%'
),
hta_filtering AS (   -- $run_step_names: the run's count, given when this connection sees one rank
    SELECT $window = 'hta' AND coalesce($run_step_names, (SELECT count(DISTINCT name) FROM step_named)) >= 2 AS active
),
last_step AS (
    SELECT rank, max(summary_ceil_us_ns(start_ns)) AS last_start_ns FROM step_named GROUP BY rank
),
cpu_rows AS (     -- HTA's CPU rows (stream -1) before the last ProfilerStep, by correlation
    SELECT h.rank, h.correlation
    FROM host_ops h JOIN last_step l ON l.rank = h.rank
    WHERE $window = 'hta' AND h.run = $run AND h.correlation >= 0
      AND summary_ceil_us_ns(h.start_ns) < l.last_start_ns
    UNION ALL
    SELECT g.rank, g.correlation
    FROM gpu_ops g JOIN last_step l ON l.rank = g.rank
    WHERE $window = 'hta' AND g.run = $run AND coalesce(g.stream, -1) = -1 AND g.correlation >= 0
      AND summary_ceil_us_ns(g.start_ns) < l.last_start_ns
),
selected AS (
    SELECT g.rank, g.name, g.kind, g.category, g.correlation, g.start_ns, g.end_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run
      AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns))
      AND CASE WHEN $window = 'hta' THEN coalesce(g.stream, -1) <> -1
               ELSE g.kind IN ('kernel', 'memcpy', 'memset') END
      AND (NOT (SELECT active FROM hta_filtering)
           OR EXISTS (SELECT 1 FROM cpu_rows c WHERE c.rank = g.rank AND c.correlation = g.correlation))
)
SELECT
    rank,
    kind,
    CASE WHEN $window = 'hta' THEN
        CASE WHEN NOT contains(name, chr(10)) THEN   -- the regexes as plain string tests (fast)
            CASE WHEN name LIKE 'nccl%Kernel%' THEN 'communication'
                 WHEN starts_with(name, 'Memcpy') OR starts_with(name, 'Memset') OR starts_with(name, 'dma') THEN 'memory'
                 WHEN NOT (name LIKE 'nccl%Kernel%' OR contains(name, 'Memcpy') OR starts_with(name, 'Memset')
                           OR contains(name, 'Sync')) THEN 'compute'
                 ELSE 'other' END
        ELSE                                          -- a line break: `.` stops there, as in Python
            CASE WHEN regexp_matches(name, '^nccl.*Kernel') THEN 'communication'
                 WHEN regexp_matches(name, '^(Memcpy|Memset|dma)') THEN 'memory'
                 WHEN NOT regexp_matches(name, '^(nccl.*Kernel|.*Memcpy|Memset|.*Sync)') THEN 'compute'
                 ELSE 'other' END
        END
    ELSE
        CASE WHEN category = 'communication' THEN 'communication'
             WHEN kind IN ('memcpy', 'memset') OR category IN ('memcpy', 'memset') THEN 'memory'
             WHEN kind = 'kernel' AND coalesce(category, '') <> 'sync' THEN 'compute'
             ELSE 'other' END
    END AS cls,
    CASE WHEN $window = 'hta' THEN summary_ceil_us_ns(start_ns) ELSE start_ns END AS start_ns,
    CASE WHEN $window = 'hta' THEN summary_hta_end_ns(end_ns) ELSE end_ns END AS end_ns,
    correlation
FROM selected;
