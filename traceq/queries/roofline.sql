-- roofline: the GPU time of every modelled op call, grouped by op and arguments (input of the
-- roofline analysis, traceq/analyses/roofline.py, which adds FLOPs, bytes and the roofline).
--
-- Definition:
--   GPU ops     kernels, copies and memsets of the scope (ops that start inside the step
--               window), each with the runtime/driver call that launched it (same process and
--               correlation id). Transfers (copies other than device-to-device: host<->device,
--               peer) belong to no op: they are bound by the bus, not by the device's memory,
--               and stay in the GPU time the model does not cover (roofline_rest.sql).
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
       g.external_id, g.correlation, g.start_ns, g.end_ns, g.end_ns - g.start_ns AS dur_ns,
       g.kind = 'memcpy' AND coalesce(g.copy_kind, '') <> 'DtoD' AS transfer
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
SELECT o.op_id, h.tid, h.start_ns AS call_ns, h.name AS call_name, h.kind AS call_kind
FROM roofline_ops o
JOIN host_ops h ON h.run = $run AND h.rank = o.rank AND h.pid = o.pid AND h.correlation = o.correlation
 AND h.kind IN ('runtime', 'driver')
QUALIFY row_number() OVER (PARTITION BY o.op_id ORDER BY h.start_ns) = 1;

-- replayed graph kernels: the graph_op that launched them at capture
CREATE OR REPLACE TEMP TABLE roofline_graph AS
SELECT o.op_id, o.rank, g.pid, g.tid, o.start_ns AS t
FROM roofline_ops o
JOIN host_ops g ON g.run = $run AND g.rank = o.rank AND g.kind = 'graph_op' AND g.external_id = o.external_id;

-- the sweep, per thread and clock (host: CPU ops and NVTX ranges around launch calls; graph:
-- graph_op spans around replayed kernels, in GPU time): call starts (outer first on a tie),
-- call ends (before anything else at the same instant) and points (a launch call's start, a
-- replayed kernel's start). `open` = calls open after the event: a call's depth (1 =
-- outermost), and at a point the depth of the innermost call around it.
CREATE OR REPLACE TEMP TABLE roofline_sweep AS
WITH calls AS (
    SELECT call_id, rank, pid, tid, CASE WHEN via = 'graph_op' THEN 'graph' ELSE 'host' END AS clock, start_ns, end_ns
    FROM roofline_calls WHERE end_ns > start_ns),
ev AS (
    SELECT rank, pid, tid, clock, start_ns AS t, 1 AS kind, -end_ns AS tie, call_id, NULL::BIGINT AS op_id FROM calls
    UNION ALL
    SELECT rank, pid, tid, clock, end_ns, 0, 0, call_id, NULL FROM calls
    UNION ALL
    SELECT o.rank, o.pid, l.tid, 'host', l.call_ns, 2, 0, NULL, l.op_id
    FROM roofline_launch l JOIN roofline_ops o ON o.op_id = l.op_id
    WHERE l.op_id NOT IN (SELECT op_id FROM roofline_graph) AND NOT o.transfer
    UNION ALL
    SELECT rank, pid, tid, 'graph', t, 2, 0, NULL, op_id FROM roofline_graph)
SELECT rank, pid, tid, clock, kind, call_id, op_id,
       row_number() OVER w AS seq,
       sum(CASE kind WHEN 1 THEN 1 WHEN 0 THEN -1 ELSE 0 END) OVER w AS open
FROM ev
WINDOW w AS (PARTITION BY rank, pid, tid, clock ORDER BY t, kind, tie, call_id ROWS UNBOUNDED PRECEDING);

CREATE OR REPLACE TEMP TABLE roofline_starts AS
SELECT rank, pid, tid, clock, seq, open AS depth, call_id FROM roofline_sweep WHERE kind = 1;

-- each call's parent: the last call started at depth - 1 before it (calls on a thread nest)
CREATE OR REPLACE TEMP TABLE roofline_parent AS
SELECT c.call_id, c.depth, p.call_id AS parent_id
FROM roofline_starts c
ASOF LEFT JOIN roofline_starts p ON p.rank = c.rank AND p.pid = c.pid AND p.tid = c.tid AND p.clock = c.clock
 AND p.depth = c.depth - 1 AND p.seq <= c.seq;

-- each call and its ancestors (itself included), with their depth
CREATE OR REPLACE TEMP TABLE roofline_chain AS
WITH RECURSIVE up(call_id, anc_id, depth) AS (
    SELECT call_id, call_id, depth FROM roofline_parent
    UNION ALL
    SELECT u.call_id, p.parent_id, p.depth - 1
    FROM up u JOIN roofline_parent p ON p.call_id = u.anc_id
    WHERE p.parent_id IS NOT NULL)
SELECT * FROM up;

-- wrappers: calls with a call of the same family inside them
CREATE OR REPLACE TEMP TABLE roofline_wrappers AS
SELECT DISTINCT a.anc_id AS call_id
FROM roofline_chain a
JOIN roofline_calls d ON d.call_id = a.call_id
JOIN roofline_calls c ON c.call_id = a.anc_id
WHERE a.anc_id <> a.call_id AND c.family = d.family;

-- each GPU op's innermost enclosing call: the last call started at the point's depth
CREATE OR REPLACE TEMP TABLE roofline_inner AS
SELECT p.op_id, s.call_id
FROM (SELECT * FROM roofline_sweep WHERE kind = 2 AND open > 0) p
ASOF JOIN roofline_starts s ON s.rank = p.rank AND s.pid = p.pid AND s.tid = p.tid AND s.clock = p.clock
 AND s.depth = p.open AND s.seq <= p.seq;

-- the owner: the outermost enclosing call that is no wrapper (if every one is, the innermost)
CREATE OR REPLACE TEMP TABLE roofline_owner AS
SELECT i.op_id, a.anc_id AS call_id
FROM roofline_inner i
JOIN roofline_chain a ON a.call_id = i.call_id
LEFT JOIN roofline_wrappers x ON x.call_id = a.anc_id
QUALIFY row_number() OVER (PARTITION BY i.op_id
                           ORDER BY x.call_id IS NULL DESC,
                                    CASE WHEN x.call_id IS NULL THEN a.depth ELSE -a.depth END) = 1;

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
