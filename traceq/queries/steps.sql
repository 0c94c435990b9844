-- steps: the training steps of each rank, numbered as every table shows them; `--steps`,
-- `--skip-first` and `stalls` select from this list (engine/scope.py).
--
-- Steps, per rank, from the first of these sources that the rank has:
--   0. with --step-pattern: host regions (any source but GPU-side copies) whose name matches
--      the regex; step = the last number in the name when every match has a distinct one
--      ("train step 12" -> 12), else 0-based in time order             step_source 'pattern'
--   1. ProfilerStep#N regions (source step), step = N                 step_source 'ProfilerStep'
--   2. timer BATCH regions (source timer, key BATCH), 0-based          step_source 'BATCH'
--   3. DataLoader iterations, when the trace has DataLoader calls but none of the above (e.g.
--      a profiler run without a schedule): on the thread with the most DataLoader calls,
--      each call starts an iteration that lasts until the next call starts; the last one
--      lasts until the rank's last host activity ends (host_ops and regions). 0-based.
--                                                                      step_source 'DataLoader'
-- A rank with none of these has no steps here (stalls then treats the whole rank as one step).
--
-- Parameters: $run (text), $step_pattern (RE2 regex or NULL).
--
-- Output columns (one row per rank and step, in time order):
--   rank         rank
--   step         step number (see above)
--   step_source  pattern | ProfilerStep | BATCH | DataLoader
--   start_ns     step start, ns
--   end_ns       step end, ns
WITH reg AS (
    SELECT rank, pid, tid, source, name, step, start_ns, end_ns
    FROM regions
    WHERE run = $run AND coalesce(domain, '') <> 'gpu'
), host_end AS (
    SELECT rank, max(end_ns) AS end_ns FROM (
        SELECT rank, end_ns FROM host_ops WHERE run = $run AND kind <> 'graph_op'   -- graph_op: GPU times
        UNION ALL
        SELECT rank, end_ns FROM reg
    ) GROUP BY rank
), dl_calls AS (
    SELECT rank, pid, tid, start_ns FROM reg WHERE source = 'dataloader'
), dl_thread AS (
    SELECT rank, arg_max({'pid': pid, 'tid': tid}, n) AS th
    FROM (SELECT rank, pid, tid, count(*) AS n FROM dl_calls GROUP BY ALL)
    GROUP BY rank
), matched AS (
    SELECT rank, start_ns, end_ns,
           TRY_CAST(regexp_extract(name, '(\d+)\D*$', 1) AS BIGINT) AS num
    FROM reg WHERE $step_pattern IS NOT NULL AND regexp_matches(name, $step_pattern)
), numbered AS (   -- per rank: do the names number the steps (all present and distinct)?
    SELECT rank, count(num) = count(*) AND count(DISTINCT num) = count(*) AS by_name
    FROM matched GROUP BY rank
), cand AS (
    SELECT 0 AS prio, m.rank, CASE WHEN n.by_name THEN m.num END AS step, 'pattern' AS step_source,
           m.start_ns, m.end_ns
    FROM matched m JOIN numbered n ON n.rank = m.rank
    UNION ALL
    SELECT 1, rank, step, 'ProfilerStep', start_ns, end_ns
    FROM reg WHERE source = 'step'
    UNION ALL
    SELECT 2, rank, NULL, 'BATCH', start_ns, end_ns
    FROM reg WHERE source = 'timer' AND upper(name) = 'BATCH'
    UNION ALL
    SELECT 3, c.rank, NULL, 'DataLoader', c.start_ns,
           coalesce(lead(c.start_ns) OVER (PARTITION BY c.rank ORDER BY c.start_ns), e.end_ns)
    FROM dl_calls c
    JOIN dl_thread t ON t.rank = c.rank AND t.th.pid IS NOT DISTINCT FROM c.pid AND t.th.tid IS NOT DISTINCT FROM c.tid
    JOIN host_end e ON e.rank = c.rank
), chosen AS (
    SELECT * FROM cand c
    WHERE c.prio = (SELECT min(prio) FROM cand c2 WHERE c2.rank = c.rank)
)
SELECT rank::INTEGER AS rank,
       coalesce(step, row_number() OVER (PARTITION BY rank ORDER BY start_ns, end_ns) - 1)::BIGINT AS step,
       step_source, start_ns, end_ns
FROM chosen
ORDER BY rank, start_ns, end_ns
