-- operators_nodes: the nodes of the operator view's call trees (input of
-- traceq/engine/op_tree.py), as the TensorBoard profiler plugin (torch-tb-profiler 0.4.3,
-- event_parser.py / op_tree.py / node.py) builds them per thread.
--
-- Definition: on every rank of the scope (the whole rank: the tree needs every call around the
-- window), the host spans that are nodes of the plugin's trees:
--   cpu_op calls (Kineto cpu_op / Operator)        op = true unless the plugin keeps them out
--                                                  of the Operator view: DataParallel.forward,
--                                                  DistributedDataParallel.forward, Optimizer.*,
--                                                  enumerate(DataLoader)#...__next__,
--                                                  enumerate(DataPipe)#...
--   ProfilerStep#N and DataLoader spans (regions)  op = false (nodes the plugin puts in the tree,
--                                                  not operators)
--   the annotations nccl:/gloo:{broadcast, reduce, all_reduce, all_gather, reduce_scatter}
--                                                  op = false (user annotations the plugin keeps)
-- Other user annotations and python_function spans are no nodes (the plugin reads neither).
--
-- Parameters: $run (text). Requires scope_window.
--
-- Output columns (one row per node):
--   rank, pid, tid    the thread it ran on
--   name              the op or span name
--   start_ns, end_ns  the call, ns
--   external_id       Kineto "External id" (cpu_ops; null for regions)
--   input_dims        Kineto "Input Dims" as JSON text (null when not recorded)
--   input_types       Kineto "Input type" as JSON text
--   cpu_op            the node is a cpu_op call (the plugin's Operator type: dedup and
--                     tensor-core eligibility pass through it)
--   op                the node is an operator of the Operator view
SELECT h.rank, h.pid, h.tid, h.name, h.start_ns, h.end_ns, h.external_id, h.input_dims, h.input_types,
       true AS cpu_op,
       NOT (h.name IN ('DataParallel.forward', 'DistributedDataParallel.forward')
            OR starts_with(h.name, 'Optimizer.') OR starts_with(h.name, 'ProfilerStep#')
            OR (starts_with(h.name, 'enumerate(DataLoader)#') AND ends_with(h.name, '.__next__'))
            OR starts_with(h.name, 'enumerate(DataPipe)#')) AS op
FROM host_ops h
WHERE h.run = $run AND h.kind = 'cpu_op' AND h.rank IN (SELECT rank FROM scope_window)
  AND h.start_ns IS NOT NULL AND h.end_ns IS NOT NULL
UNION ALL
SELECT r.rank, r.pid, r.tid, r.name, r.start_ns, r.end_ns, NULL, NULL, NULL, false, false
FROM regions r
WHERE r.run = $run AND r.rank IN (SELECT rank FROM scope_window) AND r.domain IS DISTINCT FROM 'gpu'
  AND r.start_ns IS NOT NULL AND r.end_ns IS NOT NULL
  AND (r.source IN ('step', 'dataloader')
       OR (r.source = 'annotation' AND r.name IN (
           'nccl:broadcast', 'nccl:reduce', 'nccl:all_reduce', 'nccl:all_gather', 'nccl:reduce_scatter',
           'gloo:broadcast', 'gloo:reduce', 'gloo:all_reduce', 'gloo:all_gather', 'gloo:reduce_scatter')))
