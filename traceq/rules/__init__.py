"""Classification tables as data: what a kernel name, a host op or a library is.

    categories   kernel category rules (ingest classifies every GPU op with them)
    tensor_cores.toml   tensor/matrix-core evidence in kernel names (traceq.kernels.tensor_cores;
                 ingest stores gpu_ops.tensor_core with it)
    gpus.toml    device peaks: dense tensor/vector TFLOP/s and memory bandwidth per GPU
                 (traceq.perf.devices)
    collective_type  collective types (all_reduce, all_to_all, dispatch, ...) of communication
                 kernels from the launching op, its "Collective name" and the kernel name; a
                 SQL macro of traceq/queries/ranks_rank.sql
    host_api     host-API classes (synchronisation, blocking copies, allocator calls,
                 communication ops) as SQL macros shared by the stall attribution and the
                 advice rules
"""
