-- op_calls: the calls of the ops an analysis models (input of traceq/engine/op_owner.py, which
-- gives each GPU op the call that owns it).
--
-- Definition: the calls of the op names in temp table op_names(name, family) on the scope's
-- ranks (the whole rank: a call that began before the step window still owns the GPU ops it
-- launched inside it):
--   Kineto cpu_ops                  host time, on the thread that ran them
--   nsys NVTX ranges of emit_nvtx   host time; the op is the range's name before its first
--                                   comma ("aten::addmm, seq = 12, sizes = [...]"), only
--                                   ranges that record input sizes
--   graph_op rows                   ops captured into a CUDA/HIP graph (traceq ingest
--                                   --graph-capture): one per replay, spanning the GPU time of
--                                   the replayed kernels they launched at capture
--
-- Parameters: $run (text). Requires scope_window and temp table op_names.
--
-- Output columns (one row per call):
--   rank, pid, tid   where the call ran (graph_op: the thread of the graph launch)
--   clock            host (CPU op, NVTX range: host time) | graph (graph_op: GPU time)
--   op               the op's name
--   family           its family (op_names)
--   start_ns, end_ns the call, ns
--   input_dims       Kineto "Input Dims" as JSON text (nsys: emit_nvtx's sizes)
--   input_types      Kineto "Input type" as JSON text (null from nsys)
--   concrete_inputs  Kineto "Concrete Inputs" as JSON text
SELECT h.rank, h.pid, h.tid, CASE WHEN h.kind = 'graph_op' THEN 'graph' ELSE 'host' END AS clock,
       h.name AS op, m.family, h.start_ns, h.end_ns, h.input_dims, h.input_types, h.concrete_inputs
FROM host_ops h JOIN op_names m ON m.name = h.name
WHERE h.run = $run AND h.kind IN ('cpu_op', 'graph_op') AND h.rank IN (SELECT rank FROM scope_window)
UNION ALL
SELECT r.rank, r.pid, r.tid, 'host', m.name, m.family, r.start_ns, r.end_ns, r.input_dims, r.input_types,
       r.concrete_inputs
FROM regions r JOIN op_names m ON m.name = trim(split_part(r.name, ',', 1))
WHERE r.run = $run AND r.source = 'nvtx' AND r.input_dims IS NOT NULL AND r.rank IN (SELECT rank FROM scope_window)
