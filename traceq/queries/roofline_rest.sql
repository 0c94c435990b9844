-- roofline_rest: the GPU time no modelled op call owns, per GPU op name (after roofline.sql,
-- on its temp tables: what the performance model does not cover).
--
-- Definition: the GPU ops of roofline_ops without a row in roofline_owner, grouped by name.
-- `graph_replay`: some of them were launched by a graph launch (cudaGraphLaunch,
-- hipGraphLaunch, ...) and no captured op is known for them (the capture trace was not
-- given, or did not match: traceq ingest --graph-capture).
--
-- Parameters: none. Requires the temp tables of roofline.sql and the host-API macros
-- (traceq/rules/host_api.py: host_is_graph_launch).
--
-- Output columns:
--   name          GPU op name
--   category      rule-table category (traceq.rules.categories)
--   kind          kernel | memcpy | memset
--   count         number of ops
--   total_ns      summed duration, ns
--   graph_replay  some of them were replayed from a CUDA/HIP graph without a known captured op
SELECT o.name, any_value(o.category) AS category, any_value(o.kind) AS kind, count(*) AS count,
       sum(o.dur_ns)::BIGINT AS total_ns,
       coalesce(bool_or(host_is_graph_launch(l.call_kind, l.call_name) AND x.op_id IS NULL), false) AS graph_replay
FROM roofline_ops o
LEFT JOIN roofline_owner w ON w.op_id = o.op_id
LEFT JOIN roofline_launch l ON l.op_id = o.op_id
LEFT JOIN roofline_graph x ON x.op_id = o.op_id
WHERE w.op_id IS NULL
GROUP BY o.name
ORDER BY total_ns DESC, o.name
