-- ranks_rank: the per-rank facts that the cross-rank analyses reduce. Runs once
-- per rank, on the executor, over that rank's files only; its output is small (one row per
-- collective instance of the rank), never the rank's events. Ingest runs it over all the
-- ranks of a run at once ($rank NULL) to align their clocks (traceq/clocks.py).
--
-- Collective instances: the NCCL/RCCL kernels of the rank (gpu_ops.kind = 'kernel' and
-- category = 'communication'). An instance is keyed by (grp, coll, k); the same key on two
-- ranks is the same collective instance. The key is the best identity the trace gives:
--   1. process group + sequence number (PyTorch >= 2.4 writes "Process Group Name" and
--      "Seq" on the kernels; gpu_ops.pg_name, seq):
--        grp = 'pg ' || pg_name (|| ' p2p' for send/recv: PyTorch numbers point-to-point
--        ops apart from collectives), k = seq
--   2. process group without sequence numbers (PyTorch 2.1-2.3): order per process group
--      and collective type:  grp = 'pg ' || pg_name || ' by order', k = 0-based order of
--      the rank's kernels of that group and type (by start)
--   3. neither (nsys, older traces): order per stream:  grp = 'stream ' || N, N the dense
--      rank of the stream among the rank's streams that run collectives (by id), k = 0-based
--      order of the kernel on that stream (by start)
-- Kernels of one rank with the same key (a collective split into several kernels) are one
-- instance: first start, last end, largest message.
--
-- Parameters: $run (text), $rank (int, or NULL for every rank of the run).
--
-- Output columns (one row per collective instance of a rank):
--   rank      rank
--   grp       matching group (see above)
--   stream    the stream id (the lowest, for a split instance)
--   coll      collective type from the kernel name: AllReduce, AllGather, ReduceScatter,
--             Broadcast, Reduce, SendRecv, AllToAll, ... (ncclKernel_<Type>_... /
--             ncclDevKernel_<Type>_...), else the kernel name up to '('
--   k         sequence number (1.) or order (2., 3.)
--   start_ns  kernel start, on the rank's own clock, ns
--   end_ns    kernel end, ns
--   bytes     message size when the trace gives it (gpu_ops.bytes), else NULL

WITH c AS (
    SELECT rank, stream, start_ns, end_ns, bytes, pg_name, seq,
           coalesce(nullif(regexp_extract(name, '^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)', 1), ''),
                    split_part(name, '(', 1)) AS coll,
           lower(coalesce(collective, '')) IN ('send', 'recv') AS p2p
    FROM gpu_ops
    WHERE run = $run AND ($rank::INTEGER IS NULL OR rank = $rank::INTEGER)
      AND kind = 'kernel' AND category = 'communication'
), keyed AS (
    SELECT rank, stream, coll, start_ns, end_ns, bytes,
           CASE WHEN pg_name IS NULL
                THEN 'stream ' || (dense_rank() OVER (PARTITION BY rank, pg_name IS NULL ORDER BY stream) - 1)
                WHEN seq IS NULL THEN 'pg ' || pg_name || ' by order'
                ELSE 'pg ' || pg_name || CASE WHEN p2p THEN ' p2p' ELSE '' END END AS grp,
           CASE WHEN pg_name IS NULL
                THEN row_number() OVER (PARTITION BY rank, pg_name IS NULL, stream ORDER BY start_ns, end_ns) - 1
                WHEN seq IS NULL
                THEN row_number() OVER (PARTITION BY rank, pg_name, seq IS NULL, coll ORDER BY start_ns, end_ns) - 1
                ELSE seq END::BIGINT AS k
    FROM c
)
SELECT rank, grp, min(stream) AS stream, coll, k, min(start_ns) AS start_ns, max(end_ns) AS end_ns,
       max(bytes) AS bytes
FROM keyed
GROUP BY rank, grp, coll, k
ORDER BY rank, grp, k
