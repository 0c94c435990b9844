-- overlap_ops: the ops of analysis_ops (summary_ops.sql) with the ProfilerStep that launched
-- each, for overlap's per-step rows and step times.
--
-- Step of an op: the ProfilerStep (CPU span: regions.source = 'step', not the GPU-side copy)
-- during which its launching runtime/driver call (host_ops kind runtime, driver or sync_api
-- with the same rank and correlation id) started. This is HTA's iteration assignment (a
-- CPU row gets the step whose [start, end) holds its start; a GPU op inherits it from its
-- launch). NULL when the launch is outside every step or not in the trace.
--
-- Parameters: $run (text). Requires: temp table analysis_ops.
--
-- Output: temp table overlap_ops = the columns of analysis_ops plus
--   step   N of the launching ProfilerStep#N, or NULL

CREATE OR REPLACE TEMP TABLE overlap_ops AS
WITH
launch AS (       -- the runtime/driver call that launched each correlation id (of the ops: the
                  -- join below; no `IN (SELECT correlation FROM analysis_ops)` here, which with
                  -- the as-of join could not spill under a memory limit on 12 M ops)
    SELECT rank, correlation, min(start_ns) AS launch_ns
    FROM host_ops
    WHERE run = $run AND kind IN ('runtime', 'driver', 'sync_api') AND correlation IS NOT NULL
    GROUP BY rank, correlation
),
steps AS (        -- made disjoint (a step ends at the latest when the next one starts) and
                  -- without the empty ones (they hold no launch), so that each op's step is
                  -- the last one that started at or before its launch, if it has not ended:
                  -- an as-of join, linear where a range join is ops x steps per rank
    SELECT * FROM (
        SELECT rank, step, start_ns,
               least(end_ns, coalesce(lead(start_ns) OVER (PARTITION BY rank ORDER BY start_ns, step), end_ns)) AS end_ns
        FROM regions WHERE run = $run AND source = 'step' AND domain IS NULL AND step IS NOT NULL
    ) WHERE end_ns > start_ns
),
launched AS (
    SELECT o.*, l.launch_ns
    FROM analysis_ops o LEFT JOIN launch l ON l.rank = o.rank AND l.correlation = o.correlation
)
SELECT o.* EXCLUDE (launch_ns), CASE WHEN o.launch_ns < s.end_ns THEN s.step END AS step
FROM launched o
ASOF LEFT JOIN steps s ON s.rank = o.rank AND o.launch_ns >= s.start_ns;
