"""Exposed communication: the step waits for collectives that no computation hides.

Fires when: communication kernels (NCCL/RCCL/... : category communication) run while no
compute kernel runs on the rank's GPUs (exposed communication, queries/advice_busy.sql),
and/or the GPU idles while the host waits inside a collective (stall cause communication).
Ruled out by: no communication kernels and no such waits; below the floor (1 % of the GPU
span).
Evidence: the exposed time, the share hidden, and per collective kernel its launches, time,
mean message size and NCCL-tests bus bandwidth (where the trace gives message sizes).
Estimated gain: that time per step (an upper bound: overlapping communication with compute
hides it; a straggler's lateness is removed only by fixing the straggler).
Advice follows the collectives the trace shows: all-gather with reduce-scatter (sharded
data parallel: FSDP/ZeRO, training only), all-reduce in a training step (DDP gradient
buckets), collectives of a PyTorch inference trace (tensor/sequence parallel), many small
collectives (MANY_PER_STEP per step, under 1 ms each: bucket/coalesce them), otherwise
overlap on a separate stream.
"""
from __future__ import annotations

from ..base import Evidence, Finding, ms, short_name
from .stall_facts import cause_row

SMALL_COLLECTIVE_NS = 1_000_000    # collectives under 1 ms each, many per step: latency, not bandwidth
MANY_PER_STEP = 50


def _bus_factor(name: str, n: int | None) -> float:
    """NCCL-tests' bus-bandwidth factor of a collective kernel (queries/collectives.sql), by
    its type from the kernel name (traceq.rules.collective_type)."""
    from ...rules.collective_type import collective_type

    if not n or n < 2:
        return 1.0
    kind = collective_type(name)
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def _size_words(r: dict) -> str:
    """", mean message 7.9 MB, bus bandwidth 45.3 GB/s" for launches with a message size
    (gpu_ops.bytes: In/Out msg nelems × dtype size, written by PyTorch >= 2.1); nothing without."""
    if not r.get("sized") or not r.get("sized_ns"):
        return ""
    algbw = r["bytes"] / r["sized_ns"]           # bytes per ns = GB/s
    return (f", mean message {r['bytes'] / r['sized'] / 1e6:,.1f} MB, bus bandwidth "
            f"{algbw * _bus_factor(r['name'], r.get('group_size')):,.1f} GB/s")


def exposed_communication(scope, ev: Evidence, stalls) -> Finding | None:
    f = getattr(stalls, "facts", None)
    if f is None:
        return None
    row = cause_row(stalls, "communication")
    wait_ns = int(row["idle_ns"] or 0) if row else 0
    ns = f.exposed_comm_ns + wait_ns
    if not ns:
        return None
    span = f.span_ns or 0
    share = f" ({100 * ns / span:.1f} % of the GPU span{ev.per_step(ns)})" if span else ""
    parts = []
    if f.comm_ns:
        hidden = f.comm_ns - f.exposed_comm_ns
        parts.append(f"communication kernels run {ms(f.comm_ns)}, {100 * hidden / f.comm_ns:.0f} % of it under compute, "
                     f"{ms(f.exposed_comm_ns)} with no compute running")
    if wait_ns:
        parts.append(f"GPU idle {ms(wait_ns)} while the host waited inside collectives")
    kernels = f.comm_kernels
    if kernels.height:
        top = ", ".join(f"{short_name(r['name'], 60)} ×{r['n']:,} ({ms(r['ns'])}{_size_words(r)})"
                        for r in kernels.head(3).iter_rows(named=True))
        parts.append(f"collectives: {top}" + (f" and {kernels.height - 3} more" if kernels.height > 3 else ""))
    names = " ".join(kernels["name"].to_list()).lower() if kernels.height else ""
    n = int(kernels["n"].sum()) if kernels.height else 0
    per_step = n / max(ev.steps, 1)
    mean = (int(kernels["ns"].sum()) / n) if n else 0
    advice = []
    joined = names.replace("_", "")
    if "allgather" in joined and "reducescatter" in joined and ev.training:
        advice.append(ev.said(
            "sharded data parallel (all-gather + reduce-scatter): prefetch the next all-gather so it overlaps compute "
            "(FSDP forward_prefetch=True, backward_prefetch=BackwardPrefetch.BACKWARD_PRE; FSDP2 reshard_after_forward / "
            "ZeRO overlap_comm)",
            "sharded parameters (all-gather + reduce-scatter): issue the next all-gather ahead, on its own stream, so it "
            "overlaps the current layer's compute"))
    elif "allreduce" in joined and ev.training:
        advice.append(ev.said(
            "gradient all-reduce (DDP): let it overlap backward: tune DistributedDataParallel(bucket_cap_mb=...) so "
            "buckets start early and are few, gradient_as_bucket_view=True, no_sync() during gradient accumulation, "
            "and keep the model's last layers from holding back the first bucket",
            "gradient all-reduce: start each bucket's all-reduce as soon as its gradients are ready, on a separate "
            "stream, so it overlaps the rest of the backward pass; fewer, larger buckets"))
    if n and per_step >= MANY_PER_STEP and mean < SMALL_COLLECTIVE_NS:
        advice.append(f"{per_step:,.0f} collectives per step averaging {mean / 1e3:.0f} µs each pay their latency "
                      "one by one: coalesce small tensors into fewer, larger collectives (buckets, ncclGroupStart/End)")
    if not advice and not ev.training and ev.pytorch:
        # a PyTorch model without backward or optimizer serves: tensor/sequence-parallel
        # collectives inside the forward pass (an MPI application without PyTorch is no model)
        advice.append("inference collectives (tensor/sequence parallel) sit on the critical path of every forward: "
                      "overlap them with the next GEMM (async tensor parallelism) or fuse them into it, use a custom "
                      "one-shot all-reduce for small messages, or fewer ranks per replica where the model fits")
    if not advice:
        advice.append(ev.said(
            "overlap communication with compute: issue collectives asynchronously (async_op=True, wait just before "
            "the result is needed) so independent compute runs meanwhile; fewer, larger collectives",
            "overlap communication with compute: run collectives on their own stream and wait on an event just "
            "before the result is needed; fewer, larger collectives"))
    advice.append("when one rank is late, the others wait in every collective: traceq ranks names the straggler")
    fd = Finding("exposed_communication", "communication",
                 f"exposed communication {ms(ns)}{share}: " + "; ".join(parts),
                 ns / 1e6, ev.per_step_ms(ns), "; ".join(advice))
    fd.base_ns = span or None
    return fd
