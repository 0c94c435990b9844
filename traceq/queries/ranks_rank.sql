-- ranks_rank: the per-rank facts that the cross-rank analyses reduce (DESIGN §8). Runs once
-- per rank, on the executor, over that rank's files only; its output is small (one row per
-- collective kernel), never the rank's events.
--
-- Collective instances: the NCCL/RCCL kernels of the rank (gpu_ops.kind = 'kernel' and
-- category = 'communication'). The trace holds no process-group ids or sequence numbers
-- in the store, so an instance is keyed by its communicator's stream and its order there:
--   grp  dense rank of the stream among the rank's streams that run collectives (by id)
--   k    0-based order of the kernel on that stream (by start)
-- The same (grp, coll, k) on two ranks is the same collective instance.
--
-- Parameters: $run (text), $rank (int).
--
-- Output columns (one row per collective kernel):
--   rank      rank
--   grp       communicator stream index (see above)
--   stream    the stream id
--   coll      collective type from the kernel name: AllReduce, AllGather, ReduceScatter,
--             Broadcast, Reduce, SendRecv, AllToAll, ... (ncclKernel_<Type>_... /
--             ncclDevKernel_<Type>_...), else the kernel name up to '('
--   k         order on the stream
--   start_ns  kernel start, on the rank's own clock, ns
--   end_ns    kernel end, ns
--   bytes     message size when the trace gives it (gpu_ops.bytes), else NULL

WITH c AS (
    SELECT rank, stream, start_ns, end_ns, bytes,
           coalesce(nullif(regexp_extract(name, '^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)', 1), ''),
                    split_part(name, '(', 1)) AS coll
    FROM gpu_ops
    WHERE run = $run AND rank = $rank AND kind = 'kernel' AND category = 'communication'
)
SELECT rank,
       (dense_rank() OVER (ORDER BY stream) - 1)::INTEGER                          AS grp,
       stream, coll,
       (row_number() OVER (PARTITION BY stream ORDER BY start_ns, end_ns) - 1)::BIGINT AS k,
       start_ns, end_ns, bytes
FROM c
ORDER BY grp, k
