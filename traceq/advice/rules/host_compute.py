"""Host compute: the GPU idles while the host runs framework/Python code (CPU-bound).

Fires when: GPU idle time is attributed to host_compute (cpu ops / Python of a launching
process with no CUDA API call under them).
Ruled out by: no such idle time; below the floor.
Estimated gain: that idle time per step.
"""
from __future__ import annotations

from ..base import Evidence, Finding
from ._stall import cause_row, idle_text


def host_compute(scope, ev: Evidence, stalls) -> Finding | None:
    row = cause_row(stalls, "host_compute")
    if row is None or not row["idle_ns"]:
        return None
    return Finding(
        "host_bound", "host_compute", idle_text(row, ev, "computing on the CPU (framework/Python ops)"),
        row["idle_ns"] / 1e6, ev.per_step_ms(row["idle_ns"]),
        "the CPU cannot keep the GPU fed: torch.compile (less Python and dispatcher work per step), CUDA graphs, "
        "a larger batch per launch, or move CPU-side work (preprocessing, logging, metrics) off the training thread")
