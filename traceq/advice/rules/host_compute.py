"""Host compute: the GPU idles while the host runs framework/Python code (CPU-bound).

Fires when: GPU idle time is attributed to host_compute (cpu ops / Python of a launching
process with no CUDA API call under them) in gaps the host was late for.
Ruled out by: no such idle time; host compute only in gaps whose next GPU op was already
launched when the gap began (the GPU waited on something else: HTA's idle rule, the op was
queued); below the floor.
Also counted: idle time with no host activity recorded at all in gaps the host was late
for, outside any user range (inside one, idle_in_range names it): the host ran code the
trace does not record (Python between ops, an application's own work) instead of issuing
the next GPU op.
Estimated gain: that idle time per step.
The advice names the loop the trace shows: training (backward/optimizer evidence) or
inference.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from .stall_facts import idle_text, late_row, ledger_ns, ledger_text, queued_text


def _unrecorded_ns(stalls) -> int:
    """Late idle time with no host activity recorded, outside the user ranges idle_in_range names."""
    f = stalls.facts
    if f.gaps is None:
        return 0
    ranged = int(f.ranges["idle_ns"].sum()) if f.ranges.height else 0
    return max(0, f.late_ns("unattributed_ns") - ranged)


def host_compute(scope, ev: Evidence, stalls) -> Finding | None:
    row = late_row(stalls, "host_compute", "host_ns")
    host_ns = row["idle_ns"] if row is not None else 0
    quiet = _unrecorded_ns(stalls)
    ns = (host_ns or 0) + quiet
    parts = []
    if not ns:   # none in the stall gaps: the ledger's (host work before the first GPU op of a step, ...)
        ns = ledger_ns(stalls, "host_compute_ns", "late_unattributed_ns")
        if not ns:
            return None
        parts.append(ledger_text(stalls, ns, ev, "computing on the CPU or running code the trace does not record"))
    if host_ns:
        parts.append(idle_text(row, ev, "computing on the CPU (framework/Python ops)") + queued_text(row))
    if quiet:
        span = stalls.facts.span_ns
        parts.append(f"GPU idle {quiet / 1e6:,.2f} ms ({100 * quiet / span:.1f} % of the GPU span{ev.per_step(quiet)}) "
                     "with no host activity recorded while the next GPU op was not yet launched (the host ran code "
                     "the trace does not record)")
    loop = "training" if ev.training else "inference/serving"
    batch = "a larger batch per launch" if ev.training else "batch more requests per forward"
    fd = Finding(
        "host_bound", "host_compute", "; ".join(parts),
        ns / 1e6, ev.per_step_ms(ns),
        ev.said("the CPU cannot keep the GPU fed: torch.compile (less Python and dispatcher work per step), CUDA graphs, "
                f"{batch}, or move CPU-side work (preprocessing, logging, metrics) off the {loop} "
                "thread",
                "the CPU cannot keep the GPU fed: move host-side work (preprocessing, logging, checks) off the "
                "launching thread, launch more work per call, or replay the launch sequence as a CUDA graph"))
    if quiet and stalls.facts.span_ns:
        fd.base_ns = stalls.facts.span_ns
    return fd
