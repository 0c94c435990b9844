-- roofline: the GPU time of every modelled op call, grouped by op and arguments (input of the
-- roofline analysis, traceq/analyses/roofline.py, which adds FLOPs, bytes and the roofline).
--
-- Definition:
--   GPU ops     kernels, copies and memsets of the scope (ops that start inside the step
--               window), each with the runtime/driver call that launched it (same process and
--               correlation id).
--   op calls    the calls of modelled ops (temp table roofline_names: the op names
--               traceq.perf.cost.modelled accepts): Kineto cpu_ops, nsys NVTX ranges written by
--               emit_nvtx (the op is the range name before its first comma), and graph_op rows
--               (ops captured into a CUDA/HIP graph, replayed: traceq ingest --graph-capture).
--   enclosing   the modelled calls around a GPU op's launch, on the launching thread
--               (start <= launch <= end); for a kernel replayed from a graph (its external id
--               is a graph_op's), the modelled graph_ops whose GPU-time span contains that
--               graph_op's.
--   wrapper     a call with a call of the same family nested in it (aten::linear around
--               aten::addmm, aten::matmul around aten::bmm, layer_norm around native_layer_norm):
--               its arguments are the inner call's, its work is the inner call's.
--   owner       the OUTERMOST enclosing call that is no wrapper (order: start, then the longer
--               first); when every enclosing call is a wrapper, the innermost. So an op's GPU
--               time is every GPU op its subtree launched, memsets, layout transposes and a bias
--               add included (aten::convolution -> aten::add_: the convolution's), a wrapper's
--               work goes to the op inside it (aten::linear -> aten::addmm: the addmm's), and a
--               copy a wrapper makes outside its inner op to the copy (aten::matmul ->
--               aten::clone: the copy_'s). No GPU op is counted twice.
--   per call    gpu_ns = summed duration of the GPU ops a call owns; a call that owns none
--               (no GPU work) is not counted.
-- Grouped by op, input dims, input types and concrete inputs (what the FLOP count depends on).
--
-- Parameters: $run (text). Requires scope_window and temp table roofline_names(name, family).
--
-- Output columns (one row per op and arguments):
--   op               the op's name (aten::mm, ...)
--   family           the model's op family of that name (roofline_names)
--   input_dims       Kineto "Input Dims" as JSON text (nsys: emit_nvtx's sizes)
--   input_types      Kineto "Input type" as JSON text (null from nsys)
--   concrete_inputs  Kineto "Concrete Inputs" as JSON text
--   calls            op calls that launched GPU work
--   kernel_ns        summed GPU time of those calls, ns
--   inv_ns_mean      mean over calls of 1 / gpu_ns (1/ns): flop · this = mean achieved flop/ns
--   tensor_core_ns   part of kernel_ns in kernels that run on tensor/matrix cores, ns
--   ranks            ranks the row's calls ran on

CREATE OR REPLACE TEMP TABLE roofline_ops AS
SELECT row_number() OVER () AS op_id, g.rank, g.device, g.pid, g.name, g.kind, g.category, g.tensor_core,
       g.external_id, g.correlation, g.start_ns, g.end_ns, g.end_ns - g.start_ns AS dur_ns
FROM gpu_ops g JOIN scope_window w ON w.rank = g.rank
WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
  AND (w.lo_ns IS NULL OR (g.start_ns >= w.lo_ns AND g.start_ns < w.hi_ns));

CREATE OR REPLACE TEMP TABLE roofline_calls AS
SELECT row_number() OVER () AS call_id, * FROM (
    SELECT h.rank, h.pid, h.tid, h.kind AS via, h.name AS op, m.family, h.start_ns, h.end_ns, h.external_id,
           h.input_dims, h.input_types, h.concrete_inputs
    FROM host_ops h JOIN roofline_names m ON m.name = h.name
    WHERE h.run = $run AND h.kind IN ('cpu_op', 'graph_op') AND h.rank IN (SELECT rank FROM scope_window)
    UNION ALL
    SELECT r.rank, r.pid, r.tid, 'nvtx', m.name, m.family, r.start_ns, r.end_ns, NULL, r.input_dims, r.input_types,
           r.concrete_inputs
    FROM regions r JOIN roofline_names m ON m.name = trim(split_part(r.name, ',', 1))
    WHERE r.run = $run AND r.source = 'nvtx' AND r.input_dims IS NOT NULL
      AND r.rank IN (SELECT rank FROM scope_window));

-- the launch call of each GPU op (one: a correlation carried by two calls keeps the first)
CREATE OR REPLACE TEMP TABLE roofline_launch AS
SELECT o.op_id, h.tid, h.start_ns AS call_ns, h.name AS call_name
FROM roofline_ops o
JOIN host_ops h ON h.run = $run AND h.rank = o.rank AND h.pid = o.pid AND h.correlation = o.correlation
 AND h.kind IN ('runtime', 'driver')
QUALIFY row_number() OVER (PARTITION BY o.op_id ORDER BY h.start_ns) = 1;

-- replayed graph kernels: the graph_op that launched them at capture
CREATE OR REPLACE TEMP TABLE roofline_graph AS
SELECT o.op_id, o.rank, g.pid, g.external_id, g.start_ns, g.end_ns
FROM roofline_ops o
JOIN host_ops g ON g.run = $run AND g.rank = o.rank AND g.kind = 'graph_op' AND g.external_id = o.external_id;

-- every modelled call enclosing each GPU op: around its launch on the launching thread, or
-- (replayed graph kernels) around the graph_op that launched it at capture
CREATE OR REPLACE TEMP TABLE roofline_enclosing AS
SELECT l.op_id, c.call_id, c.family, c.start_ns, c.end_ns
FROM roofline_launch l
JOIN roofline_ops o ON o.op_id = l.op_id
JOIN roofline_calls c ON c.rank = o.rank AND c.pid = o.pid AND c.tid = l.tid AND c.via <> 'graph_op'
 AND c.start_ns <= l.call_ns AND c.end_ns >= l.call_ns
WHERE l.op_id NOT IN (SELECT op_id FROM roofline_graph)
UNION ALL
SELECT x.op_id, c.call_id, c.family, c.start_ns, c.end_ns
FROM roofline_graph x
JOIN roofline_calls c ON c.via = 'graph_op' AND c.rank = x.rank AND c.pid = x.pid
 AND c.start_ns <= x.start_ns AND c.end_ns >= x.end_ns;

-- wrappers: calls with a call of the same family inside them (a strict descendant: a
-- shorter span, or the same span and a later row)
CREATE OR REPLACE TEMP TABLE roofline_wrappers AS
SELECT DISTINCT c.call_id
FROM roofline_calls c
JOIN roofline_calls d ON d.rank = c.rank AND d.pid = c.pid AND d.tid = c.tid AND d.via = c.via
 AND d.family = c.family AND d.call_id <> c.call_id AND d.start_ns >= c.start_ns AND d.end_ns <= c.end_ns
 AND (d.start_ns > c.start_ns OR d.end_ns < c.end_ns OR d.call_id > c.call_id);

-- the owner: the outermost enclosing call that is no wrapper (if every one is, the innermost)
CREATE OR REPLACE TEMP TABLE roofline_owner AS
SELECT e.op_id, e.call_id
FROM roofline_enclosing e LEFT JOIN roofline_wrappers x ON x.call_id = e.call_id
QUALIFY row_number() OVER (PARTITION BY e.op_id
                           ORDER BY x.call_id IS NULL DESC,
                                    CASE WHEN x.call_id IS NULL THEN e.start_ns ELSE -e.start_ns END,
                                    CASE WHEN x.call_id IS NULL THEN -e.end_ns ELSE e.end_ns END, e.call_id) = 1;

WITH per_call AS (
    SELECT w.call_id, sum(o.dur_ns) AS gpu_ns, coalesce(sum(o.dur_ns) FILTER (WHERE o.tensor_core), 0) AS tc_ns
    FROM roofline_owner w JOIN roofline_ops o ON o.op_id = w.op_id
    GROUP BY w.call_id
)
SELECT c.op, c.family, c.input_dims, c.input_types, c.concrete_inputs,
       count(*)                                  AS calls,
       sum(p.gpu_ns)::BIGINT                     AS kernel_ns,
       avg(1.0 / nullif(p.gpu_ns, 0))            AS inv_ns_mean,
       sum(p.tc_ns)::BIGINT                      AS tensor_core_ns,
       count(DISTINCT c.rank)                    AS ranks
FROM per_call p JOIN roofline_calls c ON c.call_id = p.call_id
GROUP BY ALL
ORDER BY kernel_ns DESC, op, input_dims
