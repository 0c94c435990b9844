"""The canonical tables of the store: one Arrow schema per table.

Ingestors produce these columns (without `run`/`rank`, which the store adds); times are
int64 nanoseconds on the source's own clock, `runs.clock_offset_ns` maps them to epoch ns.
`conform()` casts an ingestor's table to the schema, adding missing columns as nulls.

The tables are declared as (column, Arrow type name) pairs, so that reading the store (DuckDB
views, traceq.store) needs no pyarrow (start-up time); `GPU_OPS`, ..., `RUNS` and `TABLES` are
the pyarrow schemas, built on first use.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

STR, I64, I32, F64, BOOL, TIMESTAMP_US = "string", "int64", "int32", "double", "bool", "timestamp[us]"

GPU_OPS_COLUMNS = [
    ("pid", I64),            # host process that launched the op (joins with host_ops.pid)
    ("device", I32),
    ("stream", I64),
    ("kind", STR),           # kernel | memcpy | memset | sync
    ("name", STR),           # kernel name; memcpy/memset: "[CUDA memcpy Host-to-Device]", "[CUDA memset]"
    ("start_ns", I64),
    ("end_ns", I64),
    ("correlation", I64),    # CUPTI correlation id (unique per process) -> host_ops.correlation
    ("external_id", I64),    # Kineto "External id" (-> cpu_op), null elsewhere
    ("bytes", I64),
    ("copy_kind", STR),      # HtoD | DtoH | DtoD | HtoH | PtoP | ... (memcpy only)
    ("src_kind", STR),       # Pageable | Pinned | Device | ... (memcpy only, when known)
    ("dst_kind", STR),
    ("grid_x", I32), ("grid_y", I32), ("grid_z", I32),
    ("block_x", I32), ("block_y", I32), ("block_z", I32),
    ("registers", I32),      # registers per thread
    ("category", STR),       # traceq.rules.categories rule table
    ("identity", STR),       # kernel function name without return type, template args, params (traceq.kernels.identity)
    ("library", STR),        # vendor/library of the kernel (cuBLAS, cuDNN, NCCL/RCCL, ATen, Triton, ...; "other")
    # Collective identity, from the args PyTorch writes on NCCL kernels (Kineto; null elsewhere):
    ("collective", STR),     # "Collective name": allreduce, broadcast, send, ... (PyTorch >= 2.1)
    ("pg_name", STR),        # "Process Group Name" (older PyTorch: "Process Group ID", as text): the process group, the same on all its ranks ("0")
    ("pg_desc", STR),        # "Process Group Description": default_pg, ...
    ("group_size", I32),     # "Group size": ranks in the process group
    ("seq", I64),            # "Seq": the collective's sequence number in its process group (PyTorch >= 2.4)
    ("tensor_core", BOOL),   # kernel runs on tensor/matrix cores by its name's evidence (traceq.kernels.tensor_cores); null for non-kernels
    # Launch facts of kernels, as the source records them (null when it does not, and for non-kernels):
    ("shared_memory", I64),  # shared memory per block, bytes: Kineto "shared memory"; nsys staticSharedMemory + dynamicSharedMemory
    ("blocks_per_sm", F64),  # Kineto "blocks per SM": the grid's blocks / the device's SM count
    ("warps_per_sm", F64),   # Kineto "warps per SM": the grid's warps / the device's SM count
    ("est_occupancy_pct", F64),  # Kineto "est. achieved occupancy %": estimated achieved occupancy, 0-100
]

HOST_OPS_COLUMNS = [
    ("pid", I64),
    ("tid", I64),
    ("kind", STR),           # runtime | driver | cpu_op | python | sync_api | other
    ("name", STR),           # API names without the _vNNNN suffix
    ("start_ns", I64),
    ("end_ns", I64),
    ("correlation", I64),
    ("external_id", I64),
    ("unfinished", BOOL),  # still open when the capture ended (end = capture end)
    ("source_category", STR),  # the event's category, lower-cased (Kineto "cat": "cuda_runtime",
                               # "runtime" (2021 traces), "cpu_op", "python", ...); null elsewhere. The TensorBoard
                               # plugin's rules tell its legacy spellings apart (traceq.engine.tb_window)
    # CPU ops recorded with shapes (Kineto, record_shapes=True; null elsewhere): each the
    # compact JSON text of a list with one item per input of the op
    ("input_dims", STR),     # "Input Dims": [[512],[141,512],[512,512],[],[]] ([] = a scalar or no tensor)
    ("input_types", STR),    # "Input type": ["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"]
    ("input_strides", STR),  # "Input Strides": [[1],[512,1],[1,512],[],[]]
    ("concrete_inputs", STR),  # "Concrete Inputs": the values of scalar inputs, as text: ["","","","1","1"]
]

REGIONS_COLUMNS = [
    ("pid", I64),
    ("tid", I64),
    ("source", STR),         # nvtx | annotation | step | dataloader | timer
    ("name", STR),
    ("domain", STR),         # NVTX domain; "gpu" for Kineto gpu_user_annotation spans
    ("start_ns", I64),
    ("end_ns", I64),
    ("depth", I32),          # nesting level on its thread, 0 = outermost
    ("step", I64),           # N of ProfilerStep#N (source = step), else null
    ("device", I32),         # GPU-side spans only (gpu_user_annotation)
    ("stream", I64),
    ("gpu_start_ns", I64),   # GPU-side timing (timer CUDA events, gpu_user_annotation)
    ("gpu_end_ns", I64),
    ("gpu_dur_ns", I64),
    ("unfinished", BOOL),
    ("source_category", STR),  # as host_ops': Kineto "cat" (cpu_op, user_annotation, gpu_user_annotation, ...)
    # as host_ops' (record_shapes), for the ranges of torch.autograd.profiler.emit_nvtx(record_shapes=True)
    # in nsys: input_dims from the range's name ("..., sizes = [[3], [3, 4]]" -> [[3],[3,4]]); the rest null
    ("input_dims", STR),
    ("input_types", STR),
    ("input_strides", STR),
    ("concrete_inputs", STR),
]

TIMER_STATS_COLUMNS = [
    ("key", STR),
    ("clock", STR),          # cpu | gpu
    ("min_s", F64),
    ("mean_s", F64),
    ("median_s", F64),
    ("max_s", F64),
    ("stdev_s", F64),
]

# Metrics a result file states directly (mila training / milabench results): traceq.ingest.timers.mila.
METRICS_COLUMNS = [
    ("bench", STR),          # benchmark within the file (milabench summary), null = the run itself
    ("metric", STR),         # step_time | throughput | train | train_item | walltime | ...
    ("value", F64), # in `unit`
    ("unit", STR),           # s | items/s | ...
    ("samples", I64),        # values behind it (batches timed, or runs summarised)
    ("sd", F64),
    ("min", F64),
    ("max", F64),
    ("runs", I64),           # runs the value summarises (milabench summary: n), else 1
]

# Memory allocator events (Kineto `[memory]` instant events, nsys CUDA_GPU_MEMORY_USAGE_EVENTS):
# traceq.analyses.memory.
MEMORY_EVENTS_COLUMNS = [
    ("pid", I64),
    ("tid", I64),            # the thread that allocated or freed (null in nsys)
    ("device_type", STR),    # cpu | cuda | another Kineto "Device Type" as its number in text
    ("device", I32),         # Kineto "Device Id" (-1 for the CPU); nsys deviceId
    ("start_ns", I64),       # the event's time
    ("addr", I64),           # address of the block (null when not recorded: PyTorch < 1.10)
    ("bytes", I64),          # signed: > 0 an allocation, < 0 a free
    ("total_allocated", I64),  # the allocator's totals on the device after the event;
    ("total_reserved", I64),   # null when the trace does not record them (older Kineto, nsys)
]

# Columns of each canonical table (without run/rank); TABLES has their pyarrow schemas.
TABLE_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "gpu_ops": GPU_OPS_COLUMNS,
    "host_ops": HOST_OPS_COLUMNS,
    "regions": REGIONS_COLUMNS,
    "timer_stats": TIMER_STATS_COLUMNS,
    "metrics": METRICS_COLUMNS,
    "memory_events": MEMORY_EVENTS_COLUMNS,
}

# A `runs.warnings` entry starting with this says the source file was cut short (a killed
# writer): ingest kept the complete events before the cut, so later events (in Kineto
# traces the GPU activities, written after the CPU ops) may be missing.
TRUNCATED_WARNING = "file is truncated or malformed after"


def truncated_warning(n_events: int) -> str:
    return f"{TRUNCATED_WARNING} {n_events} complete events; ingested those (was the writer killed?)"


# The `runs` manifest: one row per (run, rank).
RUNS_COLUMNS = [
    ("run", STR),
    ("rank", I32),
    ("world_size", I32),
    ("source_path", STR),
    ("source_sha256", STR),
    ("source_format", STR),      # nsys | kineto | timer_log | deep500_stats | mila | milabench
    ("format_version", STR),
    ("host", STR),
    ("devices", STR),            # JSON list of {id, name, sm_count, memory_bytes}, plus the device properties the
    # source records (absent = unknown; ints): compute_major, compute_minor, max_threads_per_block,
    # max_threads_per_sm, regs_per_block, regs_per_sm, warp_size, shared_mem_per_block (bytes),
    # shared_mem_per_sm, shared_mem_per_block_optin, max_blocks_per_sm
    ("clock_offset_ns", I64),    # the rank's raw clock -> epoch ns (Kineto baseTimeNanoseconds, nsys utcEpochNs)
    ("ingested_at", TIMESTAMP_US),         # UTC
    ("labels", STR),             # JSON object {key: value}
    ("warnings", STR),           # JSON list of strings
    ("n_gpu_ops", I64),
    ("n_host_ops", I64),
    ("n_regions", I64),
    ("n_timer_stats", I64),
    ("files", STR),              # JSON {table: path relative to the store}
    # + clock_offset_ns = the rank's time on the run's common clock: the ends of the collectives
    # matched across the run's ranks aligned (traceq.clocks); null when nothing was aligned
    ("clock_refine_ns", I64),
    # size of the source file: a file whose size no manifest row has cannot be unchanged, so
    # ingest decodes it while its sha256 is still being computed (null in manifest rows written without it)
    ("source_bytes", I64),
]


_ARROW_SCHEMAS = {"GPU_OPS": GPU_OPS_COLUMNS, "HOST_OPS": HOST_OPS_COLUMNS, "REGIONS": REGIONS_COLUMNS,
                  "TIMER_STATS": TIMER_STATS_COLUMNS, "METRICS": METRICS_COLUMNS, "MEMORY_EVENTS": MEMORY_EVENTS_COLUMNS,
                  "RUNS": RUNS_COLUMNS}


def arrow_schema(columns: list[tuple[str, str]]) -> pa.Schema:
    import pyarrow as pa

    return pa.schema([(name, pa.type_for_alias(t)) for name, t in columns])


def __getattr__(name: str):
    """GPU_OPS, HOST_OPS, REGIONS, TIMER_STATS, METRICS, MEMORY_EVENTS, RUNS (pyarrow schemas) and TABLES
    ({table: schema}), built when first asked for."""
    if name in _ARROW_SCHEMAS:
        value = arrow_schema(_ARROW_SCHEMAS[name])
    elif name == "TABLES":
        value = {table: arrow_schema(cols) for table, cols in TABLE_COLUMNS.items()}
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def table_schema(name: str) -> pa.Schema:
    """The pyarrow schema of canonical table `name` (= TABLES[name])."""
    return __getattr__("TABLES")[name] if "TABLES" not in globals() else globals()["TABLES"][name]


def empty(name: str) -> pa.Table:
    return table_schema(name).empty_table()


def conform(name: str, table: pa.Table | None) -> pa.Table:
    """Return `table` with exactly the columns of schema `name` (missing ones null)."""
    import pyarrow as pa

    schema = table_schema(name)
    if table is None or table.num_rows == 0 and table.num_columns == 0:
        return schema.empty_table()
    n = table.num_rows
    cols = []
    for field in schema:
        if field.name in table.column_names:
            col = table.column(field.name)
            if col.type != field.type and col.type != _dictionary_of(field.type):
                col = cast(col, field.type)
            cols.append(col)
        else:
            cols.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(cols, schema=pa.schema([pa.field(f.name, c.type) for f, c in zip(schema, cols)]))


def _dictionary_of(t: pa.DataType) -> pa.DataType | None:
    """The dictionary-encoded form of a string column that conform() keeps as it is (a reader
    may hand text over dictionary-encoded: Parquet stores it so anyway, and readers see text)."""
    import pyarrow as pa

    return pa.dictionary(pa.int32(), t) if t == pa.string() else None


def cast(col, to: pa.DataType):
    """Cast; integers that do not fit a narrower integer type (a grid of 10**12) become null."""
    import pyarrow as pa

    from . import arrow_kernels as ak

    try:
        return ak.cast(col, to)
    except pa.ArrowInvalid:
        if not (pa.types.is_integer(col.type) and pa.types.is_integer(to)):
            raise
        info = (-(2 ** (to.bit_width - 1)), 2 ** (to.bit_width - 1) - 1) if pa.types.is_signed_integer(to) \
            else (0, 2 ** to.bit_width - 1)
        fits = ak.call("and", ak.call("greater_equal", col, info[0]), ak.call("less_equal", col, info[1]))
        return ak.cast(ak.call("if_else", fits, col, pa.scalar(None, col.type)), to)
