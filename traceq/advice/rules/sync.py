"""Synchronization: the GPU idles while the host blocks on it.

Fires when: GPU idle time is attributed to synchronization (cuda/hip Device/Stream/Event
Synchronize, `.item()` = aten::item / aten::_local_scalar_dense) or to blocking_copy
(synchronous cudaMemcpy, copies from pageable memory).
Ruled out by: no such idle time (syncs while the GPU is busy cost nothing); below the floor.
Estimated gain: that idle time per step.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from ...rules.host_api import SYNC_CALLS
from .stall_facts import calls_text, cause_row, host_calls


def synchronization(scope, ev: Evidence, stalls) -> Finding | None:
    rows = [r for r in (cause_row(stalls, "synchronization"), cause_row(stalls, "blocking_copy")) if r]
    ns = sum(r["idle_ns"] for r in rows)
    if not ns:
        return None
    gaps = sum(r["gaps"] for r in rows)
    pct = sum(r["idle_pct"] or 0 for r in rows)
    split = ", ".join(f"{r['cause']} {r['idle_ns'] / 1e6:,.2f} ms" for r in rows if r["idle_ns"])
    calls = host_calls(scope, SYNC_CALLS, stalls)
    return Finding(
        "remove_syncs", "synchronization",
        f"GPU idle {ns / 1e6:,.2f} ms ({pct:.1f} % of the GPU span{ev.per_step(ns)}) in {gaps:,} gaps while the host was blocked "
        f"({split}); calls: {calls_text(calls) or 'none named'}",
        ns / 1e6, ev.per_step_ms(ns),
        ev.said("remove per-step host syncs: no .item()/.cpu()/print of GPU tensors or torch.cuda.synchronize() in the "
                "loop (accumulate metrics on the GPU, read them every N steps), and copy with non_blocking=True from "
                "pinned memory",
                "remove host syncs from the loop: synchronize only where the host needs a result "
                "(cudaDeviceSynchronize/cudaStreamSynchronize wait for all queued work), order work across streams "
                "with events (cudaEventRecord + cudaStreamWaitEvent), and replace synchronous cudaMemcpy by "
                "cudaMemcpyAsync from pinned memory (the hip* calls on ROCm)"))
