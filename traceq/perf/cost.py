"""The per-op performance model's entry points: `op_cost(name, dims, types, concrete, strides)`
-> OpCost | None and `modelled(name)`; which names are modelled, and how their arguments are
laid out, is data in traceq/perf/ops.toml.

Nesting (how the roofline analysis uses these names; traceq/engine/op_owner.py): a GPU op
goes to the OUTERMOST modelled CPU op around its launch that is no *wrapper* (a call with a
call of its own family inside it), and that op's GPU time is every GPU op in its subtree not
taken that way, memsets and layout transposes included (TraceLens' PerfModel + TreePerf also
give an op its subtree's kernels). Hence:
- aten::convolution is modelled, aten::_convolution / cudnn_convolution / miopen_convolution
  are not: the bias add and the NCHW<->NHWC transposes they launch stay with the convolution;
- aten::linear -> aten::addmm (or -> matmul -> mm): the wrapper yields to the inner GEMM;
- aten::scaled_dot_product_attention -> _scaled_dot_product_flash_attention ->
  _flash_attention_forward gives the middle op (TraceLens' SDPA_fwd row): the innermost
  _flash_attention_* / _efficient_attention_* ops are NOT modelled. Without an inner attention
  op (SDPA's math fallback: bmm, softmax, ...), scaled_dot_product_attention owns them all;
- aten::to / _to_copy are not modelled: the aten::copy_ inside carries the kernel and both
  dtypes; layer_norm -> native_layer_norm and batch_norm -> native/cudnn/miopen_batch_norm give
  the inner op;
- an op of another family inside a modelled op (a copy_ that makes a GEMM operand contiguous)
  leaves its kernel to the outer op, whose time is then its whole subtree's.
The [not_modelled] table of ops.toml lists the names left out on purpose, with the reason.
"""
from __future__ import annotations

import re
import tomllib
from functools import lru_cache
from importlib import resources

from . import attention, conv, gemm, norm, pointwise
from .base import Args, OpCost

__all__ = ["OpCost", "op_cost", "modelled", "family_of", "table", "not_modelled"]


def run_model(entry: dict, name: str, a: Args) -> OpCost | None:
    model = entry["model"]
    if model in ("mm", "addmm", "matmul", "linear", "scaled_mm"):
        return getattr(gemm, model)(a)
    if model == "vendor_gemm":
        return gemm.vendor(a, entry["layout"])
    if model in ("attention", "attention_bwd"):
        return attention.attention(a, entry["q"], entry["layout"], entry.get("causal"),
                                   entry.get("align", "top_left"), entry.get("grad"),
                                   entry.get("out"))
    if model == "conv":
        return conv.forward(a, entry["layout"])
    if model == "conv_bwd":
        return conv.backward(a)
    if model == "norm":
        return norm.norm(a, entry["layout"], entry["kind"], entry.get("training"),
                         entry.get("mask"))
    if model in ("softmax", "softmax_bwd"):
        return pointwise.softmax(a, model == "softmax_bwd")
    if model == "reduce":
        return pointwise.reduce(a, name, entry["dim"])
    if model in ("embedding", "embedding_bwd"):
        return pointwise.embedding(a, model == "embedding_bwd")
    if model == "elementwise":
        return pointwise.elementwise(a, name)
    raise ValueError(f"traceq/perf/ops.toml: unknown model {model!r}")


@lru_cache(maxsize=1)
def table() -> tuple[dict[str, dict], tuple[tuple[re.Pattern, dict], ...], dict[str, str]]:
    """(exact name -> entry, (compiled pattern, entry) in file order, name -> why not modelled)."""
    data = tomllib.loads(resources.files("traceq").joinpath("perf/ops.toml").read_text())
    exact, patterns = {}, []
    for entry in data["op"]:
        for n in entry.get("names", ()):
            exact[n] = entry
        patterns += [(re.compile(p), entry) for p in entry.get("patterns", ())]
    return exact, tuple(patterns), dict(data.get("not_modelled", {}))


@lru_cache(maxsize=65536)
def entry_for(name: str) -> dict | None:
    exact, patterns, excluded = table()
    if name in exact:
        return exact[name]
    if name in excluded:
        return None
    for pattern, entry in patterns:
        if pattern.fullmatch(name):
            return entry
    return None


def modelled(name: str) -> bool:
    """Whether `name` has a model (cheap: a dict lookup, then the vendor patterns, cached)."""
    return isinstance(name, str) and entry_for(name) is not None


def not_modelled() -> dict[str, str]:
    """The names deliberately left out, with the reason (ops.toml [not_modelled])."""
    return dict(table()[2])


def op_cost(name: str, dims: list | None, types: list | None, concrete: list | None = None,
            strides: list | None = None) -> OpCost | None:
    """Flop and minimal traffic of one call of `name` with Kineto's `Input Dims`, `Input type`,
    `Concrete Inputs` and `Input Strides`; None when the op is not modelled or its arguments
    do not fit the formula. Never raises on odd input."""
    if not modelled(name):
        return None
    try:
        return run_model(entry_for(name), name, Args(dims, types, concrete, strides))
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, ZeroDivisionError,
            OverflowError, RecursionError):
        return None


# the op family of each model (the roofline's `category`, and what makes a call a wrapper)
FAMILY = {"mm": "gemm", "addmm": "gemm", "matmul": "gemm", "linear": "gemm", "scaled_mm": "gemm",
          "vendor_gemm": "gemm", "attention": "attention", "attention_bwd": "attention", "conv": "conv",
          "conv_bwd": "conv", "norm": "norm", "softmax": "softmax", "softmax_bwd": "softmax", "reduce": "reduce",
          "embedding": "embedding", "embedding_bwd": "embedding", "elementwise": "elementwise"}


def family_of(name: str) -> str | None:
    """The family of a modelled op's name (gemm, attention, conv, norm, softmax, reduce,
    embedding, elementwise); None when not modelled."""
    entry = entry_for(name) if isinstance(name, str) else None
    return None if entry is None else FAMILY[entry["model"]]
