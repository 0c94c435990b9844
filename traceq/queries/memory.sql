-- memory: the allocator's events of the scope (Kineto `[memory]` instant events, nsys
-- CUDA_GPU_MEMORY_USAGE_EVENTS), with the device's memory in use after each event.
--
-- Definitions:
--   device            CPU (Device Type 0), GPU<id> (CUDA, and HIP: Device Type 6, which ROCm
--                     traces write and the plugin fails on), else <type>:<id> (the plugin's
--                     names; it leaves other device types out of its operator table)
--   allocated_bytes   the allocator's "Total Allocated" after the event, as recorded; when a
--                     device's events do not all record it (PyTorch < 1.10, nsys) the running
--                     sum of `bytes` over the device's events of the whole rank, in time order
--                     (file order within an instant): memory allocated since the capture began
--                     (what was allocated before it is unknown), flagged by rebuilt = true
--   reserved_bytes    "Total Reserved" after the event (memory the caching allocator holds);
--                     null when not recorded (it cannot be rebuilt from the events)
-- Events outside the scope's window (--steps) are left out after the running sums are taken.
-- Rows come in the store's order (file order per rank); the analysis sorts them by time, stably.
--
-- Parameters: $run. Requires scope_window.
--
-- Output columns:
--   rank              the rank
--   pid, tid          the thread that allocated or freed (tid null from nsys)
--   device            CPU, GPU<id>, or <device type>:<id>
--   start_ns          the event's time (the trace's clock)
--   addr              the block's address (null before PyTorch 1.10)
--   bytes             > 0 an allocation, < 0 a free
--   allocated_bytes   memory allocated on the device after the event (see Definitions)
--   reserved_bytes    memory reserved by the allocator after the event (null: not recorded)
--   rebuilt           allocated_bytes is the running sum of `bytes`, not the recorded total
WITH ev AS (
    SELECT m.rank, m.pid, m.tid,
           CASE WHEN m.device_type = 'cpu' THEN 'CPU'
                WHEN m.device_type IN ('cuda', '6') THEN 'GPU' || coalesce(m.device::VARCHAR, '?')
                ELSE coalesce(m.device_type, '?') || ':' || coalesce(m.device::VARCHAR, '?') END AS device,
           m.start_ns, m.addr, m.bytes, m.total_allocated, m.total_reserved,
           row_number() OVER () AS seq
    FROM memory_events m
    WHERE m.run = $run AND m.rank IN (SELECT rank FROM scope_window) AND m.start_ns IS NOT NULL
), flags AS (   -- devices whose events do not all record the total
    SELECT rank, device, count(total_allocated) < count(*) AS rebuilt FROM ev GROUP BY rank, device
), totals AS (
    SELECT ev.*, ev.total_allocated AS allocated_bytes, false AS rebuilt
    FROM ev JOIN flags f ON f.rank = ev.rank AND f.device = ev.device WHERE NOT f.rebuilt
    UNION ALL
    SELECT ev.*, sum(coalesce(ev.bytes, 0)) OVER (PARTITION BY ev.rank, ev.device ORDER BY ev.start_ns, ev.seq
                                                  ROWS UNBOUNDED PRECEDING)::BIGINT, true
    FROM ev JOIN flags f ON f.rank = ev.rank AND f.device = ev.device WHERE f.rebuilt
)
SELECT t.rank, t.pid, t.tid, t.device, t.start_ns, t.addr, t.bytes, t.allocated_bytes,
       t.total_reserved AS reserved_bytes, t.rebuilt
FROM totals t JOIN scope_window w ON w.rank = t.rank
WHERE (w.lo_ns IS NULL OR t.start_ns >= w.lo_ns) AND (w.hi_ns IS NULL OR t.start_ns <= w.hi_ns)
ORDER BY t.rank, t.device, t.start_ns, t.seq
