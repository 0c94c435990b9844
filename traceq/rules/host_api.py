"""Host-API classes: which host ops synchronise with the GPU, copy synchronously, allocate
or free memory, run a collective, or do one-off start-up work. One definition each, used by the stall attribution
(traceq/queries/stalls_gaps.sql) and by the advice rules that cite the calls
(traceq/advice/rules/allocator.py, sync.py), as DuckDB macros of (kind, name) that
`traceq.queries.install_macros` defines on every analysis connection.

`kind` is host_ops.kind (runtime, driver, sync_api, cpu_op, python, other); `name` the op's
name with the API version suffix stripped. CUDA runtime (`cuda*`), driver (`cu*`) and HIP
(`hip*`) spellings are covered alike.
"""
from __future__ import annotations

# CPU-side collective calls: NCCL/RCCL entry points, c10d and ProcessGroup ops, PyTorch's
# record_param_comms, Gloo's collectives (PyTorch's `gloo:broadcast`, `gloo:all_reduce`, ...
# annotations on Gloo's threads), and the collective names themselves
COMMUNICATION = (r"(?i)^nccl|^rccl|^gloo:|c10d::|processgroup|record_param_comms|all_?reduce|all_?gather"
                 r"|reduce_?scatter|all_?to_?all"
                 # MPI's point-to-point and collective calls (not MPI_Init/Finalize: start-up)
                 r"|^p?mpi_(send|recv|isend|irecv|sendrecv|wait|waitall|waitany|test|barrier|bcast|reduce|allreduce"
                 r"|gather|allgather|scatter|alltoall|ibarrier|ibcast|ireduce|iallreduce|iallgather|ialltoall)")
# ops that return only when the GPU has caught up: the runtime's *Synchronize calls, and
# PyTorch's scalar reads (.item())
SYNC_API_WORD = "Synchronize"
SCALAR_READS = ("aten::item", "aten::_local_scalar_dense")
# copies: blocking unless the name says Async
COPY = r"^(cuda|cu|hip)Memcpy"
# the allocator: device and pinned-host allocation, release and registration, cuMem* VMM calls
MEMORY = ("cudaMalloc", "cudaFree", "cudaHostAlloc", "cudaHostRegister", "cudaHostUnregister",
          "cuMemAlloc", "cuMemFree", "cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemHostAlloc",
          "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree", "hipExtMallocWithFlags", "hipHostRegister",
          "hipHostUnregister")


# a CUDA/HIP graph launch: one call, many kernels, replayed from the graph on the GPU (the
# kernels carry the call's correlation id); never launch overhead of those kernels
GRAPH_LAUNCH = r"^(cuda|cu|hip)GraphLaunch"


# one-off start-up: CUDA/HIP context creation, module and library loading (every kernel
# image is loaded on first use), run-time compilation (NVRTC/hipRTC, the driver's linker)
WARMUP_API = (r"^(cuInit|cuCtxCreate|cuDevicePrimaryCtxRetain|hipInit|hipCtxCreate|hipDevicePrimaryCtxRetain"
              r"|cuModuleLoad|cuLibraryLoad|cuLink|hipModuleLoad|hipLibraryLoad|nvrtcCompileProgram"
              r"|hiprtcCompileProgram|nvJitLink)")
# ... and the JIT/compile work of the frameworks, in cpu ops, Python functions or NVTX /
# annotation ranges: nvFuser lowering and code generation, Inductor/Triton compilation and
# autotuning, XLA/TensorRT builds; never the compiled code running (CompiledFunction,
# "Torch-Compiled Region": every step of a torch.compile'd model)
WARMUP_REGION = r"(?i)compil(e|ing|ation)|GpuLower|codegen|autotun|ptxas|nvrtc|buildSerializedNetwork|build_engine"
WARMUP_NOT = r"(?i)compiled"


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def macros() -> str:
    """The CREATE MACRO statements of the classes."""
    scalar = ", ".join(_quoted(n) for n in SCALAR_READS)
    memory = _quoted("^(" + "|".join(MEMORY) + ")")
    return f"""
CREATE OR REPLACE MACRO is_communication_name(name) AS
    regexp_matches(name, {_quoted(COMMUNICATION)});
CREATE OR REPLACE MACRO host_is_communication(kind, name) AS
    kind IN ('cpu_op', 'python', 'other') AND is_communication_name(name);
CREATE OR REPLACE MACRO host_is_sync(kind, name) AS
    (kind = 'sync_api' AND contains(name, {_quoted(SYNC_API_WORD)}))
    OR (kind = 'cpu_op' AND name IN ({scalar}));
CREATE OR REPLACE MACRO host_is_blocking_copy(kind, name) AS
    kind IN ('runtime', 'driver') AND regexp_matches(name, {_quoted(COPY)}) AND NOT contains(name, 'Async');
CREATE OR REPLACE MACRO host_is_memory(kind, name) AS
    kind IN ('runtime', 'driver') AND regexp_matches(name, {memory});
CREATE OR REPLACE MACRO host_is_graph_launch(kind, name) AS
    kind IN ('runtime', 'driver') AND regexp_matches(name, {_quoted(GRAPH_LAUNCH)});
CREATE OR REPLACE MACRO is_warmup_name(name) AS
    regexp_matches(name, {_quoted(WARMUP_REGION)}) AND NOT regexp_matches(name, {_quoted(WARMUP_NOT)});
CREATE OR REPLACE MACRO host_is_warmup(kind, name) AS
    (kind IN ('runtime', 'driver') AND regexp_matches(name, {_quoted(WARMUP_API)}))
    OR (kind IN ('cpu_op', 'python', 'other') AND is_warmup_name(name));
"""


# the SQL conditions on a host op `h` that the advice rules cite calls by
SYNC_CALLS = "host_is_sync(h.kind, h.name) OR host_is_blocking_copy(h.kind, h.name)"
MEMORY_CALLS = "host_is_memory(h.kind, h.name)"
WARMUP_CALLS = "host_is_warmup(h.kind, h.name)"
