"""zero_grad(set_to_none=True): gradients zero-filled by memset/fill kernels.

Fires when: memset / fill kernels (kind memset, category memset, or a fill/zero kernel
name) are launched from a zero_grad context: the launching runtime call lies inside a
region or cpu op named like `Optimizer.zero_grad#…` / `*zero_grad*`; only on training traces.
Ruled out by: inference traces; zero_grad regions that launch no GPU work
(set_to_none=True already, the default since PyTorch 2.0); memsets launched elsewhere
(allocator/NCCL/cuBLAS workspace memsets); fills below the floor.
Estimated gain: those fills' GPU time per step.
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding

FILL = r"(?i)fill|zero|memset"


def zero_grad(scope, ev: Evidence) -> Finding | None:
    if not ev.training:
        return None
    fills = ev.ops.filter(pl.col("in_zero_grad") & ((pl.col("kind") == "memset") | (pl.col("category") == "memset")
                                                    | pl.col("name").str.contains(FILL)))
    if fills["n"].sum() == 0:
        return None
    return kernel_finding(
        "zero_grad_set_to_none", "memset", fills, ev,
        f"{fills['n'].sum():,} memset/fill kernels launched inside zero_grad",
        "optimizer.zero_grad(set_to_none=True) (the default since PyTorch 2.0): gradients are freed instead of "
        "zero-filled, and the next backward writes them without an extra read")
