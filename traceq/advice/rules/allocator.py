"""Allocator churn: the GPU waits while the host allocates and frees device memory.

Fires when: GPU idle time is attributed to memory_management (the host inside cudaMalloc/
cudaFree/hipMalloc/hipFree/cudaHostAlloc/cudaFreeHost/cuMem* while the GPU idles).
Ruled out by: no such idle time; no churn and no recurrence: fewer than 2 calls that give
memory back (cudaFree, hipFree, cuMemFree/Release/Unmap, host frees) or fewer than 2
allocations after the first of them (traceq.advice.run_facts: RunFacts.churn), and no
memory_management time in the time ledger (whose allocator calls recur through the capture:
traceq/queries/ledger.sql, lg_recurring). One-off first allocations are the caching
allocator growing at warm-up (the ledger's warmup label, the warmup rule), not churn; below
the floor. (Allocator calls that overlap GPU work cost nothing and are not counted.)
Estimated gain: that idle time per step (the ledger's memory_management time).
"""
from __future__ import annotations

from ..base import Evidence, Finding
from ...rules.host_api import MEMORY_CALLS
from .stall_facts import calls_text, cause_row, host_calls, idle_text, ledger_ns, ledger_text


def allocator_churn(scope, ev: Evidence, stalls) -> Finding | None:
    facts = stalls.facts      # traceq.advice.findings always provides them
    row = cause_row(stalls, "memory_management")
    recurring = ledger_ns(stalls, "memory_management_ns")
    if not facts.churn and not recurring:
        return None
    if row is not None and row["idle_ns"]:
        ns, text = row["idle_ns"], idle_text(row, ev, "allocating/freeing memory")
    elif recurring:
        ns, text = recurring, ledger_text(stalls, recurring, ev, "allocating/freeing memory")
    else:
        return None
    calls = host_calls(scope, MEMORY_CALLS, stalls)
    churn = (f"; {facts.frees:,} frees, {facts.reallocs:,} allocations after the first free" if facts.churn else
             f"; {facts.allocs:,} allocations, {facts.frees:,} frees: the calls recur through the capture (not "
             "one-off first touches)")
    return Finding(
        "allocator_churn", "memory_management",
        f"{text}; calls: {calls_text(calls)}{churn}",
        ns / 1e6, ev.per_step_ms(ns),
        ev.said("keep PyTorch's caching allocator on (no PYTORCH_NO_CUDA_MEMORY_CACHING / HIP equivalent), do not call "
                "torch.cuda.empty_cache() inside the loop, keep tensor shapes stable (or set "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) so memory is reused instead of cudaMalloc/cudaFree "
                "each step",
                "allocate device memory once, outside the loop, and reuse it, or allocate from the stream-ordered pool "
                "(cudaMallocAsync/cudaFreeAsync with a cudaMemPool release threshold; hipMallocAsync on ROCm), so the "
                "loop stops calling cudaMalloc/cudaFree"))
