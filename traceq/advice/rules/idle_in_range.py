"""Idle inside a user range: GPU idle time no stall cause explains, named by the NVTX /
annotation range the host was in (queries/advice_ranges.sql).

Fires when: the host was late (the op ending the gap was not launched yet) and did nothing
the stall vocabulary names (no collective, sync, copy, allocator, launch call or framework
op), inside a user range: the range's own work kept the GPU waiting.
Ruled out by: no such idle time; below the floor.
Estimated gain: that idle time per step (an upper bound: the range's work, overlapped with
GPU work or moved off the launching thread, no longer stalls the GPU).
"""
from __future__ import annotations

from ...text import shorten
from ..base import Evidence, Finding, ms


def idle_in_range(scope, ev: Evidence, stalls) -> Finding | None:
    f = getattr(stalls, "facts", None)
    if f is None or not f.ranges.height:
        return None
    r = f.ranges
    ns = int(r["idle_ns"].sum())
    if not ns:
        return None
    span = f.span_ns or 0
    top = r.row(0, named=True)
    shown = ", ".join(f"`{shorten(x['range'], 60)}` {ms(x['idle_ns'])} in {x['gaps']:,} gaps ({x['instances']:,} instances)"
                      for x in r.head(3).iter_rows(named=True)) + (f" and {r.height - 3} more" if r.height > 3 else "")
    share = f" ({100 * ns / span:.1f} % of the GPU span{ev.per_step(ns)})" if span else ""
    fd = Finding(
        "idle_in_range", "host",
        f"GPU idle {ms(ns)}{share} while the host, inside a user range, did nothing the trace names (no launch, "
        f"sync, copy, allocator or framework call) and the next GPU op was not yet launched: {shown}",
        ns / 1e6, ev.per_step_ms(ns),
        f"the GPU waits while the host is in `{shorten(top['range'], 60)}` doing work the trace does not record: "
        "find it with a CPU profile of that range (py-spy, nsys --sample=cpu), then move it off the launching "
        "thread, do it ahead of time (prefetch the next range's loads/copies while the GPU computes) or shorten it")
    fd.base_ns = span or None
    return fd
