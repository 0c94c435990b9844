-- tb_events: a rank's events typed as the TensorBoard profiler plugin (torch-tb-profiler 0.4.3,
-- trace.py and event_parser.py) reads them, for tb_steps.sql and overview.sql.
--
-- Types (the Kineto `cat`, lower-cased, kept in host_ops/regions.source_category; sources
-- without categories, such as nsys, fall back to host_ops.kind):
--   CPU op    = cat cpu_op | operator      Python = cat python (the 2021 spelling only:
--                                          python_function is no CPU op to the plugin)
--   Runtime   = cat runtime (the 2021 spelling: 0.4.3 does not know cuda_runtime, so traces
--               written since PyTorch 1.10 have no runtime calls to it); without a category,
--               host_ops kind runtime and the cuda*/hip* synchronisation calls
--   GPU op    = gpu_ops kind kernel | memcpy | memset
--   annotations: user_annotation (only ProfilerStep#N and the communication ops count),
--               gpu_user_annotation
--
-- Times: with $plugin_times, as the plugin reads them: a start is the trace's ts as a float64
-- µs, an end is ts + dur added in float64 µs (on a trace with epoch-µs timestamps the sum
-- rounds to 0.25 µs); both back in ns. Without, the store's exact ns.
--
-- Parameters: $run, $plugin_times (bool). Requires: scope_window (the ranks).
--
-- Output: temp tables
--   tb_host(rank, name, start_ns, end_ns, correlation, external_id, cat): CPU ops, Python events,
--     runtime calls (cat cpu_op | operator | python | runtime; other host events are left out)
--   tb_regions(rank, name, source, start_ns, end_ns, step, cat)
--   tb_device(rank, device, kind, start_ns, end_ns, correlation, external_id)

-- tb_us: ns -> float64 µs (the integer µs exactly, then the fraction: ns beyond 2^53 do not
-- fit a double); tb_ns: float64 µs -> ns (whole µs, then the rounded fraction)
CREATE OR REPLACE TEMP MACRO tb_us(s) AS CAST(s // 1000 AS DOUBLE) + (s % 1000) / 1000.0;

CREATE OR REPLACE TEMP MACRO tb_ns(x) AS
    CAST(floor(x) AS BIGINT) * 1000 + CAST(round((x - floor(x)) * 1000.0) AS BIGINT);

CREATE OR REPLACE TEMP MACRO tb_start(s, plugin) AS CASE WHEN plugin THEN tb_ns(tb_us(s)) ELSE s END;

CREATE OR REPLACE TEMP MACRO tb_end(s, e, plugin) AS
    CASE WHEN plugin THEN tb_ns(tb_us(s) + (e - s) / 1000.0) ELSE e END;

CREATE OR REPLACE TEMP TABLE tb_host AS
SELECT rank, name, tb_start(start_ns, $plugin_times) AS start_ns, tb_end(start_ns, end_ns, $plugin_times) AS end_ns,
       correlation, external_id,
       CASE WHEN source_category IS NOT NULL THEN source_category
            WHEN kind = 'sync_api' AND regexp_matches(name, '^(cuda|hip)') THEN 'runtime'
            WHEN kind = 'python' THEN 'python_function'
            ELSE kind END AS cat
FROM host_ops
WHERE run = $run AND rank IN (SELECT rank FROM scope_window)
  AND coalesce(source_category, kind) IN ('cpu_op', 'operator', 'python', 'runtime', 'sync_api');

CREATE OR REPLACE TEMP TABLE tb_regions AS
SELECT rank, name, source, tb_start(start_ns, $plugin_times) AS start_ns,
       tb_end(start_ns, end_ns, $plugin_times) AS end_ns, step,
       coalesce(source_category, CASE WHEN domain = 'gpu' THEN 'gpu_user_annotation'
                                      WHEN source = 'dataloader' THEN 'cpu_op'
                                      ELSE 'user_annotation' END) AS cat
FROM regions
WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND source IN ('step', 'dataloader', 'annotation');

CREATE OR REPLACE TEMP TABLE tb_device AS
SELECT rank, device, kind, tb_start(start_ns, $plugin_times) AS start_ns,
       tb_end(start_ns, end_ns, $plugin_times) AS end_ns, correlation, external_id
FROM gpu_ops
WHERE run = $run AND rank IN (SELECT rank FROM scope_window) AND kind IN ('kernel', 'memcpy', 'memset');

