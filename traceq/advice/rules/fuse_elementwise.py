"""Fuse elementwise: an uncompiled model spends a large share of GPU time in unfused
elementwise and normalization kernels, each reading and writing its tensors in memory.

Fires when: kernels of category elementwise or normalization from generic kernel
libraries (PyTorch's ATen, user kernels: not cuDNN/MIOpen/Apex/TransformerEngine/... fused
kernels; not those launched by the optimizer step or zero_grad, which other rules cite) are
at least MIN_PCT of GPU time, and the trace shows no compiled code (no
Triton/nvFuser kernels, no torch.compile runtime ops: Evidence.compiled).
Ruled out by: a compiled model (its elementwise work is already fused); a smaller share;
below the floor.
Estimated gain: half of those kernels' time per step (fusing a chain of k elementwise
kernels reads and writes memory once instead of k times; half is a conservative bound).
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding

MIN_PCT = 25.0
FUSED_LIBRARIES = ["cuDNN", "MIOpen", "Apex", "TransformerEngine", "flash-attn", "FlashInfer", "xformers",
                   "TensorRT", "TensorRT-LLM", "vLLM", "SGLang", "AITER", "fbgemm", "Triton", "DeepGEMM"]


def fuse_elementwise(scope, ev: Evidence) -> Finding | None:
    if ev.compiled:
        return None
    # the optimizer's and zero_grad's kernels are fused_optimizer's and zero_grad's evidence
    ops = ev.ops.filter((pl.col("kind") == "kernel") & pl.col("category").is_in(["elementwise", "normalization"])
                        & ~pl.col("in_optimizer") & ~pl.col("in_zero_grad"))
    if "library" in ops.columns:
        ops = ops.filter(~pl.col("library").fill_null("").is_in(FUSED_LIBRARIES))
    ns = ops["dur_ns"].sum()
    if not ns or ev.pct(ns) < MIN_PCT:
        return None
    fd = kernel_finding(
        "fuse_elementwise", "elementwise", ops, ev,
        f"{ops['n'].sum():,} unfused elementwise/normalization kernels in a model without compiled kernels",
        ev.said("fuse them: torch.compile(model) (Inductor fuses chains of elementwise, normalization and activation "
                "ops into one Triton kernel each), or fused kernels for the hot ones (fused LayerNorm/RMSNorm, "
                "fused rotary embedding, fused bias+activation)",
                "fuse chains of elementwise and normalization kernels into one kernel each (a compiler such as XLA, "
                "TensorRT or a hand-written fused kernel), so each tensor is read and written once"),
        "; est. gain: half of their time (fusion removes most of their memory traffic)")
    fd.est_gain_ms_per_step /= 2
    fd.cited_ms = [m / 2 for m in fd.cited_ms]     # what hotspots calls avoidable: the estimated part
    return fd
