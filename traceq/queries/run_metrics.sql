-- run_metrics: per-run metrics of one traced run, one definition each.
--
-- Input: the temp table xm_steps (rank, step, step_source, step_ns, data_wait_ns) holding the
-- run's steps as stalls_steps.sql defines them (ProfilerStep, else timer BATCH, else
-- DataLoader-delimited iterations, else NVTX step ranges (run_nvtx_steps.sql), else the
-- whole rank as one step), and the views.
--
-- Definitions:
--   step_time          per step, the slowest rank's step duration (max over ranks of the
--                      same step number); outliers outside [Q1 − 1.5·IQR, Q3 + 1.5·IQR]
--                      removed (as Extra-Deep does); value = median of the rest, s
--   step_time_trimmed  mean of the per-step times without one min and one max (≥ 3 steps), s
--   data_wait          host data-loading time per step (stalls_steps), mean over steps and
--                      ranks, s (absent with NVTX steps)
--   gpu.<category>     GPU op time of a kernel category (gpu_ops.category) per step: the
--                      rank's total / the rank's step count, mean over ranks, s
--   communication      the same for category 'communication' (NCCL/collectives), s
--   region.<name>      time in an NVTX range / record_function annotation of that name per
--                      step, per rank total / step count, mean over ranks (the 20 largest), s
--
-- Parameters: $run (text).
-- Output columns: metric (text), value (double), unit (text, 's'), samples (int, the number
--   of values behind it), sd (double, sample sd of the per-step values where there are any, s),
--   min (double, s), max (double, s), source (text: the step source, or the table it comes from).
WITH per_step AS (
    SELECT step, max(step_ns) / 1e9 AS t, any_value(step_source) AS src FROM xm_steps GROUP BY step
), quart AS (
    SELECT quantile_cont(t, 0.25) AS q1, quantile_cont(t, 0.75) AS q3, count(*) AS n FROM per_step
), kept AS (
    SELECT p.t, p.src FROM per_step p, quart q
    WHERE q.n < 4 OR p.t BETWEEN q.q1 - 1.5 * (q.q3 - q.q1) AND q.q3 + 1.5 * (q.q3 - q.q1)
), ordered AS (
    SELECT t, row_number() OVER (ORDER BY t) AS i, count(*) OVER () AS n FROM per_step
), nsteps AS (
    SELECT rank, count(*) AS n FROM xm_steps GROUP BY rank
), cat AS (
    SELECT g.rank, g.category, sum(g.end_ns - g.start_ns) / 1e9 AS t
    FROM gpu_ops g WHERE g.run = $run GROUP BY g.rank, g.category
), reg AS (
    SELECT r.rank, r.name, sum(r.end_ns - r.start_ns) / 1e9 AS t
    FROM regions r WHERE r.run = $run AND r.source IN ('nvtx', 'annotation')
      AND coalesce(r.domain, '') <> 'gpu'
    GROUP BY r.rank, r.name
), reg_top AS (
    SELECT name FROM reg GROUP BY name ORDER BY sum(t) DESC LIMIT 20
)
SELECT 'step_time' AS metric, median(t) AS value, 's' AS unit, count(*)::BIGINT AS samples,
       stddev_samp(t) AS sd, min(t) AS min, max(t) AS max, any_value(src) AS source
FROM kept HAVING count(*) > 0
UNION ALL
SELECT 'step_time_trimmed', avg(t), 's', count(*)::BIGINT, NULL, min(t), max(t), 'steps'
FROM ordered WHERE n < 3 OR (i > 1 AND i < n) HAVING count(*) > 0
UNION ALL
SELECT 'data_wait', avg(data_wait_ns) / 1e9, 's', count(*)::BIGINT, stddev_samp(data_wait_ns) / 1e9,
       min(data_wait_ns) / 1e9, max(data_wait_ns) / 1e9, 'stalls_steps'
FROM xm_steps HAVING count(data_wait_ns) > 0
UNION ALL
SELECT 'gpu.' || c.category, avg(c.t / s.n), 's', count(*)::BIGINT, NULL, min(c.t / s.n), max(c.t / s.n), 'gpu_ops'
FROM cat c JOIN nsteps s USING (rank) GROUP BY c.category
UNION ALL
SELECT 'communication', coalesce(avg(c.t / s.n), 0), 's', count(*)::BIGINT, NULL, NULL, NULL, 'gpu_ops'
FROM nsteps s LEFT JOIN cat c ON c.rank = s.rank AND c.category = 'communication'
HAVING (SELECT count(*) FROM gpu_ops WHERE run = $run) > 0
UNION ALL
SELECT 'region.' || r.name, avg(r.t / s.n), 's', count(*)::BIGINT, NULL, min(r.t / s.n), max(r.t / s.n), 'regions'
FROM reg r JOIN nsteps s USING (rank) WHERE r.name IN (SELECT name FROM reg_top) GROUP BY r.name
ORDER BY metric
