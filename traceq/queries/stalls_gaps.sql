-- stalls_gaps: GPU idle gaps and what the host was doing meanwhile.
--
-- Definition: a gap is a hole of at least $min_gap_ns between consecutive busy intervals
-- of one GPU (st_busy, per rank and device; idle time before the first and after the last
-- op is not a gap). Every instant of a gap gets ONE cause: the first of these host
-- activities of the same rank that covers it (fixed vocabulary, in precedence order):
--   1. data_loading       st_data: DataLoader spans, timer IO regions, --data-pattern regions
--   2. communication      the host inside a collective: host ops or regions (any thread)
--                         named like nccl*/rccl*/c10d::*/ProcessGroup*/record_param_comms/
--                         all_reduce/all_gather/reduce_scatter/alltoall or MPI's
--                         point-to-point and collective calls (is_communication_name,
--                         traceq/rules/host_api.py)
--   3. synchronization    blocking waits: host_ops of kind sync_api named *Synchronize
--                         (cudaStream/Device/Event/CtxSynchronize, hip*; cudaStreamWaitEvent
--                         does not block the host and is not counted), and `.item()`:
--                         cpu ops aten::item / aten::_local_scalar_dense
--   4. blocking_copy      synchronous copies: runtime/driver cudaMemcpy*/cuMemcpy*/hipMemcpy*
--                         without "Async", and any copy API call whose copy involves
--                         pageable host memory (gpu_ops src_kind/dst_kind 'Pageable', by
--                         correlation): a pageable cudaMemcpyAsync returns only when staged
--   5. memory_management  allocator calls: runtime/driver cudaMalloc*/cudaFree*/cudaHostAlloc/
--                         cudaHostRegister/Unregister, cuMemAlloc*/cuMemFree*/cuMemCreate/
--                         cuMemMap/cuMemUnmap/cuMemRelease/cuMemHostAlloc, hipMalloc*/hipFree*/
--                         hipHostMalloc/hipHostFree/hipExtMallocWithFlags (allocator churn)
--   6. launch_overhead    a thread that launches GPU work (one of its runtime/driver calls
--                         is linked by correlation id to a GPU op) is inside any other
--                         runtime/driver call: the host is busy issuing work. Threads that
--                         never launch (e.g. NCCL watchdogs polling cudaEventQuery) do not count;
--                         nor do graph launches (cudaGraphLaunch/hipGraphLaunch: their kernels
--                         are graph replays, queued as one, never launch overhead)
--   7. host_compute       a cpu_op / python op of a process that launches GPU work, with no
--                         CUDA API call under it: the host computes (CPU-bound)
--   8. unattributed       nothing recorded (no host activity the trace shows)
-- Host ops of kind graph_op (captured ops replayed from a graph, ingest --graph-capture) hold
-- GPU times and are no host activity. Only the host activity that overlaps some gap is considered
-- (stalls_activity.sql lists it with its level). Method: one sweep over the edges of the
-- gaps and of every activity level (traceq/engine/level_sweep.py, in one pass over every
-- rank and device); each elementary segment inside a gap takes the lowest level covering
-- it. The eight parts add up to the gap exactly.
--
-- Parameters: $min_gap_ns (integer). Requires scope_links (launch_links.sql), st_busy
-- (stalls_busy.sql), st_gap_levels (rank, device, start_ns of a gap and its time l1..l7 at
-- levels 1-7: the sweep's output) and the macros of intervals.sql.
--
-- Output columns (one row per gap):
--   rank, device     where
--   start_ns, end_ns the gap (GPU idle), ns
--   gap_ns           end_ns − start_ns, ns
--   data_ns, comm_ns, sync_ns, copy_ns, memory_ns, launch_ns, host_ns, unattributed_ns
--                    the gap's time by cause (levels 1-8 above), ns
--   cause            the cause with the most time (ties go to the earlier in precedence)
--   queued           the GPU op that ends the gap was already in the GPU's queue when the gap
--                    began (its runtime/driver launch call had returned at or before start_ns):
--                    the host had issued the next work and the GPU waited on something else
--                    (an event, a peer, work the trace does not show). As in HTA's idle-time
--                    breakdown, a gap is the host's (host_wait) only when the next
--                    op was not issued yet; a launch call still running when the gap begins
--                    is the host still launching (HTA: kernel_wait). False when no launch
--                    call of that op is recorded
WITH gaps AS (
    SELECT key, start_ns, end_ns FROM iv_gaps(st_busy) WHERE end_ns - start_ns >= $min_gap_ns
), queued AS (
    -- gaps whose ending op (an op of the device starting at the gap's end) was enqueued
    -- (launch call returned) no later than the gap's start
    SELECT DISTINCT g.key, g.start_ns
    FROM gaps g
    JOIN scope_links l ON l.rank = g.key.rank AND l.device = g.key.device AND l.op_start_ns = g.end_ns
    WHERE l.call_end_ns <= g.start_ns
), attributed AS (
    SELECT g.key.rank AS rank, g.key.device AS device, g.start_ns, g.end_ns,
           g.end_ns - g.start_ns AS gap_ns,
           coalesce(a.l1, 0)::BIGINT AS data_ns, coalesce(a.l2, 0)::BIGINT AS comm_ns,
           coalesce(a.l3, 0)::BIGINT AS sync_ns, coalesce(a.l4, 0)::BIGINT AS copy_ns,
           coalesce(a.l5, 0)::BIGINT AS memory_ns, coalesce(a.l6, 0)::BIGINT AS launch_ns,
           coalesce(a.l7, 0)::BIGINT AS host_ns, q.key IS NOT NULL AS queued
    FROM gaps g
    LEFT JOIN st_gap_levels a ON a.rank = g.key.rank AND a.device = g.key.device AND a.start_ns = g.start_ns
    LEFT JOIN queued q ON q.key = g.key AND q.start_ns = g.start_ns
)
SELECT rank, device, start_ns, end_ns, gap_ns, data_ns, comm_ns, sync_ns, copy_ns, memory_ns,
       launch_ns, host_ns,
       (gap_ns - data_ns - comm_ns - sync_ns - copy_ns - memory_ns - launch_ns - host_ns)::BIGINT AS unattributed_ns,
       CASE greatest(data_ns, comm_ns, sync_ns, copy_ns, memory_ns, launch_ns, host_ns,
                     gap_ns - data_ns - comm_ns - sync_ns - copy_ns - memory_ns - launch_ns - host_ns)
           WHEN data_ns THEN 'data_loading'
           WHEN comm_ns THEN 'communication'
           WHEN sync_ns THEN 'synchronization'
           WHEN copy_ns THEN 'blocking_copy'
           WHEN memory_ns THEN 'memory_management'
           WHEN launch_ns THEN 'launch_overhead'
           WHEN host_ns THEN 'host_compute'
           ELSE 'unattributed' END AS cause,
       queued
FROM attributed
ORDER BY rank, device, start_ns
