-- roofline_rest: the GPU time no modelled op call owns, per GPU op name (after roofline.sql,
-- on its temp tables: what the performance model does not cover).
--
-- Definition: the GPU ops of roofline_ops without a row in roofline_owner, grouped by name.
-- `graph_replay`: some of them were launched by a graph launch (cudaGraphLaunch,
-- hipGraphLaunch, ...: kernels replayed from a CUDA/HIP graph whose capture trace was not
-- given, so no op is known for them).
--
-- Parameters: none. Requires the temp tables of roofline.sql.
--
-- Output columns:
--   name          GPU op name
--   category      rule-table category (traceq.rules.categories)
--   kind          kernel | memcpy | memset
--   count         number of ops
--   total_ns      summed duration, ns
--   graph_replay  some of them were replayed from a CUDA/HIP graph
SELECT o.name, any_value(o.category) AS category, any_value(o.kind) AS kind, count(*) AS count,
       sum(o.dur_ns)::BIGINT AS total_ns,
       coalesce(bool_or(l.call_name ILIKE '%graphlaunch%'), false) AS graph_replay
FROM roofline_ops o
LEFT JOIN roofline_owner w ON w.op_id = o.op_id
LEFT JOIN roofline_launch l ON l.op_id = o.op_id
WHERE w.op_id IS NULL
GROUP BY o.name
ORDER BY total_ns DESC, o.name
