"""Fused / foreach optimizer: the optimizer step as a swarm of per-parameter kernels.

Fires when: at least FUSED_MIN_PER_STEP optimizer kernels per step: kernels of category
optimizer, or kernels launched inside an optimizer-step context (`Optimizer.step#…`
region or cpu op); only on training traces.
Ruled out by: inference traces; fewer kernels per step (a foreach or fused optimizer
launches a handful of multi_tensor_apply kernels); below the floor.
Estimated gain: the optimizer kernels' GPU time per step (an upper bound: fusion replaces
them with a few kernels doing the same arithmetic, mostly removing launch and tail cost).
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding

FUSED_MIN_PER_STEP = 100


def fused_optimizer(scope, ev: Evidence) -> Finding | None:
    if not ev.training:
        return None
    opt = ev.ops.filter((pl.col("kind") == "kernel") & ~pl.col("in_zero_grad")
                        & ((pl.col("category") == "optimizer") | pl.col("in_optimizer")))
    per_step = opt["n"].sum() / max(ev.steps, 1)
    if per_step < FUSED_MIN_PER_STEP:
        return None
    return kernel_finding(
        "fused_optimizer", "optimizer", opt, ev,
        f"{opt['n'].sum():,} optimizer kernels ({per_step:,.0f} per step >= {FUSED_MIN_PER_STEP})",
        ev.said("use a fused or foreach optimizer: torch.optim.AdamW(params, fused=True) (or foreach=True; "
                "apex FusedAdam), so one step is a few multi-tensor kernels instead of several per parameter",
                "update all parameters with a few multi-tensor kernels instead of several per parameter: a fused "
                "multi-tensor optimizer, or the whole update compiled as one function (XLA: jax.jit, "
                "tf.function(jit_compile=True))"))
