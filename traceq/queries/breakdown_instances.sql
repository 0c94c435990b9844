-- breakdown_instances: every region instance with the GPU work it launched (the per-range
-- table behind `breakdown`; nsys `nvtx_gpu_proj_trace` semantics for CPU-side ranges).
--
-- Regions of the scope: run $run, the ranks of scope_window, and (with --steps) the regions
-- that start inside the step window; only the sources listed in $sources.
--
-- Projection rule (that of nsys' nvtx_gpu_proj_trace report) for CPU-side regions (sources nvtx,
-- annotation, step, dataloader):
--   * a *launch* is a host API call (host_ops kind runtime | driver | sync_api) whose
--     correlation id matches a GPU op (gpu_ops kind kernel | memcpy | memset; `sync`
--     records are not GPU work) of the same rank and process (correlation ids are unique
--     per process only);
--   * a region instance R gets the op when the launch call lies fully inside R on the same
--     thread: R.pid = L.pid AND R.tid = L.tid AND R.start_ns <= L.start_ns AND
--     L.end_ns <= R.end_ns (CPU times of the launch call, not of the op). Every enclosing
--     region gets it: nested ranges all count the same op;
--   * consequence: ops launched from another thread are not counted. PyTorch runs backward
--     on its autograd thread, so a ProfilerStep (main thread) projects forward/optimizer
--     launches only — the same as nsys would show for an NVTX range around the step.
-- Kineto `gpu_user_annotation` spans (Kineto regions with domain 'gpu': annotations, and the
-- GPU-side copies Kineto writes of ProfilerStep#N and DataLoader calls) are already on the
-- GPU: they are not host regions and have no CPU time. Each is kept as source
-- `gpu_annotation`, whatever name it carries (a GPU-side ProfilerStep#N is not a step: not
-- source step, not folded into the host step, whose CPU time and launch projection stay
-- those of the host span alone; merging would count the work twice); their projection is the
-- span itself (Kineto: min op start .. max op end of the annotation's ops on one stream) and
-- their ops are the ops of that device and stream lying inside the span.
-- Timer regions (source timer) use their measured GPU time (gpu_dur_ns, else gpu_end_ns -
-- gpu_start_ns) as both projected and busy time; they have no op count.
-- Regions still open at capture end (unfinished) are included, ending at capture end.
--
-- Parameters: $run (text), $sources (list of text: nvtx, annotation, gpu_annotation, step,
-- dataloader, timer). Requires scope_window and the macros of intervals.sql.
--
-- Output columns (one row per region instance):
--   rid              row id of the instance (deterministic within one query)
--   rank, pid, tid   where the region ran (pid/tid null for GPU-side spans)
--   source           nvtx | annotation | gpu_annotation | step | dataloader | timer
--   name, domain     region name (NVTX text, annotation name, timer key); NVTX domain
--   step             N of ProfilerStep#N (source step, or its GPU-side copy: source
--                    gpu_annotation), else null
--   depth            nesting level on its thread (0 = outermost), as ingested
--   start_ns, end_ns CPU-side range (GPU-side for gpu_annotation), ns
--   cpu_ns           end_ns - start_ns, ns (null for gpu_annotation)
--   unfinished       still open when the capture ended
--   gpu_ops          GPU ops launched inside, counted as nsys NumGPUOps: distinct launch
--                    correlation ids (a CUDA-graph launch of many kernels counts once)
--   gpu_proj_start_ns  first op start (projected start), ns
--   gpu_proj_ns      last op end - first op start (projected duration, may include idle), ns
--   gpu_busy_ns      length of the union of those ops' intervals, ns
WITH reg AS (
    SELECT r.rank, r.pid, r.tid,
           CASE WHEN r.domain = 'gpu' AND r.source IN ('annotation', 'step', 'dataloader') THEN 'gpu_annotation'
                ELSE r.source END AS source,
           r.name, r.domain, r.step, r.depth, r.start_ns, r.end_ns,
           coalesce(r.unfinished, false) AS unfinished, r.device, r.stream,
           r.gpu_start_ns, r.gpu_end_ns, r.gpu_dur_ns
    FROM regions r
    JOIN scope_window w ON w.rank = r.rank
    WHERE r.run = $run
      AND (w.lo_ns IS NULL OR (r.start_ns >= w.lo_ns AND r.start_ns < w.hi_ns))
), inst AS (
    SELECT row_number() OVER (ORDER BY rank, start_ns, end_ns DESC, source, name, pid, tid) AS rid, *
    FROM reg
    WHERE list_contains($sources, source)
), ops AS (
    SELECT row_number() OVER () AS op_id, g.rank, g.pid, g.device, g.stream, g.correlation,
           g.start_ns, g.end_ns
    FROM gpu_ops g
    JOIN scope_window w ON w.rank = g.rank
    WHERE g.run = $run AND g.kind IN ('kernel', 'memcpy', 'memset')
), launch AS (
    SELECT {'rank': h.rank, 'pid': h.pid, 'tid': h.tid} AS key,
           row_number() OVER () AS iid, h.rank, h.pid, h.correlation, h.start_ns, h.end_ns
    FROM host_ops h
    JOIN scope_window w ON w.rank = h.rank
    WHERE h.run = $run AND h.kind IN ('runtime', 'driver', 'sync_api') AND h.correlation IS NOT NULL
      AND EXISTS (SELECT 1 FROM ops o
                  WHERE o.rank = h.rank AND o.pid = h.pid AND o.correlation = h.correlation)
), cpu_outer AS (
    SELECT {'rank': rank, 'pid': pid, 'tid': tid} AS key, rid AS oid, start_ns, end_ns
    FROM inst
    WHERE source IN ('nvtx', 'annotation', 'step', 'dataloader')
), gpu_outer AS (
    SELECT {'rank': rank, 'device': device, 'stream': stream} AS key, rid AS oid,
           gpu_start_ns AS start_ns, gpu_end_ns AS end_ns
    FROM inst
    WHERE source = 'gpu_annotation'
), gpu_inner AS (
    SELECT {'rank': rank, 'device': device, 'stream': stream} AS key, op_id AS iid, start_ns, end_ns
    FROM ops
    WHERE EXISTS (SELECT 1 FROM gpu_outer)
), inst_ops AS (
    SELECT c.oid, o.op_id, o.correlation, o.start_ns, o.end_ns
    FROM iv_contains(cpu_outer, launch) c
    JOIN launch l ON l.iid = c.iid
    JOIN ops o ON o.rank = l.rank AND o.pid = l.pid AND o.correlation = l.correlation
    UNION ALL
    SELECT c.oid, o.op_id, o.correlation, o.start_ns, o.end_ns
    FROM iv_contains(gpu_outer, gpu_inner) c
    JOIN ops o ON o.op_id = c.iid
), proj AS (
    SELECT oid,
           count(DISTINCT coalesce(correlation, -1 - op_id)) AS gpu_ops,
           min(start_ns) AS proj_start_ns,
           max(end_ns) AS proj_end_ns
    FROM inst_ops
    GROUP BY oid
), busy_in AS (
    SELECT oid AS key, start_ns, end_ns FROM inst_ops
), busy AS (
    SELECT key AS oid, sum(end_ns - start_ns) AS busy_ns FROM iv_union(busy_in) GROUP BY key
)
SELECT i.rid, i.rank, i.pid, i.tid, i.source, i.name, i.domain, i.step, i.depth,
       i.start_ns, i.end_ns,
       CASE WHEN i.source = 'gpu_annotation' THEN NULL ELSE i.end_ns - i.start_ns END AS cpu_ns,
       i.unfinished,
       CASE WHEN i.source = 'timer' THEN NULL ELSE coalesce(p.gpu_ops, 0) END AS gpu_ops,
       CASE WHEN i.source = 'timer' THEN i.gpu_start_ns
            WHEN i.source = 'gpu_annotation' THEN i.gpu_start_ns
            ELSE p.proj_start_ns END AS gpu_proj_start_ns,
       CASE WHEN i.source = 'timer' THEN coalesce(i.gpu_dur_ns, i.gpu_end_ns - i.gpu_start_ns)
            WHEN i.source = 'gpu_annotation' THEN i.gpu_end_ns - i.gpu_start_ns
            ELSE p.proj_end_ns - p.proj_start_ns END AS gpu_proj_ns,
       CASE WHEN i.source = 'timer' THEN coalesce(i.gpu_dur_ns, i.gpu_end_ns - i.gpu_start_ns)
            ELSE b.busy_ns::BIGINT END AS gpu_busy_ns
FROM inst i
LEFT JOIN proj p ON p.oid = i.rid
LEFT JOIN busy b ON b.oid = i.rid
ORDER BY i.rid
