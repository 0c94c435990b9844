"""Warm-up: the capture is spent on one-off start-up work, not on steady-state steps.

Fires when: GPU idle time falls while the host does one-off start-up work (host-API class
host_is_warmup, traceq/rules/host_api.py: context creation, module/library loading,
run-time compilation, framework JIT/compile ops; queries/advice_warm.sql), or while it
allocates device memory without ever giving memory back and allocating again (first-touch
allocations: the caching allocator growing, not churn).
Ruled out by: none of that idle time; below the floor. A capture not dominated by start-up
(under DOMINANT_PCT of the GPU span, and not the verdict's bound) lists it as "also seen": its start-up time is carved
out of the other causes all the same.
Estimated gain: none for the program: the time is real but paid once. It is what the
capture shows instead of steady state; the est. gain is that idle time, so the finding
ranks where it hides the other costs.
Such a capture gets no launch_overhead or allocator_churn finding (traceq.advice.findings):
start-up looks like both.
"""
from __future__ import annotations

from ..base import Evidence, Finding, ms
from ..bound import bound_for
from .stall_facts import calls_text, host_calls, ledger_ns, ledger_text
from ...rules.host_api import MEMORY_CALLS

DOMINANT_PCT = 25.0   # of the GPU span: start-up dominates the capture


def warmup_ns(stalls) -> tuple[int, int]:
    """(start-up idle ns, first-touch allocation idle ns) of the stall result's facts."""
    f = getattr(stalls, "facts", None)
    if f is None or f.gaps is None:
        return 0, 0
    warm = int(f.gaps["warm_ns"].sum())
    first_touch = 0 if f.churn else int(f.gaps["memory_ns"].sum())
    return warm, first_touch


def warmup(scope, ev: Evidence, stalls) -> Finding | None:
    warm, first_touch = warmup_ns(stalls)
    ns = warm + first_touch
    parts = []
    if not ns:   # none in the stall gaps: the ledger's (start-up before the first GPU op, ...)
        ns = ledger_ns(stalls, "warmup_ns")
        if not ns:
            return None
        parts.append(ledger_text(stalls, ns, ev, "doing one-off start-up work (module/library loading, JIT/compile, "
                                 "context creation, first allocations)"))
    f = stalls.facts
    span = f.span_ns or 0
    if warm:
        parts.append(f"GPU idle {ms(warm)} while the host did one-off start-up work"
                     + (f" (calls: {calls_text(f.warm_calls)})" if f.warm_calls.height else ""))
    if first_touch:
        calls = host_calls(scope, MEMORY_CALLS, stalls)
        parts.append(f"GPU idle {ms(first_touch)} in first-touch allocations ({f.allocs:,} allocations, {f.frees:,} "
                     f"frees, {f.reallocs:,} allocations after a free: memory is not churned; calls: {calls_text(calls)})")
    share = f"{100 * ns / span:.1f} % of the GPU span: " if span else ""
    fd = Finding(
        "warmup", "warmup", share + "; ".join(parts),
        ns / 1e6, ev.per_step_ms(ns),
        ev.said("this capture shows start-up, not steady state: profile steady-state steps (torch.profiler.schedule("
                "wait=1, warmup=2, active=3), or start the profiler after a few iterations; with torch.compile run the "
                "compiled model once before profiling); start-up costs then drop out of the verdict",
                "this capture shows start-up, not steady state: profile steady-state iterations (nsys "
                "--capture-range=cudaProfilerApi with cudaProfilerStart/Stop around them, or --delay), after module "
                "loading and JIT compilation; lazy loading (CUDA_MODULE_LOADING=LAZY) shortens start-up itself"))
    fd.base_ns = span or None
    fd.also = (not span or 100.0 * ns / span < DOMINANT_PCT) and bound_for(f) != "warmup"
    return fd
