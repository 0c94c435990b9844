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
-- The launching op of a kernel: its launch call (the runtime/driver host op of the same rank,
-- process and correlation id), then the innermost host op or annotation (regions) on the
-- call's thread that encloses the call and is named as a collective with a type
-- (is_communication_name and collective_name_type: `nccl:all_to_all`, `c10d::alltoall_base_`;
-- `record_param_comms` names none). PyTorch runs an all_to_all as NCCL send/recv kernels:
-- the op makes them all_to_all.
--
-- Parameters: $run (text), $rank (int, or NULL for every rank of the run). Requires the
-- shared macros (traceq.queries.install_macros) and the views gpu_ops, host_ops, regions.
--
-- Output columns (one row per collective instance of a rank):
--   rank      rank
--   grp       matching group (see above)
--   stream    the stream id (the lowest, for a split instance)
--   coll      collective type (traceq/rules/collective_type.py, macro collective_type): all_reduce,
--             all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv, barrier,
--             dispatch, combine; from the launching op first (below), then the kernel's
--             "Collective name" (gpu_ops.collective), then its identity; else the kernel name
--             up to '('
--   k         sequence number (1.) or order (2., 3.)
--   start_ns  kernel start, on the rank's own clock, ns
--   end_ns    kernel end, ns
--   bytes     message size when the trace gives it (gpu_ops.bytes), else NULL

WITH comm AS (
    SELECT rank, pid, stream, correlation, name, identity, collective, start_ns, end_ns, bytes, pg_name, seq
    FROM gpu_ops
    WHERE run = $run AND ($rank::INTEGER IS NULL OR rank = $rank::INTEGER)
      AND kind = 'kernel' AND category = 'communication'
), calls AS (         -- the launch call of each communication kernel
    SELECT DISTINCT h.rank, h.pid, h.tid, h.correlation, h.start_ns
    FROM host_ops h JOIN (SELECT DISTINCT rank, pid, correlation FROM comm) k USING (rank, pid, correlation)
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver')
), named AS (         -- host ops and annotations named as a typed collective
    SELECT rank, pid, tid, name, start_ns, end_ns FROM (
        SELECT rank, pid, tid, name, start_ns, end_ns FROM host_ops
        WHERE run = $run AND ($rank::INTEGER IS NULL OR rank = $rank::INTEGER) AND host_is_communication(kind, name)
        UNION ALL
        SELECT rank, pid, tid, name, start_ns, end_ns FROM regions
        WHERE run = $run AND ($rank::INTEGER IS NULL OR rank = $rank::INTEGER) AND source IN ('annotation', 'nvtx')
          AND device IS NULL AND is_communication_name(name))
    WHERE collective_name_type(name) IS NOT NULL
), launcher AS (      -- the innermost such op around the call (latest start)
    SELECT c.rank, c.pid, c.correlation, arg_max(n.name, n.start_ns) AS op
    FROM calls c JOIN named n ON n.rank = c.rank AND n.pid = c.pid AND n.tid = c.tid
                              AND n.start_ns <= c.start_ns AND n.end_ns >= c.start_ns
    GROUP BY c.rank, c.pid, c.correlation
), c AS (
    SELECT k.rank, k.stream, k.start_ns, k.end_ns, k.bytes, k.pg_name, k.seq,
           coalesce(collective_type(coalesce(k.identity, k.name), l.op, k.collective),
                    split_part(k.name, '(', 1)) AS coll,
           lower(coalesce(k.collective, '')) IN ('send', 'recv') AS p2p
    FROM comm k LEFT JOIN launcher l ON l.rank = k.rank AND l.pid = k.pid AND l.correlation = k.correlation
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
