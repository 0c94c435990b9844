"""What bounds a scope: the shares of its GPU span by avoidable cost (the verdict of
`traceq diagnose`, whose module docstring defines each), and the bound they give. Here, in
the advice, because the findings are ordered by it: the finding of the bound's cost comes
first (Fix first names what the verdict names); faster kernels win nothing while the GPU
waits for something else.
"""
from __future__ import annotations

from ..lazy import polars as pl

AVOIDABLE = ("data", "communication", "host", "launch", "sync", "memory_management", "copy", "warmup")
BOUNDS = ("gpu", *AVOIDABLE, "unattributed", "no_gpu", "unknown")
GPU_BOUND_AVOIDABLE_PCT = 10.0     # avoidable costs under this share of the span: GPU-bound
UNATTRIBUTED_BOUND_PCT = 50.0      # unexplained idle at least this share (and the largest): unattributed
# the findings that measure each avoidable cost (traceq/advice/rules)
FINDINGS_OF_BOUND = {
    "data": ("dataloader",), "communication": ("exposed_communication",), "host": ("host_bound", "idle_in_range"),
    "launch": ("launch_overhead",), "sync": ("remove_syncs",), "memory_management": ("allocator_churn",),
    "copy": ("pinned_memory",), "warmup": ("warmup",),
}


def shares(facts) -> dict[str, float]:
    """Every bound's share of the GPU span, % (defined in traceq.analyses.diagnose's docstring),
    and `idle` (all idle time in gaps >= the minimum gap) and `busy`."""
    span = facts.span_ns
    out = dict.fromkeys((*BOUNDS, "idle", "busy"), 0.0)
    if not span:
        return out
    g = facts.gaps
    ns = dict.fromkeys(out, 0)
    if g is not None and g.height:
        late = g.filter(~pl.col("queued").fill_null(False))
        queued = g.filter(pl.col("queued").fill_null(False))
        ns["idle"] = int(g["gap_ns"].sum())
        ns["data"] = int(g["data_ns"].sum())
        ns["communication"] = int(g["comm_ns"].sum())
        ns["sync"] = int(g["sync_ns"].sum() + g["copy_ns"].sum())
        memory = int(g["memory_ns"].sum())
        ns["memory_management" if facts.churn else "warmup"] += memory
        ns["warmup"] += int(g["warm_ns"].sum())
        ns["launch"] = int(late["launch_ns"].sum())
        ns["host"] = int(late["host_ns"].sum() + late["unattributed_ns"].sum())
        ns["unattributed"] = int(queued["launch_ns"].sum() + queued["host_ns"].sum() + queued["unattributed_ns"].sum())
    ns["communication"] += facts.exposed_comm_ns
    ns["copy"] = facts.exposed_copy_ns
    ns["busy"] = span - ns["idle"]
    ns["gpu"] = max(0, ns["busy"] - facts.exposed_comm_ns - facts.exposed_copy_ns)
    return {k: 100.0 * v / span for k, v in ns.items()}


def bound_of(sh: dict[str, float]) -> str:
    """The bound of the shares `shares` gives (a scope with GPU work)."""
    best = max(AVOIDABLE, key=lambda b: (sh[b], -AVOIDABLE.index(b)))
    if sh["unattributed"] >= UNATTRIBUTED_BOUND_PCT and sh["unattributed"] > sh[best]:
        return "unattributed"
    if sum(sh[b] for b in AVOIDABLE) < GPU_BOUND_AVOIDABLE_PCT:
        return "gpu"
    return best


def bound_for(facts) -> str | None:
    """The bound of a scope's RunFacts; None without GPU work (no_gpu)."""
    if facts is None or not facts.span_ns:
        return None
    return bound_of(shares(facts))
