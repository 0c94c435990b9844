-- roofline_span: the GPU span and GPU op time of the scope (after roofline.sql): the
-- denominators of MFU and of the model's coverage.
--
-- Definition: span = Σ over ranks and devices of (end of the last GPU op − start of the first),
-- the GPU ops of roofline_ops (kernels, copies, memsets that start in the step window);
-- gpu_ns = their summed durations.
--
-- Parameters: none. Requires the temp tables of roofline.sql.
--
-- Output columns (one row):
--   span_ns   GPU span summed over devices, ns
--   gpu_ns    summed GPU op time, ns
--   devices   number of (rank, device) pairs
SELECT coalesce(sum(last_ns - first_ns), 0)::BIGINT AS span_ns, coalesce(sum(op_ns), 0)::BIGINT AS gpu_ns,
       count(*) AS devices
FROM (SELECT rank, device, min(start_ns) AS first_ns, max(end_ns) AS last_ns, sum(dur_ns) AS op_ns
      FROM roofline_ops GROUP BY rank, device)
