"""Fused / foreach optimizer: the optimizer step as a swarm of per-parameter kernels.

Fires when: at least FUSED_MIN_PER_STEP optimizer kernels per step: kernels of category
optimizer, or kernels launched inside an optimizer-step context (`Optimizer.step#…`
region or cpu op); only on training traces.
Ruled out by: inference traces; fewer kernels per step (a foreach or fused optimizer
launches a handful of multi_tensor_apply kernels); kernels of optimizers that are already
fused or multi-tensor (multi_tensor_apply, foreach, fused Adam/SGD, fbgemm's
split_embedding*_rowwise_adagrad and other fused embedding updates) do not count; below the
floor.
The advice names the optimizer class the trace shows (`Optimizer.step#SGD.step` -> SGD):
fused=True where PyTorch has a fused implementation of it, else foreach=True.
Estimated gain: the optimizer kernels' GPU time per step (an upper bound: fusion replaces
them with a few kernels doing the same arithmetic, mostly removing launch and tail cost).
"""
from __future__ import annotations

from ...lazy import polars as pl

from ..base import Evidence, Finding, kernel_finding

FUSED_MIN_PER_STEP = 100
ALREADY_FUSED = (r"(?i)multi_tensor|foreach|fused_?(adam|sgd|adagrad|lamb|optim)|FusedOptim|rowwise_adagrad"
                 r"|split_embedding\w*_(adagrad|adam|sgd|lamb|lars)|_fused_|apex::")
# PyTorch optimizers with a fused (single-kernel) implementation (torch.optim, 2.4+)
HAS_FUSED = ("Adam", "AdamW", "SGD", "Adagrad")


def fused_optimizer(scope, ev: Evidence) -> Finding | None:
    if not ev.training:
        return None
    opt = ev.ops.filter((pl.col("kind") == "kernel") & ~pl.col("in_zero_grad")
                        & ((pl.col("category") == "optimizer") | pl.col("in_optimizer"))
                        & ~pl.col("name").str.contains(ALREADY_FUSED))
    per_step = opt["n"].sum() / max(ev.steps, 1)
    if per_step < FUSED_MIN_PER_STEP:
        return None
    return kernel_finding(
        "fused_optimizer", "optimizer", opt, ev,
        f"{opt['n'].sum():,} optimizer kernels ({per_step:,.0f} per step >= {FUSED_MIN_PER_STEP})",
        ev.said(_torch_advice(ev.optimizers),
                "update all parameters with a few multi-tensor kernels instead of several per parameter: a fused "
                "multi-tensor optimizer, or the whole update compiled as one function (XLA: jax.jit, "
                "tf.function(jit_compile=True))"))


def _torch_advice(names: tuple[str, ...]) -> str:
    """The fix for the optimizer classes the trace names (none named: the generic fix)."""
    if not names:
        return ("use a fused or foreach optimizer: fused=True (Adam, AdamW, SGD, Adagrad) or foreach=True (the "
                "others) on the torch.optim optimizer, so one step is a few multi-tensor kernels instead of several "
                "per parameter")
    fixes = [f"torch.optim.{n}(params, fused=True)" if n in HAS_FUSED else f"torch.optim.{n}(params, foreach=True)"
             if n in TORCH_OPTIMIZERS else f"a fused or multi-tensor implementation of {n}" for n in names]
    return (f"the step of {', '.join(names)} runs several kernels per parameter: use " + "; ".join(fixes)
            + ", so one step is a few multi-tensor kernels")


TORCH_OPTIMIZERS = ("Adadelta", "Adafactor", "Adagrad", "Adam", "AdamW", "Adamax", "ASGD", "NAdam", "RAdam",
                    "RMSprop", "Rprop", "SGD", "SparseAdam", "LBFGS")
