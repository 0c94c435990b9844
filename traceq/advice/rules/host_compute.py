"""Host compute: the GPU idles while the host runs framework/Python code (CPU-bound).

Fires when: GPU idle time is attributed to host_compute (cpu ops / Python of a launching
process with no CUDA API call under them) in gaps the host was late for.
Ruled out by: no such idle time; host compute only in gaps whose next GPU op was already
launched when the gap began (the GPU waited on something else: HTA's idle rule, the op was
queued); below the floor.
Estimated gain: that idle time per step.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from .stall_facts import idle_text, late_row, queued_text


def host_compute(scope, ev: Evidence, stalls) -> Finding | None:
    row = late_row(stalls, "host_compute", "host_ns")
    if row is None or not row["idle_ns"]:
        return None
    return Finding(
        "host_bound", "host_compute", idle_text(row, ev, "computing on the CPU (framework/Python ops)") + queued_text(row),
        row["idle_ns"] / 1e6, ev.per_step_ms(row["idle_ns"]),
        ev.said("the CPU cannot keep the GPU fed: torch.compile (less Python and dispatcher work per step), CUDA graphs, "
                "a larger batch per launch, or move CPU-side work (preprocessing, logging, metrics) off the training "
                "thread",
                "the CPU cannot keep the GPU fed: move host-side work (preprocessing, logging, checks) off the "
                "launching thread, launch more work per call, or replay the launch sequence as a CUDA graph"))
