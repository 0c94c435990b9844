"""Allocator churn: the GPU waits while the host allocates and frees device memory.

Fires when: GPU idle time is attributed to memory_management (the host inside cudaMalloc/
cudaFree/hipMalloc/hipFree/cudaHostAlloc/cudaFreeHost/cuMem* while the GPU idles).
Ruled out by: no such idle time; no churn: fewer than 2 calls that give memory back
(cudaFree, hipFree, cuMemFree/Release/Unmap, host frees) or fewer than 2 allocations after
the first of them (traceq.advice.run_facts: RunFacts.churn). First allocations alone are
the caching allocator growing at warm-up (the warmup rule's evidence), not churn; below the
floor. (Allocator calls that overlap GPU work
cost nothing and are not counted.)
Estimated gain: that idle time per step.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from ...rules.host_api import MEMORY_CALLS
from .stall_facts import calls_text, cause_row, host_calls, idle_text


def allocator_churn(scope, ev: Evidence, stalls) -> Finding | None:
    row = cause_row(stalls, "memory_management")
    if row is None or not row["idle_ns"]:
        return None
    facts = stalls.facts      # traceq.advice.findings always provides them
    if not facts.churn:
        return None
    calls = host_calls(scope, MEMORY_CALLS, stalls)
    churn = f"; {facts.frees:,} frees, {facts.reallocs:,} allocations after the first free"
    return Finding(
        "allocator_churn", "memory_management",
        f"{idle_text(row, ev, 'allocating/freeing memory')}; calls: {calls_text(calls)}{churn}",
        row["idle_ns"] / 1e6, ev.per_step_ms(row["idle_ns"]),
        ev.said("keep PyTorch's caching allocator on (no PYTORCH_NO_CUDA_MEMORY_CACHING / HIP equivalent), do not call "
                "torch.cuda.empty_cache() inside the loop, keep tensor shapes stable (or set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) so memory is reused instead of cudaMalloc/cudaFree "
                "each step",
                "allocate device memory once, outside the loop, and reuse it, or allocate from the stream-ordered pool "
                "(cudaMallocAsync/cudaFreeAsync with a cudaMemPool release threshold; hipMallocAsync on ROCm), so the "
                "loop stops calling cudaMalloc/cudaFree"))
