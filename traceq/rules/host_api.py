"""Host-API classes: which host ops synchronise with the GPU, copy synchronously, allocate
or free memory, or run a collective. One definition each, used by the stall attribution
(traceq/queries/stalls_gaps.sql) and by the advice rules that cite the calls
(traceq/advice/rules/allocator.py, sync.py), as DuckDB macros of (kind, name) that
`traceq.queries.install_macros` defines on every analysis connection.

`kind` is host_ops.kind (runtime, driver, sync_api, cpu_op, python, other); `name` the op's
name with the API version suffix stripped. CUDA runtime (`cuda*`), driver (`cu*`) and HIP
(`hip*`) spellings are covered alike.
"""
from __future__ import annotations

# CPU-side collective calls: NCCL/RCCL entry points, c10d and ProcessGroup ops, PyTorch's
# record_param_comms, and the collective names themselves
COMMUNICATION = (r"(?i)^nccl|^rccl|c10d::|processgroup|record_param_comms|all_?reduce|all_?gather"
                 r"|reduce_?scatter|all_?to_?all")
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


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def macros() -> str:
    """The CREATE MACRO statements of the classes."""
    scalar = ", ".join(_quoted(n) for n in SCALAR_READS)
    memory = _quoted("^(" + "|".join(MEMORY) + ")")
    return f"""
CREATE OR REPLACE MACRO host_is_communication(kind, name) AS
    kind IN ('cpu_op', 'python', 'other') AND regexp_matches(name, {_quoted(COMMUNICATION)});
CREATE OR REPLACE MACRO host_is_sync(kind, name) AS
    (kind = 'sync_api' AND contains(name, {_quoted(SYNC_API_WORD)}))
    OR (kind = 'cpu_op' AND name IN ({scalar}));
CREATE OR REPLACE MACRO host_is_blocking_copy(kind, name) AS
    kind IN ('runtime', 'driver') AND regexp_matches(name, {_quoted(COPY)}) AND NOT contains(name, 'Async');
CREATE OR REPLACE MACRO host_is_memory(kind, name) AS
    kind IN ('runtime', 'driver') AND regexp_matches(name, {memory});
"""


# the SQL conditions on a host op `h` that the advice rules cite calls by
SYNC_CALLS = "host_is_sync(h.kind, h.name) OR host_is_blocking_copy(h.kind, h.name)"
MEMORY_CALLS = "host_is_memory(h.kind, h.name)"
