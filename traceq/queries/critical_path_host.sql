-- critical_path_host: the host activity the critical path walks (input of
-- traceq/engine/cp_graph.py), per rank of the scope.
--
-- Definition: every host op of the scope's ranks but the captured ops of graph replays
-- (kind graph_op), with its class for the path:
--   sync      a call that returns only when the GPU has caught up: the runtime's
--             *Synchronize calls (host_is_sync, runtime/driver/sync_api kinds; PyTorch's scalar
--             reads are cpu ops around such a call and are not syncs themselves)
--   memcpy    a blocking copy (cudaMemcpy/hipMemcpy without Async, and any copy call whose copy
--             involves pageable host memory: a pageable cudaMemcpyAsync returns only when its
--             copy is staged or done, as the ledger's blocking_copy): waits for its own copy
--   launch    a runtime/driver call that launches GPU work: its name says Launch, an async copy
--             or a memset (cudaLaunchKernel, cuLaunchKernelEx, cudaMemcpyAsync, hipMemsetAsync, ...)
--   comm      a CPU-side collective call (host_is_communication: c10d::, nccl:, gloo:, ...)
--   cpu       anything else: framework ops, Python functions, and the other runtime calls
--             (cudaMalloc/cudaFree, event and stream calls, cudaGetDevice, ...)
-- and the regions of the host (not GPU-side spans) as calls of class `region`: user
-- annotations and steps nest the ops, and are what the path shows where no op is inside;
-- a region named as a collective (is_communication_name: `gloo:broadcast`, `nccl:all_reduce`)
-- is of class `comm_region`.
--
-- Parameters: $run (text). Requires scope_window and the host-API macros.
--
-- Output columns (one row per op or region):
--   rank, pid, tid     where it ran
--   start_ns, end_ns   the call, ns
--   name               the op's name
--   cls                sync | memcpy | launch | comm | cpu | region | comm_region
WITH pageable AS (   -- the copy calls whose copy reads or writes pageable host memory
    SELECT DISTINCT g.rank, g.pid, g.correlation
    FROM gpu_ops g
    WHERE g.run = $run AND g.kind = 'memcpy' AND g.correlation IS NOT NULL
      AND (g.src_kind = 'Pageable' OR g.dst_kind = 'Pageable')
      AND g.rank IN (SELECT rank FROM scope_window)
)
SELECT h.rank, h.pid, h.tid, h.start_ns, h.end_ns, h.name,
       CASE WHEN h.kind IN ('runtime', 'driver', 'sync_api') AND host_is_sync(h.kind, h.name) THEN 'sync'
            WHEN host_is_blocking_copy(h.kind, h.name) THEN 'memcpy'
            WHEN h.kind IN ('runtime', 'driver') AND p.correlation IS NOT NULL THEN 'memcpy'
            WHEN h.kind IN ('runtime', 'driver', 'sync_api')
                 AND regexp_matches(h.name, '(?i)launch|memcpy|memset') THEN 'launch'
            WHEN host_is_communication(h.kind, h.name) THEN 'comm'
            ELSE 'cpu' END AS cls
FROM host_ops h
LEFT JOIN pageable p ON p.rank = h.rank AND p.pid = h.pid AND p.correlation = h.correlation
WHERE h.run = $run AND h.rank IN (SELECT rank FROM scope_window) AND h.kind <> 'graph_op'
  AND h.end_ns >= h.start_ns
UNION ALL
SELECT r.rank, r.pid, r.tid, r.start_ns, r.end_ns, r.name,
       CASE WHEN is_communication_name(r.name) THEN 'comm_region' ELSE 'region' END AS cls
FROM regions r
WHERE r.run = $run AND r.rank IN (SELECT rank FROM scope_window)
  AND coalesce(r.domain, '') <> 'gpu' AND r.tid IS NOT NULL AND r.end_ns >= r.start_ns
